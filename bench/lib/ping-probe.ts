/**
 * A Redis PING probe in a process of its own: "another user of the same Redis".
 *
 * Run in the benchmark's own process, a PING's latency also holds whatever that process's event loop is
 * busy with (HTTP probes, pollers, an application context creating orders, its garbage collector): about
 * 1–2 ms at p99 with Redis idle. This process does nothing but PING (one at a time on one connection,
 * pausing `gapMs` after each reply), so what it measures is Redis's answer time plus the wait for a core.
 *
 * Parent side: `PingProbe.start(url)`, then `window()` … `stop()` around each phase; `close()` at the end.
 */
import { ChildProcess, spawn } from 'node:child_process';
import { join } from 'node:path';
import Redis from 'ioredis';
import { onCleanup } from './cleanup';

type ToProbe = { t: 'start' } | { t: 'stop' };
type FromProbe = { t: 'ready' } | { t: 'window'; latMs: number[] } | { t: 'error'; message: string };

const ROOT = join(__dirname, '..', '..');

export class PingProbe {
  private waiting: ((m: FromProbe) => void) | undefined;

  private constructor(private readonly child: ChildProcess) {
    child.on('message', (m: FromProbe) => this.waiting?.(m));
  }

  /** Starts the probe process (connected, not yet measuring). */
  static async start(redisUrl: string, gapMs = 1): Promise<PingProbe> {
    const child = spawn(process.execPath, ['--import', 'tsx', __filename], {
      cwd: ROOT,
      env: { ...process.env, PING_PROBE_REDIS: redisUrl, PING_PROBE_GAP_MS: String(gapMs) },
      stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
    });
    const kill = () => void (child.exitCode === null && child.signalCode === null && child.kill('SIGKILL'));
    const unregister = onCleanup('PING probe', kill, kill);
    child.once('exit', () => unregister());
    const probe = new PingProbe(child);
    await probe.next('start', (m) => m.t === 'ready', 30_000);
    return probe;
  }

  /** Starts a measuring window; `stop()` ends it and resolves with the PING latencies (ms) it saw. */
  window(): { stop(): Promise<number[]> } {
    this.child.send({ t: 'start' } satisfies ToProbe);
    return {
      stop: async () => {
        const reply = this.next('stop', (m) => m.t === 'window', 10_000);
        this.child.send({ t: 'stop' } satisfies ToProbe);
        return ((await reply) as Extract<FromProbe, { t: 'window' }>).latMs;
      },
    };
  }

  close(): void {
    if (this.child.exitCode === null && this.child.signalCode === null) this.child.kill('SIGTERM');
  }

  private next(what: string, match: (m: FromProbe) => boolean, timeoutMs: number): Promise<FromProbe> {
    return new Promise((resolve, reject) => {
      const onExit = (code: number | null, signal: string | null) => done(new Error(`PING probe exited (${signal ?? code}) during ${what}`));
      const timer = setTimeout(() => done(new Error(`PING probe: no answer to ${what} within ${timeoutMs} ms`)), timeoutMs);
      const done = (err?: Error, m?: FromProbe) => {
        clearTimeout(timer);
        this.waiting = undefined;
        this.child.off('exit', onExit);
        if (err) reject(err);
        else resolve(m!);
      };
      this.waiting = (m) => {
        if (m.t === 'error') done(new Error(`PING probe: ${m.message}`));
        else if (match(m)) done(undefined, m);
      };
      this.child.once('exit', onExit);
    });
  }
}

async function probeMain(url: string, gapMs: number): Promise<void> {
  const send = (m: FromProbe) => void (process.connected && process.send!(m));
  const redis = new Redis(url, { maxRetriesPerRequest: 1 });
  await redis.ping();
  let measuring = false;
  let lat: number[] = [];
  let loop: Promise<void> | undefined;
  const run = async () => {
    while (measuring) {
      const t = performance.now();
      await redis.ping();
      lat.push(performance.now() - t);
      await new Promise((r) => setTimeout(r, gapMs));
    }
  };
  process.on('message', (m: ToProbe) => {
    if (m.t === 'start' && !measuring) {
      measuring = true;
      lat = [];
      loop = run().catch((err: Error) => send({ t: 'error', message: err.message }));
    } else if (m.t === 'stop') {
      measuring = false;
      void (loop ?? Promise.resolve()).then(() => send({ t: 'window', latMs: lat }));
    }
  });
  process.on('disconnect', () => {
    redis.disconnect();
    process.exit(0);
  });
  send({ t: 'ready' });
}

if (require.main === module && process.env.PING_PROBE_REDIS) {
  probeMain(process.env.PING_PROBE_REDIS, Number(process.env.PING_PROBE_GAP_MS ?? 1)).catch((err: Error) => {
    if (process.connected) process.send!({ t: 'error', message: err.stack ?? err.message } satisfies FromProbe);
    process.exit(1);
  });
}
