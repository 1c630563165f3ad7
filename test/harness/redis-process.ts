import { ChildProcess, spawn } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Redis from 'ioredis';
import { waitForPort } from '../../scripts/dev/managed-redis';
import { freePort } from './free-port';

export interface HostPort {
  host: string;
  port: number;
}

// ---------------------------------------------------------------------------
// Cleanup shared by the cluster and Sentinel harnesses. Every redis-server and
// temporary folder a harness creates is reported to a small watchdog process
// over a pipe; when the test process goes away for any reason (a suite that
// forgot destroy(), a crash, Ctrl-C, a worker killed by Jest) the pipe closes
// and the watchdog SIGKILLs what is still running and deletes what is left.
// (Inside Jest, `process.on('exit')` would not do: test files see a sandboxed
// `process` whose events never fire.)
// ---------------------------------------------------------------------------

const WATCHDOG = `
const fs = require('node:fs');
const live = new Map();
let buf = '';
process.stdin.setEncoding('utf8');
process.stdin.on('data', (d) => {
  buf += d;
  for (let i; (i = buf.indexOf('\\n')) >= 0; buf = buf.slice(i + 1)) {
    const [op, kind, val] = buf.slice(0, i).split('\\t');
    if (op === '+') live.set(kind + ' ' + val, [kind, val]);
    else live.delete(kind + ' ' + val);
  }
});
process.stdin.on('end', () => {
  const all = [...live.values()];
  for (const [kind, val] of all) if (kind === 'pid') try { process.kill(Number(val), 'SIGKILL'); } catch {}
  setTimeout(() => {
    for (const [kind, val] of all) if (kind === 'dir') try { fs.rmSync(val, { recursive: true, force: true, maxRetries: 3 }); } catch {}
    process.exit(0);
  }, 200);
});
`;

let watchdog: ChildProcess | undefined;

function tellWatchdog(op: '+' | '-', kind: 'pid' | 'dir', value: string | number): void {
  if (!watchdog || watchdog.exitCode !== null || !watchdog.stdin?.writable) {
    // Detached (own process group, so Ctrl-C reaches it only through the pipe) and unreferenced (never keeps us alive).
    watchdog = spawn(process.execPath, ['-e', WATCHDOG], { stdio: ['pipe', 'ignore', 'ignore'], detached: true });
    watchdog.unref();
    const stdin = watchdog.stdin as (NodeJS.WritableStream & { unref?: () => void }) | null;
    stdin?.unref?.();
    stdin?.on('error', () => undefined);
  }
  watchdog.stdin!.write(`${op}\t${kind}\t${value}\n`);
}

/**
 * The arguments every harness data node starts with: loopback on `port`, its files in `dir` (log
 * included), AOF with `appendfsync` (or none), no RDB snapshots, no eviction, in the foreground, quiet.
 * Topology-specific ones come in `extra`.
 */
export function dataNodeArgs(
  port: number,
  dir: string,
  opts: { appendonly?: boolean; appendfsync?: 'always' | 'everysec' } = {},
  extra: string[] = [],
): string[] {
  return [
    '--port',
    String(port),
    '--bind',
    '127.0.0.1',
    '--dir',
    dir,
    '--logfile',
    join(dir, 'redis.log'),
    '--appendonly',
    opts.appendonly === false ? 'no' : 'yes',
    '--appendfsync',
    opts.appendfsync ?? 'everysec',
    '--save',
    '',
    '--maxmemory-policy',
    'noeviction',
    '--daemonize',
    'no',
    '--loglevel',
    'warning',
    ...extra,
  ];
}

/** Creates a temporary folder that is deleted with `removeDir`, or by the watchdog at the latest. */
export function makeTempDir(prefix: string): string {
  const dir = mkdtempSync(join(tmpdir(), prefix));
  tellWatchdog('+', 'dir', dir);
  return dir;
}

export function removeDir(dir: string): void {
  rmSync(dir, { recursive: true, force: true, maxRetries: 3 });
  tellWatchdog('-', 'dir', dir);
}

