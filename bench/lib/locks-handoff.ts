/**
 * The hand-off measurement of `npm run bench -- locks`: contenders for one lock, each in its own
 * process (this file run again with LOCKS_BENCH_WORKER set), driven by the benchmark over IPC.
 *
 * Why processes: waiters of a distributed lock live in different processes, and in one process the
 * polling peers' waiters fall into lockstep (their failed polls come back in one event-loop turn,
 * so their retry timers expire together and they poll as one), which makes a polling library look
 * worse than it is. In separate processes each waiter polls on its own timer. Times are taken in
 * the workers on CLOCK_MONOTONIC (process.hrtime), which every process on the machine shares.
 *
 * Protocol of one run: every participating worker loops acquire → hold → release on the same lock
 * name, reporting `acq` and `rel` with their times, and after a release waits for `go`, which the
 * benchmark sends once another worker has taken the lock after it: so at every release all the
 * other participants are waiting in acquire(). `stop` ends the loops (a worker still waiting takes
 * the lock, releases it at once and stops).
 */
import { ChildProcess, spawn } from 'node:child_process';
import { onCleanup } from './cleanup';
import { ROOT } from './full-stack';
import { allLibraries, LockClient } from './locks-clients';
import { CpuWindow, cpuBetween, monotonicMs, RedisCpu, Snapshot, snapshot } from './locks-measure';
import { setTimeout as sleep } from 'node:timers/promises';

export interface HandoffSettings {
  holdMs: number;
  /** A worker's first hold of a run lasts this long, so that the others are all waiting before the first release. */
  firstHoldMs: number;
  /** Hand-offs (in time order) not counted at the start of a run: JIT, connections, subscriptions, the long first holds. */
  warmup: number;
  /** A run stops taking samples after this long (slow polling rows). */
  capS: number;
}

type ToWorker =
  | { t: 'run'; run: number; lib: string; name: string; holdMs: number; firstHoldMs: number }
  | { t: 'go'; run: number }
  | { t: 'stop'; run: number }
  | { t: 'counts'; id: number }
  | { t: 'exit' };

type FromWorker =
  | { t: 'ready' }
  | { t: 'acq'; run: number; i: number; asked: number; got: number }
  | { t: 'rel'; run: number; i: number; got: number; issued: number; returned: number }
  | { t: 'fail'; run: number; i: number; message: string }
  | { t: 'stopped'; run: number; i: number }
  | { t: 'counts'; id: number; requests: Record<string, number>; cpuS: number }
  | { t: 'error'; message: string };

export interface HandoffRun {
  lib: string;
  waiters: number;
  /** Release issued → next holder's acquire resolved, ms. */
  fromIssued: number[];
  /** Release call resolved (in the releasing process) → next holder's acquire resolved, ms; can be < 0. */
  fromReturned: number[];
  /** How long each measured acquire waited, ms. */
  waits: number[];
  handoffs: number;
  /** Holds that began before the previous one was released (must be 0). */
  overlaps: number;
  /** Acquires that gave up (wait ran out) or failed. */
  failures: number;
  firstFailure?: string;
  /** Over the measured window: commands all participants sent to Redis, their CPU, Redis's CPU. */
  requests: number;
  clientCpuS: number;
  cpu: CpuWindow;
  /** Hand-offs in that window (by arrival of the acquire reports). */
  windowHandoffs: number;
  capped: boolean;
}

interface Hold {
  i: number;
  asked: number;
  got: number;
  issued?: number;
  returned?: number;
}

interface Worker {
  child: ChildProcess;
  send(m: ToWorker): void;
}

/** `count` worker processes, each with one client of every library (bench/lib/locks-clients.ts allLibraries). */
export class HandoffWorkers {
  private listeners = new Set<(i: number, m: FromWorker) => void>();
  private nextId = 0;

  private constructor(private readonly workers: Worker[]) {
    workers.forEach((w, i) => w.child.on('message', (m: FromWorker) => this.listeners.forEach((l) => l(i, m))));
  }

