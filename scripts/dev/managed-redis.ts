import { ChildProcess, execFileSync, spawn, spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, rmSync } from 'node:fs';
import { connect } from 'node:net';
import { join, resolve } from 'node:path';

/** What the managed server reports to the console (plain lines; runs before the app logger exists). */
type Say = (line: string) => void;

export const which = (cmd: string) => spawnSync('sh', ['-c', `command -v ${cmd}`], { encoding: 'utf8' }).stdout.trim() || undefined;

/** The managed Redis could not be started as ours; the message says why and what to do. */
export class ManagedRedisError extends Error {
  override name = 'ManagedRedisError';
}

/** A launcher setting is invalid; the message names the variable. */
export class LauncherSettingError extends Error {
  override name = 'LauncherSettingError';
}

/** The settings of the development Redis: read by the launcher (scripts/dev/start.ts) only, never by the service. */
export const MANAGED_REDIS_VARIABLES = ['REDIS_MANAGED_PORT', 'REDIS_MANAGED_DIR'] as const;

/** Where the development Redis listens and keeps its data: REDIS_MANAGED_PORT (1024..65535, default 6380), REDIS_MANAGED_DIR (default .data/redis). */
export function managedRedisSettings(env: NodeJS.ProcessEnv): { port: number; dir: string } {
  const port = env.REDIS_MANAGED_PORT || '6380';
  if (!/^\d{1,5}$/.test(port) || Number(port) < 1024 || Number(port) > 65535) {
    throw new LauncherSettingError(`REDIS_MANAGED_PORT must be a port from 1024 to 65535 (it is "${port}")`);
  }
  return { port: Number(port), dir: resolve(env.REDIS_MANAGED_DIR || '.data/redis') };
}

/**
 * A local `redis-server` for development, started by the launcher (`npm start`)
 * when no Redis is configured: installed from the OS packages if missing, data
 * under a git-ignored folder, AOF on, `noeviction`, stopped when the service
 * exits. The service itself never starts one; production never uses this.
 *
 * The port is used only once our own child answers on it: `INFO server` must
 * report the child's process id while the child is alive. A port already held
 * (by another Redis or any other program) is refused with a ManagedRedisError,
 * never written to.
 */
export class ManagedRedis {
  private constructor(
    private readonly child: ChildProcess,
    readonly port: number,
    private readonly say: Say,
  ) {}

  static async start(opts: { port: number; dir: string; readyTimeoutMs?: number }, say: Say = (l) => console.log(l)): Promise<ManagedRedis> {
    const bin = which('redis-server') ?? installRedis(say);
    mkdirSync(opts.dir, { recursive: true });
    const pidFile = join(opts.dir, 'redis.pid');
    stopLeftover(pidFile, say);
    // Something already listening cannot be ours: we have not started anything yet (a leftover of ours was stopped above).
    const before = await probeRedis(opts.port, 1_000);
    if (before.kind !== 'refused') throw portTaken(opts.port, before);
    const args = [
      '--port',
      String(opts.port),
      '--bind',
      '127.0.0.1',
      '--dir',
      opts.dir,
      '--pidfile',
      pidFile,
      '--appendonly',
      'yes',
      '--appendfsync',
      'everysec',
      '--maxmemory',
      '1gb',
      '--maxmemory-policy',
      'noeviction',
      '--save',
      '',
      '--daemonize',
      'no',
      '--protected-mode',
      'yes',
      '--loglevel',
      'warning',
    ];
    const child = spawn(bin, args, { stdio: ['ignore', 'inherit', 'inherit'] });
    const managed = new ManagedRedis(child, opts.port, say);
    // If this process dies without a clean shutdown, do not leave Redis behind.
    process.once('exit', () => child.kill('SIGTERM'));
    try {
      await waitForOwnRedis(opts.port, child, opts.readyTimeoutMs ?? 15_000);
    } catch (err) {
      await managed.stop(true);
      throw err;
    }
    say(`[managed-redis] redis-server ${bin} (pid ${child.pid}) on 127.0.0.1:${opts.port}, data in ${opts.dir} (AOF on, noeviction)`);
    return managed;
  }

  /** SIGTERM lets Redis flush the AOF and exit; waits up to 10 s. `quiet`: do not say so (a start that failed). */
  async stop(quiet = false): Promise<void> {
    if (this.child.exitCode !== null || this.child.signalCode !== null) return;
    const exited = new Promise<void>((r) => this.child.once('exit', () => r()));
    this.child.kill('SIGTERM');
    let timer: NodeJS.Timeout | undefined;
    await Promise.race([exited, new Promise((r) => (timer = setTimeout(r, 10_000)))]).finally(() => clearTimeout(timer));
    if (!quiet) this.say('[managed-redis] stopped');
  }
}

/** Installs Debian `packages` with apt-get (root, non-interactive); throws when apt-get is missing or fails. */
export function aptInstall(packages: string[]): void {
  if (!which('apt-get')) throw new Error('apt-get is not available');
  const env = { ...process.env, DEBIAN_FRONTEND: 'noninteractive' };
  execFileSync('apt-get', ['update', '-qq'], { stdio: 'inherit', env });
  execFileSync('apt-get', ['install', '-y', '-qq', ...packages], { stdio: 'inherit', env });
}

/**
 * Installs Debian's redis-server and redis-tools (plus any `extra` packages)
 * with apt-get (root), saying so on the console. Returns the redis-server path.
 */
