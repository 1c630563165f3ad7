import { type RedisClusterOptions, startRedisCluster } from '../../test/harness/redis-cluster';
import { onCleanup } from './cleanup';
import { commandStats, statsDelta } from './command-stats';
import type { Measured } from './measure';
import type { Service } from './service-http';

/**
 * A fresh 3-master Redis Cluster and the built service on it (started by `start` with the cluster's nodes), for
 * `run`, which gets the service and each master's URL; both are stopped afterwards (or by the bench's cleanup).
 */
export async function onClusterService<R>(
  start: (redisEnv: Record<string, string>) => Promise<Service>,
  run: (svc: Service, urls: string[]) => Promise<R[]>,
): Promise<{ rows: R[]; masters: number }> {
  const cluster = await startBenchCluster({ masters: 3 });
  const svc = await start(cluster.redisEnv);
  try {
    return { rows: await run(svc, cluster.urls), masters: cluster.urls.length };
  } finally {
    await svc.proc.stop();
    await cluster.stop();
  }
}

/** A Redis Cluster a benchmark started: each master's URL and pid, the service's env for it, and its stop. */
export interface BenchCluster {
  urls: string[];
  /** The redis-server pid of each master, in the order of `urls` (for CPU figures). */
  pids: number[];
  /** REDIS_CLUSTER_NODES for the service. */
  redisEnv: Record<string, string>;
  stop(): Promise<void>;
}

/** A fresh Redis Cluster (test/harness/redis-cluster.ts), destroyed by `stop` or by the bench's cleanup however it ends. */
export async function startBenchCluster(opts: RedisClusterOptions): Promise<BenchCluster> {
  const cluster = await startRedisCluster(opts);
  const unregister = onCleanup(
    'redis cluster',
    () => cluster.destroy(),
    () => cluster.processes.forEach((p) => p.kill?.()),
  );
  return {
    urls: cluster.nodes.map((n) => `redis://${n.host}:${n.port}`),
    pids: cluster.processes.slice(0, cluster.nodes.length).map((p) => p.pid ?? 0),
    redisEnv: { REDIS_CLUSTER_NODES: cluster.envValue },
    async stop() {
      await cluster.destroy();
      unregister();
    },
  };
}

/** A measured load (`load`), its rate, p99 and statuses, and the EVALSHA calls it made on each master of `urls`. */
export async function measuredOnMasters(urls: string[], load: () => Promise<Measured>) {
  const before = await Promise.all(urls.map((u) => commandStats([u])));
  const m = await load();
  const after = await Promise.all(urls.map((u) => commandStats([u])));
  return {
    m,
    rps: m.load.total / m.load.durationS,
    p99: m.load.p99,
    statuses: m.load.statusCodes,
    evalshaPerMaster: urls.map((_, i) => statsDelta(before[i], after[i]).evalsha?.calls ?? 0),
  };
}
