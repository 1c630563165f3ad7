/**
 * A Redis PING probe in a process of its own: "another user of the same Redis". In the benchmark's own process a
 * PING's latency would also hold whatever that event loop is busy with (1–2 ms at p99 with Redis idle); this process
 * only PINGs, one at a time, pausing `gapMs` after each reply.
 * Parent side: `PingProbe.start(url)`, then `window()` … `stop()` around each phase; `close()` at the end.
 */
import { ChildProcess, spawn } from 'node:child_process';
import { once } from 'node:events';
import { join } from 'node:path';
import Redis from 'ioredis';
import { onCleanup } from './cleanup';

type FromProbe = { t: 'ready' } | { t: 'window'; latMs: number[] } | { t: 'error'; message: string };

export class PingProbe {
  private constructor(private readonly child: ChildProcess) {}

  static async start(redisUrl: string, gapMs = 1): Promise<PingProbe> {
    const child = spawn(process.execPath, ['--import', 'tsx', __filename], {
      cwd: join(__dirname, '..', '..'),
      env: { ...process.env, PING_PROBE_REDIS: redisUrl, PING_PROBE_GAP_MS: String(gapMs) },
      stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
    });
    const kill = () => void (child.exitCode === null && child.signalCode === null && child.kill('SIGKILL'));
    child.once('exit', onCleanup('PING probe', kill, kill));
    const probe = new PingProbe(child);
    await probe.reply();
    return probe;
  }

  /** Starts a measuring window; `stop()` ends it and resolves with the PING latencies (ms) it saw. */
  window(): { stop(): Promise<number[]> } {
    this.child.send('start');
    return {
      stop: async () => {
        const r = this.reply();
        this.child.send('stop');
        return ((await r) as Extract<FromProbe, { t: 'window' }>).latMs;
      },
    };
  }

  close(): void {
    if (this.child.exitCode === null && this.child.signalCode === null) this.child.kill('SIGTERM');
  }

  private async reply(): Promise<FromProbe> {
    const [m] = (await Promise.race([once(this.child, 'message'), once(this.child, 'exit').then(() => [{ t: 'error', message: 'exited' }])])) as [FromProbe];
    if (m.t === 'error') throw new Error(`PING probe: ${m.message}`);
    return m;
  }
}

if (require.main === module && process.env.PING_PROBE_REDIS) {
  const redis = new Redis(process.env.PING_PROBE_REDIS, { maxRetriesPerRequest: 1 });
  const gapMs = Number(process.env.PING_PROBE_GAP_MS ?? 1);
  const send = (m: FromProbe) => void (process.connected && process.send!(m));
  let [measuring, lat, loop] = [false, [] as number[], Promise.resolve()];
  process.on('message', (m: string) => {
    if (m === 'start' && !measuring) {
      [measuring, lat] = [true, []];
      loop = (async () => {
        for (; measuring; await new Promise((r) => setTimeout(r, gapMs))) {
          const t = performance.now();
          await redis.ping();
          lat.push(performance.now() - t);
        }
      })().catch((err: Error) => send({ t: 'error', message: err.message }));
    } else if (m === 'stop') {
      measuring = false;
      void loop.then(() => send({ t: 'window', latMs: lat }));
    }
  });
  process.on('disconnect', () => process.exit(0));
  redis.ping().then(
    () => send({ t: 'ready' }),
    (err: Error) => (send({ t: 'error', message: err.message }), process.exit(1)),
  );
}