function track(c: ChildProcess): void {
  const pid = c.pid;
  if (pid === undefined) return; // spawn failed; the 'exit'/'error' path reports it
  tellWatchdog('+', 'pid', pid);
  c.once('exit', () => tellWatchdog('-', 'pid', pid));
}

const hasExited = (c: ChildProcess) => c.exitCode !== null || c.signalCode !== null;

/** Resolves once the process has exited (immediately if it already has). */
export function waitExit(c: ChildProcess): Promise<void> {
  return new Promise((r) => (hasExited(c) ? r() : c.once('exit', () => r())));
}

/** One redis-server (data node or Sentinel) spawned by a harness, restartable on the same port and folder. */
export class RedisProcess implements HostPort {
  readonly host = '127.0.0.1';
  private child?: ChildProcess;

  constructor(
    readonly port: number,
    readonly dir: string,
    /** Full argv for redis-server (a config file path and/or `--name value` options). */
    private readonly argv: string[],
  ) {}

  /** The running server's process id (benchmarks read its CPU time from /proc). */
  get pid(): number | undefined {
    return this.running ? this.child?.pid : undefined;
  }

  get running(): boolean {
    return !!this.child && !hasExited(this.child);
  }

  get logFile(): string {
    return join(this.dir, 'redis.log');
  }

  /** The last lines of the server's log, for error messages. */
  logTail(lines = 20): string {
    if (!existsSync(this.logFile)) return '(no log)';
    return readFileSync(this.logFile, 'utf8').trimEnd().split('\n').slice(-lines).join('\n');
  }

  async start(timeoutMs = 10_000): Promise<void> {
    if (this.running) return;
    const c = spawn('redis-server', this.argv, { stdio: ['ignore', 'ignore', 'inherit'] });
    // A forgotten server must not keep the test process alive: it exits, and the exit hook kills the server.
    c.unref();
    this.child = c;
    track(c);
    try {
      await waitForPort(this.port, c, timeoutMs);
    } catch (err) {
      await this.kill();
      throw new Error(`${(err as Error).message}\n--- ${this.logFile}\n${this.logTail()}`, { cause: err });
    }
  }

  /** SIGTERM (Redis flushes the AOF), waiting up to 5 s before falling back to SIGKILL. */
  async stop(): Promise<void> {
    const c = this.child;
    if (!c || hasExited(c)) return;
    c.kill('SIGTERM');
    const t = setTimeout(() => c.kill('SIGKILL'), 5_000);
    await waitExit(c);
    clearTimeout(t);
  }

  async kill(): Promise<void> {
    const c = this.child;
    if (!c || hasExited(c)) return;
    c.kill('SIGKILL');
    await waitExit(c);
  }
}

/** `n` distinct ports that were free a moment ago. */
export async function freePorts(n: number): Promise<number[]> {
  const out = new Set<number>();
  while (out.size < n) out.add(await freePort());
  return [...out];
}

/** A short-lived plain connection to one node, for harness checks. Never retries, never queues. */
export function rawConnection(node: HostPort, opts: { commandTimeout?: number } = {}): Redis {
  const r = new Redis({
    host: node.host,
    port: node.port,
    lazyConnect: true,
    enableOfflineQueue: true,
    maxRetriesPerRequest: 0,
    retryStrategy: () => null,
    commandTimeout: opts.commandTimeout ?? 2_000,
    connectTimeout: 2_000,
  });
  r.on('error', () => undefined);
  return r;
}

/** Runs `fn` with a raw connection and always closes it. */
export async function withConnection<T>(node: HostPort, fn: (r: Redis) => Promise<T>): Promise<T> {
  const r = rawConnection(node);
  try {
    return await fn(r);
  } finally {
    r.disconnect();
  }
}

/** Polls `check` every `intervalMs` until it returns true; rejects with the last reason after `timeoutMs`. */
export async function waitUntil(what: string, check: () => Promise<boolean | string>, timeoutMs: number, intervalMs = 25): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  let last: string;
  for (;;) {
    try {
      const res = await check();
      if (res === true) return;
      last = typeof res === 'string' ? res : 'not yet';
    } catch (err) {
      last = (err as Error).message;
    }
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}: ${last}`);
    await new Promise((r) => setTimeout(r, intervalMs));
  }
}
