import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Redis from 'ioredis';
import { onCleanup } from './cleanup';
import { freePort } from './net';
import { ManagedProcess, spawnManaged, waitUntilServing } from './proc';

export interface BenchRedis {
  url: string;
  port: number;
  version: string;
  process: ManagedProcess;
  /** Runs one command on a short-lived connection (INFO, FLUSHALL, DBSIZE...). */
  command(name: string, ...args: (string | number)[]): Promise<unknown>;
  stop(): Promise<void>;
}

/**
 * A throwaway `redis-server` on a free loopback port: temp working dir, no RDB,
 * no AOF (the benchmark measures the HTTP stack, not fsync). Stopped and its
 * dir deleted when the benchmark ends, however it ends.
 */
export async function startBenchRedis(bin = 'redis-server'): Promise<BenchRedis> {
  const port = await freePort();
  const dir = mkdtempSync(join(tmpdir(), 'rp-bench-redis-'));
  const removeDir = () => rmSync(dir, { recursive: true, force: true });
  const unregisterDir = onCleanup(`redis temp dir ${dir}`, removeDir, removeDir);
  const proc = spawnManaged({
    name: `redis-server :${port}`,
    command: bin,
    args: [
      '--port', String(port),
      '--bind', '127.0.0.1',
      '--dir', dir,
      '--save', '',
      '--appendonly', 'no',
      '--daemonize', 'no',
      '--protected-mode', 'yes',
      '--maxmemory-policy', 'noeviction',
      '--loglevel', 'warning',
    ],
    stdout: 'capture',
  });
  await waitUntilServing(proc, port, undefined, 10_000);
  const url = `redis://127.0.0.1:${port}`;

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
    port,
    version,
    process: proc,
    command,
    async stop() {
      await proc.stop(5000);
      removeDir();
      unregisterDir();
    },
  };
}
