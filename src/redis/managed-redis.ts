import { ChildProcess, execFileSync, spawn, spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, rmSync } from 'node:fs';
import { connect } from 'node:net';
import { join } from 'node:path';

/** What the managed server reports to the console (plain lines; runs before the app logger exists). */
type Say = (line: string) => void;

export const which = (cmd: string) => spawnSync('sh', ['-c', `command -v ${cmd}`], { encoding: 'utf8' }).stdout.trim() || undefined;

/**
 * A local `redis-server` the service supervises in development when no Redis
 * is configured: installed from the OS packages if missing, data under a
 * git-ignored folder, AOF on, `noeviction`, stopped on exit. Production never
 * uses this (config refuses to start without Redis settings).
 */
export class ManagedRedis {
  private constructor(
    private readonly child: ChildProcess,
    readonly port: number,
    private readonly say: Say,
  ) {}

  static async start(opts: { port: number; dir: string }, say: Say = (l) => console.log(l)): Promise<ManagedRedis> {
    const bin = which('redis-server') ?? installRedis(say);
    mkdirSync(opts.dir, { recursive: true });
    const pidFile = join(opts.dir, 'redis.pid');
    stopLeftover(pidFile, say);
    const args = [
      '--port', String(opts.port),
      '--bind', '127.0.0.1',
      '--dir', opts.dir,
      '--pidfile', pidFile,
      '--appendonly', 'yes',
      '--appendfsync', 'everysec',
      '--maxmemory', '1gb',
      '--maxmemory-policy', 'noeviction',
      '--save', '',
      '--daemonize', 'no',
      '--protected-mode', 'yes',
      '--loglevel', 'warning',
    ];
    const child = spawn(bin, args, { stdio: ['ignore', 'inherit', 'inherit'] });
    const managed = new ManagedRedis(child, opts.port, say);
    // If this process dies without a clean shutdown, do not leave Redis behind.
    process.once('exit', () => child.kill('SIGTERM'));
    await waitForPort(opts.port, child, 15_000);
    say(`[managed-redis] redis-server ${bin} on 127.0.0.1:${opts.port}, data in ${opts.dir} (AOF on, noeviction)`);
    return managed;
  }

  /** SIGTERM lets Redis flush the AOF and exit; waits up to 10 s. */
  async stop(): Promise<void> {
    if (this.child.exitCode !== null || this.child.signalCode !== null) return;
    const exited = new Promise<void>((r) => this.child.once('exit', () => r()));
    this.child.kill('SIGTERM');
    let timer: NodeJS.Timeout | undefined;
    await Promise.race([exited, new Promise((r) => (timer = setTimeout(r, 10_000)))]).finally(() => clearTimeout(timer));
    this.say('[managed-redis] stopped');
  }
}

/**
 * Installs Debian's redis-server and redis-tools (plus any `extra` packages)
 * with apt-get (root), saying so on the console. Returns the redis-server path.
 */
export function installRedis(say: Say, extra: string[] = []): string {
  say(`[managed-redis] installing the OS packages ${['redis-server', 'redis-tools', ...extra].join(', ')} with apt-get (needs root)...`);
  if (!which('apt-get')) throw new Error('redis-server is missing and apt-get is not available: install Redis 7 or set REDIS_URL');
  try {
    const env = { ...process.env, DEBIAN_FRONTEND: 'noninteractive' };
    execFileSync('apt-get', ['update', '-qq'], { stdio: 'inherit', env });
    execFileSync('apt-get', ['install', '-y', '-qq', 'redis-server', 'redis-tools', ...extra], { stdio: 'inherit', env });
  } catch (err) {
    throw new Error(`could not install redis-server (${(err as Error).message}); install it or set REDIS_URL`, { cause: err });
  }
  const bin = which('redis-server');
  if (!bin) throw new Error('redis-server still not found after installing; set REDIS_URL');
  say(`[managed-redis] installed ${bin}`);
  return bin;
}

/** A previous run killed with -9 may have left its redis-server running on our data folder. */
function stopLeftover(pidFile: string, say: Say): void {
  if (!existsSync(pidFile)) return;
  const pid = Number(readFileSync(pidFile, 'utf8').trim());
  try {
    const cmd = readFileSync(`/proc/${pid}/cmdline`, 'utf8');
    if (cmd.includes('redis-server')) {
      say(`[managed-redis] stopping leftover redis-server (pid ${pid})`);
      process.kill(pid, 'SIGTERM');
      for (let i = 0; i < 100 && existsSync(`/proc/${pid}`); i++) spawnSync('sleep', ['0.05']);
    }
  } catch {
    /* not running */
  }
  rmSync(pidFile, { force: true });
}

/** Resolves once something accepts TCP connections on 127.0.0.1:`port`; rejects if `child` exits first or time runs out. */
export function waitForPort(port: number, child: ChildProcess | undefined, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  return new Promise((resolve, reject) => {
    const attempt = () => {
      if (child && child.exitCode !== null) return reject(new Error(`process on port ${port} exited with code ${child.exitCode} (is the port taken?)`));
      const sock = connect(port, '127.0.0.1');
      sock.once('connect', () => {
        sock.end();
        resolve();
      });
      sock.once('error', () => {
        sock.destroy();
        if (Date.now() > deadline) reject(new Error(`nothing opened port ${port} in ${timeoutMs} ms`));
        else setTimeout(attempt, 25);
      });
    };
    attempt();
  });
}
