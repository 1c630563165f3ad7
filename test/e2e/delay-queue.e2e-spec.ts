import { ChildProcess, spawn } from 'node:child_process';
import { existsSync, readdirSync, statSync } from 'node:fs';
import { join, resolve } from 'node:path';
import Redis from 'ioredis';
import { DelayQueueService } from '../../src/engines/delay-queue/delay-queue.service';
import { waitUntil } from '../harness/redis-process';
import { RedisServerHandle, startRedisServer } from '../harness/redis-server';
import { startTestApp, TestApp } from '../support/test-app';

/**
 * The delay queue with real worker processes (test/support/delay-queue-worker.ts)
 * sharing one Redis and one key prefix: several instances on one queue, an
 * instance killed with kill -9 mid-handler, and graceful stops. This process
 * schedules through an in-process app; the workers record each delivery in
 * Redis under a namespace of their own, which the tests read back.
 */

const ROOT = resolve(__dirname, '../..');
const WORKER = join(ROOT, 'test/support/delay-queue-worker.ts');
const BUILT = join(ROOT, 'dist/engines/delay-queue/queue-processor.js');

interface WorkerSettings {
  queue: string;
  record: string;
  sleepMs: number;
  concurrency: number;
  visibilityMs: number;
  pollMs: number;
}

interface WorkerProc {
  name: string;
  pid: number;
  child: ChildProcess;
  ready: Promise<void>;
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  output(): string;
}

/** One line of a worker's delivery log. */
interface Entry {
  kind: 'start' | 'end';
  id: string;
  attempt: number;
  pid: number;
  at: number;
  dueAt: number;
}

/** Newest mtime of the service's sources: the workers run dist/, which must be built from them. */
function newestSource(dir: string): number {
  let newest = 0;
  for (const name of readdirSync(dir)) {
    const p = join(dir, name);
    const s = statSync(p);
    if (s.isDirectory()) newest = Math.max(newest, newestSource(p));
    else if (name.endsWith('.ts') && !name.endsWith('.spec.ts')) newest = Math.max(newest, s.mtimeMs);
  }
  return newest;
}

