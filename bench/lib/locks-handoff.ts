/**
 * The hand-off of `npm run bench -- locks`: contenders for one lock, each in its own process (this file run again with
 * LOCKS_BENCH_WORKER set), driven over IPC. Processes, because the waiters of a distributed lock live in different ones,
 * and because in one process the polling peers' waiters fall into lockstep (their failed polls come back in one
 * event-loop turn, so they poll as one). Times are CLOCK_MONOTONIC, which every process on the machine shares.
 *
 * A run: every participant loops acquire → hold → release on one lock name, reporting `acq` and `rel`; after a release
 * it waits for `go`, sent once another participant has taken the lock, so at every release all the others are waiting
 * in acquire(). `stop` ends the loops; each participant answers with the commands it sent.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { setTimeout as sleep } from 'node:timers/promises';
import { onCleanup } from './cleanup';
import { monotonicMs } from './engine-bench';
import { ROOT } from './full-stack';
import { allLibraries, type LockClient } from './locks-clients';

/** The first hold lasts firstHoldMs (so all others wait before the first release); `warmup` hand-offs are not counted; a run stops after capS. */
export type HandoffSettings = { holdMs: number; firstHoldMs: number; warmup: number; capS: number };

type ToWorker = { t: 'run'; run: number; lib: string; name: string; holdMs: number; firstHoldMs: number } | { t: 'go' | 'stop'; run: number } | { t: 'exit' };
type FromWorker =
  | { t: 'ready' }
  | { t: 'acq'; run: number; asked: number; got: number }
  | { t: 'rel'; run: number; got: number; issued: number; returned: number }
  | { t: 'stopped'; run: number; requests: number }
  | { t: 'error'; message: string };

/** ms: release issued / release returned → next holder's acquire; each counted acquire's wait. `all` hand-offs and `requests` sent, warm-up included. */
export type HandoffRun = { fromIssued: number[]; fromReturned: number[]; waits: number[]; all: number; requests: number; capped: boolean };

type Hold = { i: number; asked: number; got: number; issued?: number; returned?: number };

/** `count` worker processes, each with a client of every library but fenced-floor (it cannot wait). */
export class HandoffWorkers {
  private constructor(private readonly children: ChildProcess[]) {}

  static async start(count: number, redisUrl: string): Promise<HandoffWorkers> {
    const children = Array.from({ length: count }, (_, i) => {
      const env = { ...process.env, LOCKS_BENCH_WORKER: String(i), LOCKS_BENCH_REDIS: redisUrl };
      const child = spawn(process.execPath, ['--import', 'tsx', __filename], { cwd: ROOT, env, stdio: ['ignore', 'inherit', 'inherit', 'ipc'] });
      const kill = () => void (child.exitCode === null && child.kill('SIGKILL'));
      child.once('exit', onCleanup(`locks hand-off worker ${i}`, kill, kill));
      return child;
    });
    const pool = new HandoffWorkers(children);
    await pool.listen(children.length, (_, m, done) => m.t === 'ready' && done(), 600_000);
    return pool;
  }

  /** Feeds every message of workers [0, n) to `on` until it calls done; rejects on an error report, an exit or a silence of `silentMs`. */
  private listen(n: number, on: (i: number, m: FromWorker, done: () => void) => void, silentMs = 20_000): Promise<void> {
    let remaining = n;
    return new Promise<void>((resolve, reject) => {
      let last = Date.now();
      const offs: (() => void)[] = [];
      const end = (err?: Error) => (offs.forEach((off) => off()), err ? reject(err) : resolve());
      const stall = setInterval(() => Date.now() - last > silentMs && end(new Error(`hand-off workers: no report for ${silentMs / 1000} s`)), 1000);
      offs.push(() => clearInterval(stall));
      this.children.slice(0, n).forEach((child, i) => {
        const onMessage = (m: FromWorker) => {
          last = Date.now();
          if (m.t === 'error') end(new Error(`hand-off worker ${i}: ${m.message}`));
          else on(i, m, () => --remaining === 0 && end());
        };
        const onExit = () => end(new Error(`hand-off worker ${i} exited`));
        child.on('message', onMessage).once('exit', onExit);
        offs.push(() => child.off('message', onMessage).off('exit', onExit));
      });
    });
  }

  private send(i: number, m: ToWorker): void {
    if (this.children[i].connected) this.children[i].send(m);
  }

