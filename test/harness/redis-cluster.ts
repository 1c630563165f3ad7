import { ChildProcess, execFile, spawn } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Redis from 'ioredis';
import { freePort } from './free-port';
import { waitForPort } from './redis-server';

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
export async function waitUntil(
  what: string,
  check: () => Promise<boolean | string>,
  timeoutMs: number,
  intervalMs = 25,
): Promise<void> {
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

// ---------------------------------------------------------------------------
// Cluster
// ---------------------------------------------------------------------------

export interface RedisClusterHandle {
  /** The master nodes, in creation order (node i owns the i-th third of the slots). */
  nodes: HostPort[];
  /** Value for REDIS_CLUSTER_NODES: `127.0.0.1:p1,127.0.0.1:p2,...`. */
  envValue: string;
  /** The processes, for tests that stop or restart a single node. */
  processes: RedisProcess[];
  /** Stops every node gracefully (AOF flushed); the data folders stay. */
  stop(): Promise<void>;
  /** stop() and delete every data folder. Safe to call more than once. */
  destroy(): Promise<void>;
}

export interface RedisClusterOptions {
  /** Number of masters (no replicas). At least 3, as redis-cli requires. */
  masters?: number;
  /** How long to wait for the whole cluster to be up and agreed. */
  timeoutMs?: number;
}

function execCli(args: string[], timeoutMs: number): Promise<string> {
  return new Promise((resolve, reject) => {
    execFile('redis-cli', args, { timeout: timeoutMs, encoding: 'utf8' }, (err, stdout, stderr) => {
      if (err) reject(new Error(`redis-cli ${args.join(' ')} failed: ${err.message}\n${stdout}\n${stderr}`));
      else resolve(stdout);
    });
  });
}

/** The slot map a node reports, normalized to `start-end:port` entries so nodes can be compared. */
async function slotMap(r: Redis): Promise<string> {
  const slots = await r.cluster('SLOTS');
  return slots
    .map(([start, end, [, port]]) => `${start}-${end}:${port}`)
    .sort()
    .join(',');
}

/**
 * Starts `masters` cluster-enabled redis-servers (AOF on) on free ports in
 * temporary folders, joins them with `redis-cli --cluster create`, and
 * resolves once every node says `cluster_state:ok`, knows every other node,
 * and reports the same slot map. On any failure everything started is torn
 * down before the error is thrown.
 */
export async function startRedisCluster(opts: RedisClusterOptions = {}): Promise<RedisClusterHandle> {
  const masters = opts.masters ?? 3;
  const timeoutMs = opts.timeoutMs ?? 20_000;
  if (masters < 3) throw new Error('a Redis cluster needs at least 3 masters');

  const procs: RedisProcess[] = [];
  const destroyAll = async () => {
    await Promise.all(procs.map((p) => p.stop()));
    for (const p of procs) removeDir(p.dir);
  };

  try {
    // A port picked by freePort() can be taken by someone else before redis binds it: retry with new ports.
    for (let attempt = 1; ; attempt++) {
      const ports = await freePorts(masters * 2);
      const batch = Array.from({ length: masters }, (_, i) => {
        const port = ports[i];
        const busPort = ports[masters + i];
        const dir = makeTempDir('rp-cluster-');
        return new RedisProcess(port, dir, [
          '--port', String(port),
          // The bus port is chosen explicitly: port + 10000 may be above 65535 for an ephemeral port.
          '--cluster-port', String(busPort),
          '--bind', '127.0.0.1',
          '--dir', dir,
          '--logfile', join(dir, 'redis.log'),
          '--cluster-enabled', 'yes',
          '--cluster-config-file', 'nodes.conf',
          '--cluster-node-timeout', '5000',
          '--appendonly', 'yes',
          '--appendfsync', 'everysec',
          '--save', '',
          '--maxmemory-policy', 'noeviction',
          '--daemonize', 'no',
          '--loglevel', 'warning',
        ]);
      });
      procs.push(...batch);
      const started = await Promise.allSettled(batch.map((p) => p.start()));
      const failed = started.find((s) => s.status === 'rejected');
      if (!failed) break;
      await destroyAll();
      procs.length = 0;
      if (attempt >= 3) throw (failed as PromiseRejectedResult).reason;
    }

    const addrs = procs.map((p) => `${p.host}:${p.port}`);
    await execCli(['--cluster', 'create', ...addrs, '--cluster-replicas', '0', '--cluster-yes'], timeoutMs);

    // redis-cli returns once the nodes agree on its own check; wait until every node sees the whole, healthy cluster.
    const conns = procs.map((p) => rawConnection(p));
    try {
      await waitUntil(
        'every cluster node to report cluster_state:ok and the same slot map',
        async () => {
          const views = await Promise.all(
            conns.map(async (r) => {
              const info = String(await r.cluster('INFO'));
              const field = (name: string) => new RegExp(`^${name}:(\\S+)`, 'm').exec(info)?.[1];
              if (field('cluster_state') !== 'ok') return `state ${field('cluster_state')}`;
              if (Number(field('cluster_slots_assigned')) !== 16384) return `slots ${field('cluster_slots_assigned')}`;
              if (Number(field('cluster_known_nodes')) !== masters) return `known nodes ${field('cluster_known_nodes')}`;
              return `map ${await slotMap(r)}`;
            }),
          );
          if (!views.every((v) => v.startsWith('map ')) || new Set(views).size !== 1) return views.join(' | ');
          return true;
        },
        timeoutMs,
      );
    } finally {
      conns.forEach((c) => c.disconnect());
    }
  } catch (err) {
    const logs = procs.map((p) => `--- ${p.port}\n${p.logTail(10)}`).join('\n');
    await destroyAll();
    throw new Error(`${(err as Error).message}\n${logs}`, { cause: err });
  }

  const nodes = procs.map((p) => ({ host: p.host, port: p.port }));
  let destroyed = false;
  return {
    nodes,
    envValue: nodes.map((n) => `${n.host}:${n.port}`).join(','),
    processes: procs,
    async stop() {
      await Promise.all(procs.map((p) => p.stop()));
    },
    async destroy() {
      if (destroyed) return;
      destroyed = true;
      await destroyAll();
    },
  };
}
