import { startRedisCluster } from '../../test/harness/redis-cluster';
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
  const cluster = await startRedisCluster({ masters: 3 });
  const unregister = onCleanup(
    'redis cluster',
    () => cluster.destroy(),
    () => cluster.processes.forEach((p) => p.kill?.()),
  );
  const urls = cluster.nodes.map((n) => `redis://${n.host}:${n.port}`);
  const svc = await start({ REDIS_CLUSTER_NODES: cluster.envValue });
  try {
    return { rows: await run(svc, urls), masters: urls.length };
  } finally {
    await svc.proc.stop();
    await cluster.destroy();
    unregister();
  }
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