  /** One run: workers [0, waiters] contend for `name` with library `lib` until `target` counted hand-offs or `o.capS`. */
  async run(run: number, lib: string, waiters: number, name: string, target: number, o: HandoffSettings): Promise<HandoffRun> {
    const n = waiters + 1;
    const holds: Hold[] = [];
    const open = new Map<number, Hold>();
    /** Participants that released and wait for another to take the lock, with the `got` of their hold. */
    const pending = new Map<number, number>();
    const latestGot = new Array<number>(n).fill(-Infinity);
    const deadline = performance.now() + o.capS * 1000;
    let [stopping, capped, requests] = [false, false, 0];
    const go = (i: number) => (pending.delete(i), this.send(i, { t: 'go', run }));
    const done = this.listen(n, (i, m, stopped) => {
      if (!('run' in m) || m.run !== run) return;
      if (m.t === 'acq') {
        holds.push({ i, asked: m.asked, got: m.got });
        open.set(i, holds[holds.length - 1]);
        latestGot[i] = Math.max(latestGot[i], m.got);
        for (const [w, got] of pending) if (w !== i && m.got > got) go(w);
        if (!stopping && (holds.length > o.warmup + target || performance.now() > deadline)) {
          [stopping, capped] = [true, holds.length <= o.warmup + target];
          for (let w = 0; w < n; w++) this.send(w, { t: 'stop', run });
        }
      } else if (m.t === 'rel') {
        Object.assign(open.get(i) ?? {}, { issued: m.issued, returned: m.returned });
        open.delete(i);
        // Someone else took the lock after this hold already (reports from two processes can cross): go at once.
        if (!stopping && latestGot.some((g, j) => j !== i && g > m.got)) go(i);
        else if (!stopping) pending.set(i, m.got);
      } else if (m.t === 'stopped') {
        requests += m.requests;
        stopped();
      }
    });
    for (let i = 0; i < n; i++) this.send(i, { t: 'run', run, lib, name, holdMs: o.holdMs, firstHoldMs: o.firstHoldMs });
    await done;
    const r: HandoffRun = { fromIssued: [], fromReturned: [], waits: [], all: holds.length - 1, requests, capped };
    // Hand-off j: from hold j-1's release to hold j's acquire, in time order.
    const inOrder = holds.sort((a, b) => a.got - b.got);
    for (let j = o.warmup + 1; j < Math.min(inOrder.length, o.warmup + 1 + target); j++) {
      const [prev, h] = [inOrder[j - 1], inOrder[j]];
      if (prev.issued === undefined || prev.returned === undefined) continue;
      r.fromIssued.push(h.got - prev.issued);
      r.fromReturned.push(h.got - prev.returned);
      r.waits.push(h.got - h.asked);
    }
    return r;
  }

  async close(): Promise<void> {
    await Promise.all(
      this.children.map((c, i) => {
        if (c.exitCode !== null || c.signalCode !== null) return;
        const exited = new Promise((resolve) => c.once('exit', resolve));
        const force = setTimeout(() => c.kill('SIGKILL'), 10_000);
        this.send(i, { t: 'exit' });
        return exited.finally(() => clearTimeout(force));
      }),
    );
  }
}

/** A participant: one client of every library; loops acquire → hold → release while a run lasts. */
async function runWorker(): Promise<void> {
  const send = (m: FromWorker) => void (process.connected && process.send!(m));
  const clients = new Map<string, LockClient>();
  for (const lib of allLibraries(process.env.LOCKS_BENCH_REDIS!).libs) clients.set(lib.id, await lib.connect());
  let current: { run: number; done: boolean; go?: () => void } | undefined;

  const contend = async (m: Extract<ToWorker, { t: 'run' }>, c: NonNullable<typeof current>) => {
    const client = clients.get(m.lib)!;
    const sent0 = client.sent.n;
    for (let first = true; !c.done; first = false) {
      const asked = monotonicMs();
      const release = await client.acquire(m.name);
      const got = monotonicMs();
      send({ t: 'acq', run: m.run, asked, got });
      if (!c.done) await sleep(first ? m.firstHoldMs : m.holdMs);
      const issued = monotonicMs();
      await release();
      send({ t: 'rel', run: m.run, got, issued, returned: monotonicMs() });
      if (!c.done) await new Promise<void>((go) => (c.go = go));
    }
    send({ t: 'stopped', run: m.run, requests: client.sent.n - sent0 });
  };

  process.on('message', (m: ToWorker) => {
    if (m.t === 'run') {
      current = { run: m.run, done: false };
      contend(m, current).catch((err: Error) => send({ t: 'error', message: err.stack ?? err.message }));
    } else if (m.t === 'exit') {
      void Promise.all([...clients.values()].map((c) => c.close().catch(() => undefined))).finally(() => process.exit(0));
    } else if (current?.run === m.run) {
      current.done ||= m.t === 'stop';
      const go = current.go;
      current.go = undefined;
      go?.();
    }
  });
  process.on('disconnect', () => process.exit(0));
  send({ t: 'ready' });
}

if (require.main === module && process.env.LOCKS_BENCH_WORKER) {
  runWorker().catch((err: Error) => {
    if (process.connected) process.send!({ t: 'error', message: err.stack ?? err.message } satisfies FromWorker);
    process.exit(1);
  });
}