export function installRedis(say: Say, extra: string[] = []): string {
  say(`[managed-redis] installing the OS packages ${['redis-server', 'redis-tools', ...extra].join(', ')} with apt-get (needs root)...`);
  if (!which('apt-get')) throw new Error('redis-server is missing and apt-get is not available: install Redis 7 or set REDIS_URL');
  try {
    aptInstall(['redis-server', 'redis-tools', ...extra]);
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

/** What answers on 127.0.0.1:`port`: nothing, a Redis (with what `INFO server` says), or something else. */
export type PortProbe =
  { kind: 'refused' } | { kind: 'redis'; pid?: number; version?: string } | { kind: 'redis-error'; error: string } | { kind: 'other'; detail: string };

/** Asks whatever listens on 127.0.0.1:`port` for `INFO server` (raw RESP, no retries), within `timeoutMs`. */
export function probeRedis(port: number, timeoutMs: number): Promise<PortProbe> {
  return new Promise((resolve) => {
    let buf = Buffer.alloc(0);
    let settled = false;
    const sock = connect(port, '127.0.0.1');
    const done = (p: PortProbe) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      sock.destroy();
      resolve(p);
    };
    const timer = setTimeout(() => done({ kind: 'other', detail: `no Redis reply within ${timeoutMs} ms` }), timeoutMs);
    sock.once('connect', () => sock.write('*2\r\n$4\r\nINFO\r\n$6\r\nserver\r\n'));
    sock.on('data', (d: Buffer) => {
      buf = Buffer.concat([buf, d]);
      const eol = buf.indexOf('\r\n');
      if (buf.length > 0 && buf[0] !== 0x24 /* $ */ && buf[0] !== 0x2d /* - */) {
        return done({ kind: 'other', detail: `it answered ${JSON.stringify(buf.subarray(0, 40).toString('latin1'))}` });
      }
      if (eol < 0) return buf.length > 1024 ? done({ kind: 'other', detail: 'it answered something that is not Redis' }) : undefined;
      const head = buf.subarray(1, eol).toString('latin1');
      if (buf[0] === 0x2d) return done({ kind: 'redis-error', error: head });
      const len = Number(head);
      if (!Number.isInteger(len) || len < 0) return done({ kind: 'other', detail: 'it answered something that is not Redis' });
      if (buf.length < eol + 2 + len) return;
      const info = buf.subarray(eol + 2, eol + 2 + len).toString('utf8');
      const field = (name: string) => new RegExp(`^${name}:(.*?)\\r?$`, 'm').exec(info)?.[1];
      const pid = Number(field('process_id'));
      done({ kind: 'redis', pid: Number.isInteger(pid) ? pid : undefined, version: field('redis_version') });
    });
    sock.once('error', (err: NodeJS.ErrnoException) =>
      done(err.code === 'ECONNREFUSED' ? { kind: 'refused' } : { kind: 'other', detail: `connecting failed: ${err.message}` }),
    );
    sock.once('close', () => done({ kind: 'other', detail: 'it closed the connection without a Redis reply' }));
  });
}

function describeHolder(p: Exclude<PortProbe, { kind: 'refused' }>): string {
  if (p.kind === 'redis') return `another Redis${p.version ? ` ${p.version}` : ''}${p.pid ? ` (pid ${p.pid})` : ''}`;
  if (p.kind === 'redis-error') return `another Redis (it answered "${p.error}")`;
  return `a program that is not Redis (${p.detail})`;
}

/** A port to suggest instead of a taken one. */
export const neighbourPort = (port: number): number => (port < 65535 ? port + 1 : port - 1);

function portTaken(port: number, holder: Exclude<PortProbe, { kind: 'refused' }>): ManagedRedisError {
  const other = neighbourPort(port);
  return new ManagedRedisError(
    `[managed-redis] 127.0.0.1:${port} is already in use by ${describeHolder(holder)}, not by a redis-server started for this run: ` +
      `refusing to use it. Choose a free port for the development Redis with REDIS_MANAGED_PORT (for example REDIS_MANAGED_PORT=${other} npm start)` +
      (holder.kind === 'other' ? '.' : `, or set REDIS_URL=redis://127.0.0.1:${port} to use that Redis on purpose.`),
  );
}

/**
 * Resolves once `child` is alive and the Redis answering on `port` reports the child's process id.
 * Rejects with a ManagedRedisError as soon as the child exits (describing what holds the port, if anything),
 * or after `timeoutMs` if our child never answers.
 */
export async function waitForOwnRedis(port: number, child: ChildProcess, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  const exited = () => child.exitCode !== null || child.signalCode !== null;
  let last: PortProbe = { kind: 'refused' };
  for (;;) {
    if (!exited()) {
      last = await probeRedis(port, Math.max(100, Math.min(1_000, deadline - Date.now())));
      if (last.kind === 'redis' && last.pid === child.pid && !exited()) return;
    }
    if (exited()) {
      // It exited: if something answers on the port now, that is what took it.
      const holder = last.kind === 'refused' ? await probeRedis(port, 1_000) : last;
      if (holder.kind !== 'refused') throw portTaken(port, holder);
      const how = child.exitCode !== null ? `code ${child.exitCode}` : `signal ${child.signalCode}`;
      throw new ManagedRedisError(
        `[managed-redis] redis-server exited with ${how} before it accepted connections on 127.0.0.1:${port} (see its messages above). ` +
          `If the port is the problem, choose another with REDIS_MANAGED_PORT; or set REDIS_URL to use a Redis of your own.`,
      );
    }
    if (Date.now() > deadline) {
      throw last.kind === 'refused'
        ? new ManagedRedisError(`[managed-redis] redis-server (pid ${child.pid}) did not open 127.0.0.1:${port} within ${timeoutMs} ms`)
        : portTaken(port, last);
    }
    await new Promise((r) => setTimeout(r, 25));
  }
}