  static async start(count: number, dist: string, redisUrl: string): Promise<HandoffWorkers> {
    const workers = Array.from({ length: count }, (_, i): Worker => {
      const child = spawn(process.execPath, ['--import', 'tsx', __filename], {
        cwd: ROOT,
        env: { ...process.env, LOCKS_BENCH_WORKER: String(i), LOCKS_BENCH_DIST: dist, LOCKS_BENCH_REDIS: redisUrl },
        stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
      });
      const kill = () => void (child.exitCode === null && child.signalCode === null && child.kill('SIGKILL'));
      const unregister = onCleanup(`locks hand-off worker ${i}`, kill, kill);
      child.once('exit', () => unregister());
      return { child, send: (m) => void (child.connected && child.send(m)) };
    });
    const pool = new HandoffWorkers(workers);
    await Promise.all(workers.map((_, i) => pool.expect(i, (m) => m.t === 'ready', 60_000, 'start')));
    return pool;
  }

  /** Resolves with worker i's first message that `match`es; rejects on an error report, its exit, or after timeoutMs. */
  private expect(i: number, match: (m: FromWorker) => boolean, timeoutMs: number, what: string): Promise<FromWorker> {
    const child = this.workers[i].child;
    return new Promise((resolve, reject) => {
      const done = (err?: Error, m?: FromWorker) => {
        clearTimeout(timer);
        this.listeners.delete(listener);
        child.off('exit', onExit);
        if (err) reject(err);
        else resolve(m!);
      };
      const listener = (from: number, m: FromWorker) => {
        if (from !== i) return;
        if (m.t === 'error') done(new Error(`hand-off worker ${i}: ${m.message}`));
        else if (match(m)) done(undefined, m);
      };
      const onExit = (code: number | null, signal: string | null) => done(new Error(`hand-off worker ${i} exited (${signal ?? code}) during ${what}`));
      const timer = setTimeout(() => done(new Error(`hand-off worker ${i}: no answer to ${what} within ${timeoutMs} ms`)), timeoutMs);
      this.listeners.add(listener);
      child.once('exit', onExit);
    });
  }

  /** Commands sent so far per library, summed over workers [0, n), and their CPU seconds. */
  private async counts(n: number, lib: string): Promise<{ requests: number; cpuS: number }> {
    const id = this.nextId++;
    const replies = Promise.all(Array.from({ length: n }, (_, i) => this.expect(i, (m) => m.t === 'counts' && m.id === id, 10_000, 'counts')));
    for (let i = 0; i < n; i++) this.workers[i].send({ t: 'counts', id });
    const rs = (await replies) as Extract<FromWorker, { t: 'counts' }>[];
    return { requests: rs.reduce((s, r) => s + (r.requests[lib] ?? 0), 0), cpuS: rs.reduce((s, r) => s + r.cpuS, 0) };
  }

