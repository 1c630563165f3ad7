import { randomBytes } from 'node:crypto';
import { freePort } from './free-port';
import { dataNodeArgs, makeTempDir, RedisProcess, removeDir } from './redis-process';

/** A real `redis-server` on a free loopback port, owned by one test suite. */
export interface RedisServerHandle {
  host: string;
  port: number;
  url: string;
  dir: string;
  /** The process id while it runs. */
  readonly pid: number | undefined;
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

/**
 * Starts `redis-server` (AOF on, noeviction, like production) and waits until it
 * accepts connections. The process and its folder are also registered with the
 * harness watchdog, so a crashed or killed test run leaves nothing behind.
 */
export async function startRedisServer(opts: RedisServerOptions = {}): Promise<RedisServerHandle> {
  const port = opts.port ?? (await freePort());
  const dir = makeTempDir('rp-redis-');
  const proc = new RedisProcess(port, dir, dataNodeArgs(port, dir, { appendonly: opts.appendonly !== false, appendfsync: 'always' }, opts.args ?? []));
  const handle: RedisServerHandle = {
    host: '127.0.0.1',
    port,
    url: `redis://127.0.0.1:${port}`,
    dir,
    get pid() {
      return proc.pid;
    },
    start: () => proc.start(),
    stop: () => proc.stop(),
    kill: () => proc.kill(),
    async restart() {
      await proc.stop();
      await proc.start();
    },
    async destroy() {
      await proc.stop();
      removeDir(dir);
    },
  };
  await proc.start();
  return handle;
}

/** A key prefix unique to one test, so suites sharing a server never see each other's keys. */
export const randomPrefix = () => `t${randomBytes(4).toString('hex')}`;
