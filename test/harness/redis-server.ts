import { ChildProcess, spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { randomBytes } from 'node:crypto';
import { freePort } from './free-port';
import { waitForPort } from '../../src/redis/managed-redis';

/** A real `redis-server` on a free loopback port, owned by one test suite. */
export interface RedisServerHandle {
  host: string;
  port: number;
  url: string;
  dir: string;
  /** Stops Redis gracefully (SIGTERM: AOF is flushed). */
  stop(): Promise<void>;
  /** SIGKILL, no flush. */
  kill(): Promise<void>;
  /** Starts it again on the same port and data folder (after stop or kill). */
  start(): Promise<void>;
  /** stop() then start(): data survives through the AOF. */
  restart(): Promise<void>;
  /** stop() and delete the data folder. */
  destroy(): Promise<void>;
}

export interface RedisServerOptions {
  port?: number;
  /** Extra `--name value` arguments. */
  args?: string[];
  appendonly?: boolean;
}

/** Starts `redis-server` (AOF on, noeviction, like production) and waits until it accepts connections. */
export async function startRedisServer(opts: RedisServerOptions = {}): Promise<RedisServerHandle> {
  const port = opts.port ?? (await freePort());
  const dir = mkdtempSync(join(tmpdir(), 'rp-redis-'));
  let child: ChildProcess | undefined;
  const args = [
    '--port', String(port),
    '--bind', '127.0.0.1',
    '--dir', dir,
    '--appendonly', opts.appendonly === false ? 'no' : 'yes',
    '--appendfsync', 'always',
    '--save', '',
    '--maxmemory-policy', 'noeviction',
    '--daemonize', 'no',
    '--loglevel', 'warning',
    ...(opts.args ?? []),
  ];
  const exited = () => !child || child.exitCode !== null || child.signalCode !== null;
  const waitExit = (c: ChildProcess) => new Promise<void>((r) => (c.exitCode !== null || c.signalCode !== null ? r() : c.once('exit', () => r())));

  const handle: RedisServerHandle = {
    host: '127.0.0.1',
    port,
    url: `redis://127.0.0.1:${port}`,
    dir,
    async start() {
      if (!exited()) return;
      const c = spawn('redis-server', args, { stdio: ['ignore', 'ignore', 'inherit'] });
      child = c;
      await waitForPort(port, c, 10_000);
    },
    async stop() {
      if (exited()) return;
      const c = child!;
      c.kill('SIGTERM');
      await waitExit(c);
    },
    async kill() {
      if (exited()) return;
      const c = child!;
      c.kill('SIGKILL');
      await waitExit(c);
    },
    async restart() {
      await handle.stop();
      await handle.start();
    },
    async destroy() {
      await handle.stop();
      rmSync(dir, { recursive: true, force: true });
    },
  };
  await handle.start();
  return handle;
}

export { waitForPort };

/** A key prefix unique to one test, so suites sharing a server never see each other's keys. */
export const randomPrefix = () => `t${randomBytes(4).toString('hex')}`;