  /**
   * One run: workers [0, waiters] contend for `name` with library `lib` until `target` hand-offs
   * after the warm-up have happened or `o.capS` has passed.
   */
  async run(lib: string, waiters: number, name: string, target: number, o: HandoffSettings, redisCpu: RedisCpu): Promise<HandoffRun> {
    const n = waiters + 1;
    const run = this.nextId++;
    const holds: Hold[] = [];
    const open = new Map<number, Hold>();
    /** Workers that released and wait for someone else to take the lock (the `got` of their hold). */
    const pending = new Map<number, number>();
    let latestGot = new Array<number>(n).fill(-Infinity);
    let failures = 0;
    let firstFailure: string | undefined;
    let stopped = 0;
    let stopping = false;
    let capped = false;
    let lastMessage = performance.now();
    const deadline = performance.now() + o.capS * 1000;
    type Mark = { snap: Promise<Snapshot>; counts: Promise<{ requests: number; cpuS: number }>; arrivals: number };
    let windowStart: Mark | undefined;
    let windowEnd: Mark | undefined;
    const mark = (): Mark => ({ snap: snapshot(redisCpu), counts: this.counts(n, lib), arrivals: holds.length });

    let finished!: () => void;
    let failed!: (err: Error) => void;
    const allStopped = new Promise<void>((resolve, reject) => {
      finished = resolve;
      failed = reject;
    });
    const stop = (cap: boolean) => {
      if (stopping) return;
      stopping = true;
      capped = cap;
      windowEnd = mark();
      for (let i = 0; i < n; i++) this.workers[i].send({ t: 'stop', run });
    };
    const letIn = (i: number) => {
      pending.delete(i);
      this.workers[i].send({ t: 'go', run });
    };
    const listener = (i: number, m: FromWorker) => {
      if (i >= n || !('run' in m) || m.run !== run) {
        if (m.t === 'error') failed(new Error(`hand-off worker ${i}: ${m.message}`));
        return;
      }
      lastMessage = performance.now();
      if (m.t === 'acq') {
        const h: Hold = { i, asked: m.asked, got: m.got };
        holds.push(h);
        open.set(i, h);
        latestGot = latestGot.map((g, j) => (j === i ? Math.max(g, m.got) : g));
        for (const [w, got] of pending) if (w !== i && m.got > got) letIn(w);
        if (holds.length === o.warmup + 1) windowStart = mark();
        if (!stopping && holds.length >= o.warmup + 1 + target) stop(false);
        else if (!stopping && performance.now() > deadline) stop(true);
      } else if (m.t === 'rel') {
        const h = open.get(i);
        if (h) Object.assign(h, { issued: m.issued, returned: m.returned });
        open.delete(i);
        if (stopping) return;
        // Someone else took the lock after this hold already (reports from two processes can cross): go at once.
        if (latestGot.some((g, j) => j !== i && g > m.got)) letIn(i);
        else pending.set(i, m.got);
      } else if (m.t === 'fail') {
        failures++;
        firstFailure ??= m.message;
        if (failures > 20) stop(false);
      } else if (m.t === 'stopped') {
        if (++stopped === n) finished();
      }
    };
    this.listeners.add(listener);
    const exits = this.workers.slice(0, n).map((w, i) => {
      const onExit = () => failed(new Error(`hand-off worker ${i} exited during a run`));
      w.child.once('exit', onExit);
      return () => w.child.off('exit', onExit);
    });
    const stall = setInterval(() => {
      if (performance.now() - lastMessage > 20_000) failed(new Error(`hand-off run ${lib}: no report from any worker for 20 s (${holds.length} holds so far)`));
    }, 1000);
    try {
      for (let i = 0; i < n; i++) this.workers[i].send({ t: 'run', run, lib, name, holdMs: o.holdMs, firstHoldMs: o.firstHoldMs });
      await allStopped;
    } finally {
      clearInterval(stall);
      this.listeners.delete(listener);
      exits.forEach((off) => off());
    }
    const [c0, c1, s0, s1] = await Promise.all([windowStart?.counts, windowEnd?.counts, windowStart?.snap, windowEnd?.snap]);

    // Holds in time order; hand-off j is from hold j-1's release to hold j's acquire. Only those
    // before the stop count (the drain after it skips the hold).
    const inOrder = [...holds].sort((a, b) => a.got - b.got);
    const r: HandoffRun = {
      lib,
      waiters,
      fromIssued: [],
      fromReturned: [],
      waits: [],
      handoffs: 0,
      overlaps: 0,
      failures,
      firstFailure,
      requests: c0 && c1 ? c1.requests - c0.requests : NaN,
      clientCpuS: c0 && c1 ? c1.cpuS - c0.cpuS : NaN,
      cpu: s0 && s1 ? cpuBetween(s0, s1) : { wallS: NaN, selfS: NaN },
      windowHandoffs: windowStart && windowEnd ? windowEnd.arrivals - windowStart.arrivals : NaN,
      capped,
    };
    for (let j = 1; j < inOrder.length; j++) {
      const prev = inOrder[j - 1];
      const h = inOrder[j];
      if (prev.issued === undefined || h.got < prev.issued) r.overlaps++;
      const counted = j > o.warmup && j <= o.warmup + target && (windowEnd === undefined || j < windowEnd.arrivals);
      if (!counted || prev.issued === undefined || prev.returned === undefined) continue;
      r.fromIssued.push(h.got - prev.issued);
      r.fromReturned.push(h.got - prev.returned);
      r.waits.push(h.got - h.asked);
      r.handoffs++;
    }
    return r;
  }