describe('Delay queue across worker processes', () => {
  let redis: RedisServerHandle;
  let producer: TestApp;
  let dq: DelayQueueService;
  let raw: Redis;
  const live: WorkerProc[] = [];

  beforeAll(async () => {
    if (!existsSync(BUILT) || statSync(BUILT).mtimeMs < newestSource(join(ROOT, 'src'))) {
      throw new Error('dist/ is missing or older than src/: the worker processes run the build, so run `npm run build` first (npm test does)');
    }
    redis = await startRedisServer();
    producer = await startTestApp(redis.url);
    dq = producer.app.get(DelayQueueService);
    raw = new Redis(redis.url);
  });

  afterAll(async () => {
    await Promise.all(
      live.map(async (w) => {
        w.child.kill('SIGKILL');
        await w.exited;
      }),
    );
    raw?.disconnect();
    await producer?.close();
    await redis?.destroy();
  });

  const prefix = () => producer.config.redis.keyPrefix;
  /** Where a test's workers record their deliveries: outside the engine's `<prefix>:delay-queue:` keys. */
  const recordFor = (queue: string) => `${prefix()}:dq-e2e:${queue}`;

  function startWorker(name: string, s: WorkerSettings): WorkerProc {
    let out = '';
    const child = spawn(process.execPath, ['--require', require.resolve('tsx/cjs'), WORKER], {
      cwd: ROOT,
      env: {
        PATH: process.env.PATH ?? '',
        NODE_ENV: 'test',
        LOG_LEVEL: 'warn',
        REDIS_URL: redis.url,
        REDIS_KEY_PREFIX: prefix(),
        DQW_QUEUE: s.queue,
        DQW_RECORD: s.record,
        DQW_SLEEP_MS: String(s.sleepMs),
        DQW_CONCURRENCY: String(s.concurrency),
        DQW_VISIBILITY_MS: String(s.visibilityMs),
        DQW_POLL_MS: String(s.pollMs),
      },
      stdio: ['ignore', 'pipe', 'pipe', 'ipc'],
    });
    child.stdout!.on('data', (d) => (out += d));
    child.stderr!.on('data', (d) => (out += d));
    const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((r) => child.once('exit', (code, signal) => r({ code, signal })));
    const ready = new Promise<void>((res, rej) => {
      const timer = setTimeout(() => rej(new Error(`worker ${name} not ready after 20 s:\n${out}`)), 20_000);
      child.on('message', (m: { type?: string }) => {
        if (m.type === 'ready') {
          clearTimeout(timer);
          res();
        }
      });
      void exited.then((e) => {
        clearTimeout(timer);
        rej(new Error(`worker ${name} exited (${e.code ?? e.signal}) before it was ready:\n${out}`));
      });
    });
    ready.catch(() => undefined); // reported where it is awaited
    const w: WorkerProc = { name, pid: child.pid!, child, ready, exited, output: () => out };
    live.push(w);
    return w;
  }

  /** Sends SIGTERM now; resolves with how long the worker took to exit, which must be cleanly (0). */
  function terminate(w: WorkerProc): Promise<number> {
    const sent = Date.now();
    w.child.kill('SIGTERM');
    return w.exited.then((e) => {
      if (e.code !== 0) throw new Error(`worker ${w.name} exited with ${e.code ?? e.signal} after SIGTERM:\n${w.output()}`);
      return Date.now() - sent;
    });
  }

  /** Stops a worker gracefully; returns its counters as it wrote them on the way out. */
  async function stopWorker(w: WorkerProc, record: string): Promise<Record<string, number>> {
    await terminate(w);
    return counters(record, w.pid);
  }

  /** Starts a worker, schedules `items` due now and waits until it has started every one (all its slots busy if they match). */
  async function startHolding(name: string, s: WorkerSettings, items: string[]): Promise<WorkerProc> {
    const w = startWorker(name, s);
    await w.ready;
    await Promise.all(items.map((id) => dq.schedule(s.queue, id, { delayMs: 0 }, { id })));
    const started = async () => (await entries(s.record)).filter((e) => e.kind === 'start' && e.pid === w.pid).length;
    await waitUntil(`${name} has started ${items.length}`, async () => (await started()) === items.length || `${await started()} started`, 10_000);
    return w;
  }

  async function counters(record: string, pid: number): Promise<Record<string, number>> {
    const h = await raw.hgetall(`${record}:summary:${pid}`);
    return Object.fromEntries(Object.entries(h).map(([k, v]) => [k, Number(v)]));
  }

  /** The delivery log, with lines the recorder sent twice across a Redis restart (identical, same run number) once. */
  async function entries(record: string): Promise<Entry[]> {
    return [...new Set(await raw.lrange(`${record}:log`, 0, -1))].map((line) => {
      const [kind, id, attempt, pid, , at, dueAt] = line.split(' ');
      return { kind: kind as Entry['kind'], id, attempt: Number(attempt), pid: Number(pid), at: Number(at), dueAt: Number(dueAt) };
    });
  }

  const violations = (record: string) => raw.lrange(`${record}:violations`, 0, -1);
  const ended = async (record: string, ids: string[]) => {
    const done = new Set((await entries(record)).filter((e) => e.kind === 'end').map((e) => e.id));
    const missing = ids.filter((id) => !done.has(id));
    return missing.length === 0 || `${missing.length} not done, e.g. ${missing.slice(0, 5).join(' ')}`;
  };
  const drained = (queue: string) => async () => {
    const s = await dq.stats(queue);
    return s.pending + s.ready + s.inFlight + s.dead === 0 || JSON.stringify(s);
  };
  const ids = (stem: string, n: number) => Array.from({ length: n }, (_, i) => `${stem}-${i}`);
  const byId = (log: Entry[], id: string) => log.filter((e) => e.id === id);

  /** Two workers with the same settings on one queue, both ready. */
  async function startPair(s: WorkerSettings): Promise<[WorkerProc, WorkerProc]> {
    const pair: [WorkerProc, WorkerProc] = [startWorker('A', s), startWorker('B', s)];
    await Promise.all(pair.map((w) => w.ready));
    return pair;
  }

  /** Schedules `n` items `<stem>-<i>` due `stepMs` apart, the first `startInMs` from now; returns each id's due time. */
  async function scheduleSpread(queue: string, stem: string, n: number, startInMs: number, stepMs: number): Promise<Map<string, number>> {
    const base = Date.now() + startInMs;
    const dueOf = new Map(ids(stem, n).map((id, i) => [id, base + i * stepMs]));
    const all = [...dueOf.keys()];
    for (let i = 0; i < all.length; i += 250) {
      await Promise.all(all.slice(i, i + 250).map((id) => dq.schedule(queue, id, { dueAt: dueOf.get(id)! }, { id })));
    }
    return dueOf;
  }

  it('two processes on one queue: each of 1,000 items is handled to completion exactly once, never by two handlers at once, never early, and both do work', async () => {
    const queue = 'pair';
    const record = recordFor(queue);
    const [a, b] = await startPair({ queue, record, sleepMs: 5, concurrency: 10, visibilityMs: 5000, pollMs: 1000 });
    // 1,000 items due over 2 s, starting half a second from now.
    const dueOf = await scheduleSpread(queue, 'item', 1000, 500, 2);
    const all = [...dueOf.keys()];
    await waitUntil('all 1,000 items handled', () => ended(record, all), 20_000, 100);
    await waitUntil('the queue drained (every delivery acked)', drained(queue), 5000, 50);

    const log = await entries(record);
    const problems: string[] = [];
    for (const id of all) {
      const es = byId(log, id);
      const starts = es.filter((e) => e.kind === 'start');
      const ends = es.filter((e) => e.kind === 'end');
      if (starts.length !== 1 || ends.length !== 1) problems.push(`${id}: ${starts.length} starts, ${ends.length} ends`);
      else if (starts[0].attempt !== 1) problems.push(`${id}: delivered as attempt ${starts[0].attempt}`);
      else if (starts[0].dueAt !== dueOf.get(id)) problems.push(`${id}: due ${starts[0].dueAt}, scheduled for ${dueOf.get(id)}`);
      // Same machine, so the worker's clock is the Redis clock.
      else if (starts[0].at < starts[0].dueAt) problems.push(`${id}: started ${starts[0].dueAt - starts[0].at} ms before it was due`);
    }
    expect(problems).toEqual([]);
    expect(await violations(record)).toEqual([]);

    const ends = log.filter((e) => e.kind === 'end');
    const byA = ends.filter((e) => e.pid === a.pid).length;
    const byB = ends.filter((e) => e.pid === b.pid).length;
    expect(byA + byB).toBe(1000);
    expect(Math.min(byA, byB)).toBeGreaterThanOrEqual(100); // about half each in practice

    const [ca, cb] = [await stopWorker(a, record), await stopWorker(b, record)];
    expect({ fired: ca.fired + cb.fired, acked: ca.acked + cb.acked, retried: ca.retried + cb.retried, dead: ca.dead + cb.dead }).toEqual({
      fired: 1000,
      acked: 1000,
      retried: 0,
      dead: 0,
    });
  });

  it('kill -9 mid-handler loses nothing: after the visibility timeout another process completes those items as attempt 2, once each', async () => {
    const queue = 'crash';
    const record = recordFor(queue);
    const common = { queue, record, visibilityMs: 1500, pollMs: 200 };
    const held = ids('held', 5);
    const a = await startHolding('A', { ...common, sleepMs: 30_000, concurrency: 5 }, held);

    const b = startWorker('B', { ...common, sleepMs: 20, concurrency: 10 });
    await b.ready;
    // A's slots are all taken: these are B's from the start.
    const fresh = ids('fresh', 5);
    await Promise.all(fresh.map((id) => dq.schedule(queue, id, { delayMs: 300 }, { id })));

    const killedAt = Date.now();
    a.child.kill('SIGKILL');
    expect((await a.exited).signal).toBe('SIGKILL');
    await waitUntil('every item completed', () => ended(record, [...held, ...fresh]), 15_000, 50);
    await waitUntil('the queue drained', drained(queue), 5000, 50);

    const log = await entries(record);
    const problems: string[] = [];
    for (const id of held) {
      const got = byId(log, id).map((e) => `${e.kind} ${e.pid === a.pid ? 'A' : e.pid === b.pid ? 'B' : e.pid} ${e.attempt}`);
      if (JSON.stringify(got) !== JSON.stringify(['start A 1', 'start B 2', 'end B 2'])) problems.push(`${id}: ${got.join(', ')}`);
      const redelivered = byId(log, id).find((e) => e.kind === 'start' && e.pid === b.pid);
      // A heartbeat every visibility/3 kept A's lease until the kill: no redelivery before it ran out.
      if (redelivered && redelivered.at - killedAt < 800) problems.push(`${id}: redelivered ${redelivered.at - killedAt} ms after the kill`);
      if (redelivered && redelivered.at - killedAt > 6000) problems.push(`${id}: redelivered only ${redelivered.at - killedAt} ms after the kill`);
    }
    for (const id of fresh) {
      const got = byId(log, id).map((e) => `${e.kind} ${e.pid === b.pid ? 'B' : e.pid} ${e.attempt}`);
      if (JSON.stringify(got) !== JSON.stringify(['start B 1', 'end B 1'])) problems.push(`${id}: ${got.join(', ')}`);
    }
    expect(problems).toEqual([]);
    expect(await violations(record)).toEqual([]);
    expect(await stopWorker(b, record)).toEqual({ fired: 10, acked: 10, retried: 0, dead: 0 });
  });

  it('SIGTERM: running handlers finish within the grace and are acked, nothing new is claimed, and the process exits 0', async () => {
    const queue = 'drain';
    const record = recordFor(queue);
    const running = ids('running', 5);
    const a = await startHolding('A', { queue, record, sleepMs: 1000, concurrency: 5, visibilityMs: 5000, pollMs: 200 }, running);

    const stopping = terminate(a);
    // Due while A is still finishing its handlers: a stopping worker must leave them alone.
    const late = ids('late', 3);
    await Promise.all(late.map((id) => dq.schedule(queue, id, { delayMs: 300 }, { id })));
    // It waited for the handlers (1 s), not for the whole grace (5 s).
    expect(await stopping).toBeLessThan(4000);

    const log = await entries(record);
    expect(
      log
        .filter((e) => e.kind === 'end')
        .map((e) => `${e.id} ${e.attempt}`)
        .sort(),
    ).toEqual(running.map((id) => `${id} 1`));
    expect(log.filter((e) => late.includes(e.id))).toEqual([]);
    expect(await counters(record, a.pid)).toEqual({ fired: 5, acked: 5, retried: 0, dead: 0 });
    for (const id of running) expect(await dq.get(queue, id)).toBeNull();
    for (const id of late) expect(await dq.get(queue, id)).toMatchObject({ state: expect.stringMatching(/^(pending|ready)$/), attempts: 0 });

    // Nothing is lost: the next instance takes the late items.
    const b = startWorker('B', { queue, record, sleepMs: 0, concurrency: 5, visibilityMs: 5000, pollMs: 200 });
    await b.ready;
    await waitUntil('B completed the late items', () => ended(record, late), 10_000, 50);
    await waitUntil('the queue drained', drained(queue), 5000, 50);
    expect(await stopWorker(b, record)).toEqual({ fired: 3, acked: 3, retried: 0, dead: 0 });
  });

  it('SIGTERM: an item whose handler ignores the signal past the grace is handed back at once, and another process completes it as attempt 2', async () => {
    const queue = 'handback';
    const record = recordFor(queue);
    // Grace = min(visibility timeout, 10 s) = 1.5 s.
    const a = await startHolding('A', { queue, record, sleepMs: 30_000, concurrency: 2, visibilityMs: 1500, pollMs: 200 }, ['stuck']);

    const tookMs = await terminate(a);
    expect(tookMs).toBeGreaterThanOrEqual(1400);
    expect(tookMs).toBeLessThan(4500);
    // Released to ready, not left in flight until its visibility deadline.
    expect(await dq.get(queue, 'stuck')).toMatchObject({ state: 'ready', attempts: 1 });
    expect(await counters(record, a.pid)).toEqual({ fired: 1, acked: 0, retried: 0, dead: 0 });

    const b = startWorker('B', { queue, record, sleepMs: 0, concurrency: 2, visibilityMs: 1500, pollMs: 200 });
    await b.ready;
    await waitUntil('B completed it', () => ended(record, ['stuck']), 10_000, 50);
    await waitUntil('the queue drained', drained(queue), 5000, 50);
    const log = await entries(record);
    expect(log.map((e) => `${e.kind} ${e.pid === a.pid ? 'A' : e.pid === b.pid ? 'B' : e.pid} ${e.attempt}`)).toEqual(['start A 1', 'start B 2', 'end B 2']);
    expect(await violations(record)).toEqual([]);
    expect(await stopWorker(b, record)).toEqual({ fired: 1, acked: 1, retried: 0, dead: 0 });
  });

  it('a Redis restart mid-run loses nothing: every item completes and the queue drains, attempt numbers never repeat, and only deliveries caught by the restart run again', async () => {
    const queue = 'restart';
    const record = recordFor(queue);
    const [a, b] = await startPair({ queue, record, sleepMs: 50, concurrency: 10, visibilityMs: 3000, pollMs: 200 });
    const all = [...(await scheduleSpread(queue, 'r', 300, 300, 5)).keys()];
    await waitUntil('about a third handled', async () => (await raw.llen(`${record}:log`)) >= 200 || 'not yet', 10_000, 20);
    await redis.restart(); // AOF with fsync always: the queue survives, connections and the script cache do not
    await waitUntil('every item handled', () => ended(record, all), 20_000, 100);
    await waitUntil('the queue drained', drained(queue), 10_000, 100);

    const log = await entries(record);
    const problems: string[] = [];
    let again = 0;
    for (const id of all) {
      const starts = byId(log, id).filter((e) => e.kind === 'start');
      // A claim whose reply the restart swallowed still counts a delivery, so attempt numbers may skip; they never repeat or go back.
      if (starts.some((e, i) => i > 0 && e.attempt <= starts[i - 1].attempt)) problems.push(`${id}: attempts ${starts.map((e) => e.attempt).join(',')}`);
      again += starts.length - 1;
    }
    expect(problems).toEqual([]);
    expect(await violations(record)).toEqual([]);
    // At most the deliveries running around the restart: both instances' slots, twice over.
    expect(again).toBeLessThanOrEqual(40);
    const [ca, cb] = [await stopWorker(a, record), await stopWorker(b, record)];
    expect({ fired: ca.fired + cb.fired, dead: ca.dead + cb.dead }).toEqual({ fired: 300 + again, dead: 0 });
    // An ack whose reply the restart swallowed is re-sent, finds the item gone and is not counted: at most a few.
    expect(ca.acked + cb.acked).toBeLessThanOrEqual(300);
    expect(ca.acked + cb.acked).toBeGreaterThanOrEqual(290);
  });
});
