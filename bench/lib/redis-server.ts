import Redis from 'ioredis';
import { type RedisClusterOptions, startRedisCluster } from '../../test/harness/redis-cluster';
import { startRedisServer } from '../../test/harness/redis-server';
import { onCleanup } from './cleanup';

export interface BenchRedis {
  url: string;
  port: number;
  version: string;
  process: { pid: number };
  /** Runs one command on a short-lived connection (INFO, FLUSHALL, DBSIZE...). */
  command(name: string, ...args: (string | number)[]): Promise<unknown>;
  stop(): Promise<void>;
}

/**
 * A throwaway `redis-server` from the test harness's launcher (the one the tests use), without AOF (the benchmarks
 * measure the service, not fsync), stopped and its dir deleted when the benchmark ends, however it ends.
 */
export async function startBenchRedis(): Promise<BenchRedis> {
  const server = await startRedisServer({ appendonly: false });
  const unregister = onCleanup(
    `redis-server :${server.port}`,
    () => server.destroy(),
    () => void server.kill(),
  );
  const command = async (name: string, ...args: (string | number)[]): Promise<unknown> => {
    const c = new Redis(server.url, { maxRetriesPerRequest: 1, connectTimeout: 2000 });
    return c.call(name, ...args).finally(() => c.disconnect());
  };
  const version = /redis_version:(\S+)/.exec(String(await command('INFO', 'server')))?.[1] ?? 'unknown';
  return { url: server.url, port: server.port, version, process: { pid: server.pid ?? 0 }, command, stop: () => server.destroy().then(unregister) };
}

/** A fresh Redis Cluster (test/harness/redis-cluster.ts): each master's URL and pid, the service's env for it, its stop. */
export async function startBenchCluster(opts: RedisClusterOptions) {
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
    stop: () => cluster.destroy().then(unregister),
  };
}