  async close(): Promise<void> {
    await Promise.all(
      this.workers.map(
        (w) =>
          new Promise<void>((resolve) => {
            if (w.child.exitCode !== null || w.child.signalCode !== null) return resolve();
            const force = setTimeout(() => w.child.kill('SIGKILL'), 10_000);
            w.child.once('exit', () => {
              clearTimeout(force);
              resolve();
            });
            w.send({ t: 'exit' });
          }),
      ),
    );
  }
}

// ---------------------------------------------------------------------------------------------
// The worker side

interface Contention {
  run: number;
  done: boolean;
  go?: () => void;
}

async function runWorker(index: number): Promise<void> {
  const dist = process.env.LOCKS_BENCH_DIST;
  const redisUrl = process.env.LOCKS_BENCH_REDIS;
  if (!dist || !redisUrl) throw new Error('LOCKS_BENCH_DIST and LOCKS_BENCH_REDIS are required');
  const send = (m: FromWorker) => void (process.connected && process.send!(m));
  const clients = new Map<string, LockClient>();
  // The reference row fenced-floor cannot wait, so it takes no part in a hand-off.
  const { fencedFloor: _uncontendedOnly, ...libs } = allLibraries(dist, redisUrl);
  for (const lib of Object.values(libs)) clients.set(lib.id, await lib.connect());
  let current: Contention | undefined;

  const contend = async (m: Extract<ToWorker, { t: 'run' }>, c: Contention) => {
    const client = clients.get(m.lib);
    if (!client) throw new Error(`no library ${m.lib}`);
    let first = true;
    while (!c.done) {
      const asked = monotonicMs();
      let release: () => Promise<void>;
      try {
        release = await client.acquire(m.name);
      } catch (err) {
        send({ t: 'fail', run: m.run, i: index, message: err instanceof Error ? `${err.name}: ${err.message}` : String(err) });
        await sleep(10);
        continue;
      }
      const got = monotonicMs();
      send({ t: 'acq', run: m.run, i: index, asked, got });
      if (!c.done) await sleep(first ? m.firstHoldMs : m.holdMs);
      first = false;
      const issued = monotonicMs();
      await release();
      const returned = monotonicMs();
      send({ t: 'rel', run: m.run, i: index, got, issued, returned });
      if (c.done) break;
      await new Promise<void>((go) => (c.go = go));
    }
    send({ t: 'stopped', run: m.run, i: index });
  };

  process.on('message', (m: ToWorker) => {
    if (m.t === 'run') {
      const c: Contention = { run: m.run, done: false };
      current = c;
      contend(m, c).catch((err: Error) => send({ t: 'error', message: err.stack ?? err.message }));
    } else if ((m.t === 'go' || m.t === 'stop') && current?.run === m.run) {
      if (m.t === 'stop') current.done = true;
      const go = current.go;
      current.go = undefined;
      go?.();
    } else if (m.t === 'counts') {
      const cpu = process.cpuUsage();
      send({ t: 'counts', id: m.id, requests: Object.fromEntries([...clients].map(([id, c]) => [id, c.requests])), cpuS: (cpu.user + cpu.system) / 1e6 });
    } else if (m.t === 'exit') {
      void Promise.all([...clients.values()].map((c) => c.close().catch(() => undefined))).finally(() => process.exit(0));
    }
  });
  process.on('disconnect', () => process.exit(0));
  send({ t: 'ready' });
}

if (require.main === module && process.env.LOCKS_BENCH_WORKER) {
  runWorker(Number(process.env.LOCKS_BENCH_WORKER)).catch((err: Error) => {
    if (process.connected) process.send!({ t: 'error', message: err.stack ?? err.message } satisfies FromWorker);
    console.error('locks hand-off worker failed:', err);
    process.exit(1);
  });
}
