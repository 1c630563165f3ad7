import Redis from 'ioredis';
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
 * A throwaway `redis-server` from the test harness's launcher (the same one the
 * tests use), without AOF (the benchmark measures the HTTP stack, not fsync).
 * Stopped and its dir deleted when the benchmark ends, however it ends.
 */
export async function startBenchRedis(): Promise<BenchRedis> {
  const server = await startRedisServer({ appendonly: false });
  const unregister = onCleanup(
    `redis-server :${server.port}`,
    () => server.destroy(),
    () => void server.kill(),
  );
  const url = server.url;

  const command = async (name: string, ...args: (string | number)[]): Promise<unknown> => {
    const c = new Redis(url, { lazyConnect: true, maxRetriesPerRequest: 1, connectTimeout: 2000 });
    try {
      await c.connect();
      return await c.call(name, ...args);
    } finally {
      c.disconnect();
    }
  };
  const info = String(await command('INFO', 'server'));
  const version = /redis_version:(\S+)/.exec(info)?.[1] ?? 'unknown';

  return {
    url,
    port: server.port,
    version,
    process: { pid: server.pid ?? 0 },
    command,
    async stop() {
      await server.destroy();
      unregister();
    },
  };
}
