/**
 * delay-queue: the delay-queue engine (DelayQueueService, src/engines/delay-queue, in a Nest application context of AppModule
 * without HTTP) against its peer BullMQ and the list-scan baseline (Redisson's RDelayedQueue layout, bench/lib/list-scan-queue.ts),
 * side by side on one redis-server; the method in docs/benchmarks.md ("delay-queue").
 *   cancel      cancel latency at 10k, 100k and 1M pending items, a PING after each (the floor); Redis memory per pending item;
 *   throughput  schedule() vs BullMQ Queue.add at 50 in flight, and a what-if: the engine with ioredis auto-pipelining on;
 *   lateness    firing lateness of two engine instances (this file again with DQ_BENCH_WORKER set) on one queue.
 * What the engine must get right is proved by tests, not here: each item handled once, never early, none lost across a kill -9
 * (test/e2e/delay-queue.e2e-spec.ts); cancel reports where the item was and is O(log n) (test/e2e/delay-queue-service.e2e-spec.ts).
 * Options: --quick (10k and 100k), --only cancel,throughput,lateness. Only the standard run writes bench/results/delay-queue.{md,json}
 * and docs/delay-queue-cancel.svg; other runs write to $TMPDIR/redis-pay-bench/.
 */
import { BUSY_MACHINE, busyMark, cpuWindow, type CpuWindow, inFlight, otherShare, redisCpuFromInfo, type RedisCpu } from './lib/engine-bench';
import { NestFactory } from '@nestjs/core';
import Redis from 'ioredis';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import type { Queue } from 'bullmq';
import { AppModule } from '../src/app.module';
import { DelayQueueService, type Delivery } from '../src/engines/delay-queue';
import { loadConfig } from '../src/platform/config/load-config';
import { RedisService } from '../src/platform/redis/redis.service';
import { onCleanup } from './lib/cleanup';
import { ListScanQueue } from './lib/list-scan-queue';
import { dist, type Dist, medianBy, ms, runSchedule } from './lib/measure';
import { spawnManaged } from './lib/proc';
import { memoryUsage, usedMemory } from './lib/redis-memory';
import type { BenchRedis } from './lib/redis-server';
import { fmtInt, fmtNum, type GoalLine, markdownTable } from './lib/report';
import { type BenchContext, defineBench } from './lib/scenario';
import { lineChartSvg } from './lib/svg-chart';

const ROOT = resolve(__dirname, '..');
const DAY_MS = 86_400_000;
const PREFIX = 'bench-dq';
const GOALS = { cancelP99At1MMs: 1, vsListScanAt100k: 100, latenessP99Ms: 50, bytesPerItem: 200 };
/** A fill (one design, all sizes) stops here; what it reached is measured and reported. */
const FILL_BUDGET_S = 180;
type DesignId = 'engine' | 'list-scan' | 'bullmq';
const LABEL: Record<DesignId | 'engine-autopipelining', string> = {
  engine: 'engine: DelayQueueService',
  'list-scan': 'list-scan: Redisson-style list walk (baseline)',
  bullmq: 'BullMQ (peer)',
  'engine-autopipelining': 'what-if: engine with auto-pipelining on on its command connection',
};

function options({ quick }: BenchContext) {
  const listScan: Record<number, number> = quick ? { 10_000: 200, 100_000: 50 } : { 10_000: 1000, 100_000: 300, 1_000_000: 60 };
  return {
    quick,
    sizes: quick ? [10_000, 100_000] : [10_000, 100_000, 1_000_000],
    /** Measured cancels per size (a list-scan cancel at 1M takes a few hundred ms). */
    samples: (d: DesignId, size: number) => (d === 'list-scan' ? listScan[size] : quick ? 1000 : 5000),
    throughput: { items: quick ? 10_000 : 50_000, rounds: quick ? 2 : 4, concurrency: 50 },
    lateness: { items: quick ? 2000 : 5000, leadMs: 3000, spreadMs: 10_000, concurrency: 50 },
  };
}
type Options = ReturnType<typeof options>;

const itemId = (i: number) => `o-${i}`;
/** A reminder-like payload whose JSON is 100 bytes (ASCII), unique per item. */
const payload = (i: number) => {
  const base = { orderId: itemId(i), merchant: 'm_bench', amountCents: 4999, currency: 'CNY', note: '' };
  return { ...base, note: 'x'.repeat(100 - JSON.stringify(base).length) };
};
const sizeLabel = (n: number) => (n >= 1e6 ? `${n / 1e6}M` : `${n / 1e3}k`);

/** The engine: the whole application module (real config, Redis, scripts, metrics) without HTTP. */
async function startEngine(redisUrl: string) {
  const config = loadConfig({ NODE_ENV: 'test', LOG_LEVEL: 'silent', REDIS_URL: redisUrl, REDIS_KEY_PREFIX: PREFIX });
  const app = await NestFactory.createApplicationContext(AppModule.forRoot(config), { logger: ['error'] });
  return { app, dq: app.get(DelayQueueService), client: app.get(RedisService).client };
}
type Engine = Awaited<ReturnType<typeof startEngine>>;

async function openBull(redis: BenchRedis, name: string): Promise<Queue> {
  const { Queue } = await import('bullmq');
  const q = new Queue(name, { connection: { host: '127.0.0.1', port: redis.port }, prefix: 'bench-bull' });
  q.on('error', (err) => console.error(`[bench] bullmq queue ${name}: ${err.message}`));
  await q.waitUntilReady();
  return q;
}

// ---------------------------------------------------------------------------------------------
// Cancel latency and memory per pending item

/** A design under test: `add` items due in a day, `cancel` one, `keys`: the KEYS pattern of every key of its queue. */
type Design = { id: DesignId; add(is: number[]): Promise<unknown>; cancel(i: number): Promise<unknown>; keys: string; close?(): Promise<unknown> };

/** The part of a queue a key holds, for the memory breakdown: its last segment (BullMQ: one hash per job). */
const partOf = (key: string) => (/:o-\d+$/.test(key) ? 'job hashes' : key.slice(key.lastIndexOf(':') + 1));
const range = (a: number, b: number) => Array.from({ length: b - a }, (_, k) => a + k);

function designs(redis: BenchRedis, engine: Engine, scanClient: Redis): (() => Promise<Design>)[] {
  const ls = new ListScanQueue(scanClient, 'bench-ls');
  const value = (i: number) => JSON.stringify(payload(i));
  const schedule = (i: number) => engine.dq.schedule('cancel', itemId(i), { delayMs: DAY_MS }, payload(i));
  const job = (i: number) => ({ name: 'remind', data: payload(i), opts: { delay: DAY_MS, jobId: itemId(i) } });
  return [
    async () => ({
      id: 'engine',
      keys: `${PREFIX}:*{q:cancel}*`,
      add: (is) => inFlight(0, is.length, 64, (k) => schedule(is[k])),
      cancel: (i) => engine.dq.cancel('cancel', itemId(i)),
    }),
    async () => ({
      id: 'list-scan',
      keys: 'bench-ls:*',
      add: (is) => ls.offerMany(is.map((i) => ({ value: value(i), dueAt: Date.now() + DAY_MS }))),
      cancel: (i) => ls.remove(value(i)),
    }),
    async () => {
      const q = await openBull(redis, 'cancel');
      return { id: 'bullmq', keys: 'bench-bull:cancel:*', add: (is) => q.addBulk(is.map(job)), cancel: (i) => q.remove(itemId(i)), close: () => q.close() };
    },
  ];
}

interface CancelPoint {
  design: DesignId;
  target: number;
  /** Pending items when measured (the target, or what the fill reached in its budget). */
  size: number;
  cancel: Dist;
  /** PING after each cancel, on a plain connection: the machine's floor in the same window. */
  ping: Dist;
  fillRate: number;
  bytesPerItem: number;
  byPart: string;
  usedPerItem: number;
  keyCount: number;
  cpu: CpuWindow;
}

async function sweep(design: Design, o: Options, admin: Redis, pinger: Redis, redisCpu: RedisCpu): Promise<CancelPoint[]> {
  const points: CancelPoint[] = [];
  const baseline = await usedMemory(admin);
  const gone = new Set<number>();
  let added = 0;
  const deadline = performance.now() + FILL_BUDGET_S * 1000;
  for (const target of o.sizes) {
    const t0 = performance.now();
    const want = target - (added - gone.size);
    // Batches of 1,000, 4 in flight, until the fill budget is used up.
    const batches = await inFlight(0, Math.ceil(want / 1000), 4, (k) => design.add(range(added + k * 1000, added + Math.min(want, k * 1000 + 1000))), deadline);
    const got = Math.min(want, batches * 1000);
    const fillRate = got / ((performance.now() - t0) / 1000);
    added += got;
    const size = added - gone.size;
    const keys = await admin.keys(design.keys);
    const parts = [...(await memoryUsage(admin, keys, partOf))].sort((a, b) => b[1] - a[1]);
    const bytes = parts.reduce((t, [, b]) => t + b, 0);
    const used = (await usedMemory(admin)) - baseline;
    const samples = Math.min(o.samples(design.id, target), Math.floor(size / 2));
    const warmup = Math.max(2, Math.round(samples / 20));
    const [lat, pings]: number[][] = [[], []];
    const end = await cpuWindow(redisCpu);
    for (let k = 0; k < warmup + samples; k++) {
      let i = Math.floor(Math.random() * added);
      while (gone.has(i)) i = Math.floor(Math.random() * added);
      const a = performance.now();
      await design.cancel(i);
      const b = performance.now();
      await pinger.ping();
      const c = performance.now();
      gone.add(i);
      if (k < warmup) continue;
      lat.push(b - a);
      pings.push(c - b);
    }
    const p: CancelPoint = {
      ...{ design: design.id, target, size, cancel: dist(lat), ping: dist(pings), fillRate, bytesPerItem: bytes / size, usedPerItem: used / size },
      byPart: parts.flatMap(([part, b]) => (b >= size ? [`${part} ${fmtInt(b / size)}`] : [])).join(', '),
      keyCount: keys.length,
      cpu: await end(),
    };
    points.push(p);
    console.error(`[bench] ${design.id} @ ${sizeLabel(size)}: cancel p50 ${ms(p.cancel.p50)} ms, p99 ${ms(p.cancel.p99)} ms; ${fmtInt(p.bytesPerItem)} B/item`);
    if (got < want) break;
  }
  return points;
}

async function measureCancel(o: Options, redis: BenchRedis, engine: Engine, admin: Redis, redisCpu: RedisCpu): Promise<CancelPoint[]> {
  const pinger = new Redis(redis.url);
  // The list-scan baseline gets the engine's connection options (no auto-pipelining) and no command timeout: a scan at 1M takes ~0.5 s.
  const scanClient = new Redis(redis.url, { enableAutoPipelining: false });
  const all: CancelPoint[] = [];
  try {
    for (const make of designs(redis, engine, scanClient)) {
      await admin.flushall('SYNC');
      const design = await make();
      all.push(...(await sweep(design, o, admin, pinger, redisCpu).finally(() => design.close?.())));
    }
  } finally {
    [pinger, scanClient].forEach((c) => c.disconnect());
    await admin.flushall('SYNC');
  }
  return all;
}

// ---------------------------------------------------------------------------------------------
// Schedule throughput

type Rate = 'engine' | 'bullmq' | 'engine-autopipelining';
type ThroughputRun = { design: Rate; perSecond: number; call: Dist; cpu: CpuWindow; attempts: number };

async function measureThroughput(o: Options, redis: BenchRedis, engine: Engine, admin: Redis, redisCpu: RedisCpu): Promise<ThroughputRun[]> {
  const t = o.throughput;
  const warm = Math.min(2000, t.items);
  const bull = await openBull(redis, 'throughput');
  const ids = Array.from({ length: t.items + warm }, (_, i) => itemId(i));
  const data = ids.map((_, i) => payload(i));
  const schedule = async (i: number) => void (await engine.dq.schedule('throughput', ids[i], { delayMs: DAY_MS }, data[i]));
  const calls: Record<Rate, (i: number) => Promise<void>> = {
    engine: schedule,
    'engine-autopipelining': schedule,
    bullmq: async (i) => void (await bull.add('remind', data[i], { delay: DAY_MS, jobId: ids[i] })),
  };
  const order: Rate[] = ['engine', 'bullmq', 'engine-autopipelining'];
  // Rounds in A-B-C, C-B-A order, so a drift hits every design alike; a disturbed run is made again (runSchedule).
  const slots = Array.from({ length: t.rounds }, (_, r) => (r % 2 ? [...order].reverse() : order)).flat();
  try {
    const { kept } = await runSchedule(
      slots,
      async (design) => {
        await admin.flushall('SYNC');
        // ioredis reads the option on every command, so this takes effect from the next call.
        engine.client.options.enableAutoPipelining = design === 'engine-autopipelining';
        await inFlight(t.items, t.items + warm, t.concurrency, calls[design]);
        const lat: number[] = [];
        const end = await cpuWindow(redisCpu);
        const t0 = performance.now();
        await inFlight(0, t.items, t.concurrency, async (i) => {
          const a = performance.now();
          await calls[design](i);
          lat.push(performance.now() - a);
        });
        const perSecond = t.items / ((performance.now() - t0) / 1000);
        console.error(`[bench] throughput ${design}: ${fmtInt(perSecond)} items/s`);
        return { design, perSecond, call: dist(lat), cpu: await end(), attempts: 1 };
      },
      (r) => otherShare(r.cpu),
      { busyShare: BUSY_MACHINE, retries: 2, budgetS: o.quick ? 60 : 600 },
      (d) => `throughput ${d}`,
    );
    return kept;
  } finally {
    engine.client.options.enableAutoPipelining = false;
    await bull.close();
    await admin.flushall('SYNC');
  }
}

/** A design's runs that other jobs did not disturb (all of them when every one was), and the median one by items/s. */
const fair = (runs: ThroughputRun[], d: Rate) => {
  const mine = runs.filter((r) => r.design === d);
  const quiet = mine.filter((r) => otherShare(r.cpu) <= BUSY_MACHINE);
  return quiet.length ? quiet : mine;
};
const medianRun = (runs: ThroughputRun[], d: Rate) => (fair(runs, d).length ? medianBy(fair(runs, d), (r) => r.perSecond) : undefined);
/** CPU µs per item, median over the fair runs: this process (client), redis-server, both. */
const cpuPerItem = (runs: ThroughputRun[], d: Rate, o: Options) => {
  const per = (f: (c: CpuWindow) => number) => f(medianBy(fair(runs, d), (r) => f(r.cpu)).cpu) * (1e6 / o.throughput.items);
  return { client: per((c) => c.selfS), redis: per((c) => c.redisS ?? NaN), total: per((c) => c.selfS + (c.redisS ?? NaN)) };
};

// ---------------------------------------------------------------------------------------------
// Firing lateness with two instances

const LATE_QUEUE = 'lateness';
type Lateness = { items: number; handled: number[]; lateness: Dist; redelivered: number };

async function waitFor(what: string, timeoutMs: number, check: () => boolean | Promise<boolean>): Promise<void> {
  for (const deadline = Date.now() + timeoutMs; !(await check()); await new Promise((r) => setTimeout(r, 50))) {
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
  }
}

async function measureLateness(o: Options, redis: BenchRedis, engine: Engine, admin: Redis, workDir: string): Promise<Lateness> {
  await admin.flushall('SYNC');
  const L = o.lateness;
  const workers = ['a', 'b'].map((name) => {
    const out = join(workDir, `worker-${name}.json`);
    const env = { ...process.env, DQ_BENCH_WORKER: out, DQ_REDIS_URL: redis.url, DQ_CONCURRENCY: String(L.concurrency) };
    return {
      out,
      proc: spawnManaged({ name: `delay-queue worker ${name}`, command: process.execPath, args: ['--import', 'tsx', __filename], cwd: ROOT, env }),
    };
  });
  const alive = () => {
    workers.forEach((w) => w.proc.assertAlive());
    return true;
  };
  await waitFor('the lateness workers to start', 120_000, () => alive() && workers.every((w) => existsSync(`${w.out}.ready`)));
  // Due at random over spreadMs, starting leadMs from now.
  let lastDue = 0;
  await inFlight(0, L.items, 50, async (i) => {
    const r = await engine.dq.schedule(LATE_QUEUE, itemId(i), { delayMs: L.leadMs + Math.floor(Math.random() * L.spreadMs) }, payload(i));
    lastDue = Math.max(lastDue, r.dueAt);
  });
  await waitFor('every lateness item to be handled', L.leadMs + L.spreadMs + 60_000, async () => {
    const [s, [sec, us]] = await Promise.all([engine.dq.stats(LATE_QUEUE), admin.time()]);
    return alive() && Number(sec) * 1000 + Number(us) / 1000 > lastDue + 1000 && s.pending + s.ready + s.inFlight === 0;
  });
  await Promise.all(workers.map((w) => w.proc.stop()));
  const records = workers.map((w) => JSON.parse(readFileSync(w.out, 'utf8')) as [number, number][]);
  return {
    items: L.items,
    handled: records.map((r) => r.length),
    lateness: dist(records.flat().map(([late]) => late)),
    redelivered: records.flat().filter(([, attempt]) => attempt > 1).length,
  };
}

/** A lateness worker: one engine instance processing the queue until SIGTERM, then its records ([lateness ms, attempt]) to a file. */
async function runWorker(out: string): Promise<void> {
  const engine = await startEngine(process.env.DQ_REDIS_URL!);
  const records: [number, number][] = [];
  const handler = async (d: Delivery<unknown>) => void records.push([performance.timeOrigin + performance.now() - d.dueAt, d.attempt]);
  await engine.dq.process(LATE_QUEUE, handler, { concurrency: Number(process.env.DQ_CONCURRENCY) });
  process.once('SIGTERM', () => {
    void engine.app.close().then(() => {
      writeFileSync(out, JSON.stringify(records));
      process.exit(0);
    });
  });
  writeFileSync(`${out}.ready`, '');
}

// ---------------------------------------------------------------------------------------------
// Report (the method in full: docs/benchmarks.md, "delay-queue")

const goal = (goal: string, target: string, measured: string | undefined, met: boolean | undefined): GoalLine => ({
  goal,
  target,
  measured: measured ?? 'not measured',
  met,
});
/** A table from `a|b|c` headers, the first column left-aligned. */
const table = (headers: string, rows: (string | number)[][]) =>
  ((h) => markdownTable(h, rows, ['left', ...h.slice(1).map(() => 'right' as const)]))(headers.split('|'));
const pcts = (d: Dist) => [d.p50, d.p90, d.p99, d.max].map(ms);

type Result = { o: Options; points: CancelPoint[]; runs: ThroughputRun[]; late?: Lateness };

function goals({ o, points, runs, late }: Result): GoalLine[] {
  const at = (d: DesignId, size: number) => points.find((p) => p.design === d && p.target === size && p.size >= size * 0.99);
  const [e1m, e100, l100] = [at('engine', 1_000_000), at('engine', 100_000), at('list-scan', 100_000)];
  const [r50, r99] = e100 && l100 ? [l100.cancel.p50 / e100.cancel.p50, l100.cancel.p99 / e100.cancel.p99] : [NaN, NaN];
  const [te, tb] = [medianRun(runs, 'engine'), medianRun(runs, 'bullmq')];
  const over = e100 ? e100.bytesPerItem - GOALS.bytesPerItem : 0;
  const cpu =
    te && tb ? `CPU per item (client + Redis) ${fmtInt(cpuPerItem(runs, 'engine', o).total)} vs ${fmtInt(cpuPerItem(runs, 'bullmq', o).total)} µs` : '';
  return [
    goal(
      'Cancel p99 at 1M pending',
      `≤ ${GOALS.cancelP99At1MMs} ms`,
      e1m && `${ms(e1m.cancel.p99)} ms (PING p99 in the same window ${ms(e1m.ping.p99)} ms)`,
      e1m && e1m.cancel.p99 <= GOALS.cancelP99At1MMs,
    ),
    goal(
      'Cancel vs list-scan at 100k',
      `≥ ${GOALS.vsListScanAt100k}× faster (p50 and p99)`,
      l100 && `${fmtInt(r50)}× at p50, ${fmtInt(r99)}× at p99`,
      l100 && Math.min(r50, r99) >= GOALS.vsListScanAt100k,
    ),
    goal(
      'Schedule throughput at 50 in flight',
      '≥ BullMQ Queue.add',
      te && tb && `${fmtInt(te.perSecond)} vs ${fmtInt(tb.perSecond)} items/s (${fmtNum(te.perSecond / tb.perSecond, 2)}×); ${cpu}`,
      te && tb && te.perSecond >= tb.perSecond,
    ),
    goal(
      'Firing lateness p99, two instances',
      `≤ ${GOALS.latenessP99Ms} ms`,
      late && `${ms(late.lateness.p99)} ms (p50 ${ms(late.lateness.p50)} ms); exactly once: test/e2e/delay-queue.e2e-spec.ts`,
      late && late.lateness.p99 <= GOALS.latenessP99Ms,
    ),
    goal(
      'Redis memory per pending item (100-byte payload, 100k items)',
      `≤ ${GOALS.bytesPerItem} B`,
      e100 && `${fmtInt(e100.bytesPerItem)} B (${over > 0 ? `${fmtInt(over)} B or ${fmtInt((100 * over) / GOALS.bytesPerItem)}% over` : 'within'})`,
      e100 && over <= 0,
    ),
  ];
}

function report({ o, points, runs, late }: Result): string[] {
  const md: string[] = [];
  if (points.length) {
    md.push(
      '## Cancel latency',
      '',
      'One awaited cancel at a time on a random pending item, then one PING on a plain connection (the floor in the same window).',
      '',
    );
    const rows = points.map((p) => [
      LABEL[p.design] + busyMark(p.cpu),
      sizeLabel(p.size),
      fmtInt(p.cancel.n),
      ...pcts(p.cancel),
      `${ms(p.ping.p50)} / ${ms(p.ping.p99)}`,
      fmtInt(p.fillRate),
    ]);
    md.push(
      table('Design|Pending|Samples|p50 ms|p90 ms|p99 ms|max ms|PING p50 / p99 ms (floor)|Fill items/s', rows),
      '',
      'How many times slower than the engine (p50 / p99):',
      '',
    );
    for (const s of o.sizes) {
      const [e, ...peers] = (['engine', 'list-scan', 'bullmq'] as const).map((d) => points.find((p) => p.design === d && p.target === s));
      const ratio = (p?: CancelPoint) => p && e && `${p.design} ${fmtNum(p.cancel.p50 / e.cancel.p50, 1)}× / ${fmtNum(p.cancel.p99 / e.cancel.p99, 1)}×`;
      if (e) md.push(`- at ${sizeLabel(s)}: ${peers.map(ratio).filter(Boolean).join('; ')}`);
    }
    md.push('', 'Plot: [docs/delay-queue-cancel.svg](../../docs/delay-queue-cancel.svg).', '', '## Redis memory per pending item', '');
    md.push(
      '`MEMORY USAGE <key> SAMPLES 0` over every key of the queue, and the INFO used_memory delta over the fill, per pending item (100-byte payload).',
      '',
    );
    const mem = points.map((p) => [p.design, sizeLabel(p.size), fmtInt(p.keyCount), fmtInt(p.bytesPerItem), p.byPart, fmtInt(p.usedPerItem)]);
    md.push(table('Design|Pending|Keys|MEMORY USAGE B/item|by key, B/item|used_memory delta B/item', mem), '');
  }
  if (runs.length) {
    const t = o.throughput;
    md.push(
      '## Schedule throughput',
      '',
      `${fmtInt(t.items)} items per run, ${t.concurrency} in flight, ${t.rounds} rounds in alternating order; a disturbed run is made again (⚠: still disturbed).`,
    );
    md.push(
      'The what-if: the service leaves auto-pipelining off (src/platform/redis/redis-options.ts) and coalesces the writes of an event-loop turn (coalesce-writes.ts).',
      '',
    );
    const row = (d: Rate, r: ThroughputRun, c = cpuPerItem(runs, d, o), b = medianRun(runs, 'bullmq')) => [
      LABEL[d],
      fmtInt(r.perSecond),
      runs.flatMap((x) => (x.design === d ? [fmtInt(x.perSecond) + busyMark(x.cpu)] : [])).join(' / '),
      `${ms(r.call.p50)} / ${ms(r.call.p99)}`,
      [c.client, c.redis, c.total].map((v) => fmtNum(v, 1)).join(' / '),
      b ? fmtNum(r.perSecond / b.perSecond, 2) : 'n/a',
    ];
    const rows = (['engine', 'bullmq', 'engine-autopipelining'] as const).flatMap((d) => (medianRun(runs, d) ? [row(d, medianRun(runs, d)!)] : []));
    md.push(table('Design|Items/s (median run)|Each run|Call p50 / p99 ms|CPU µs/item: client / redis-server / both|÷ BullMQ items/s', rows), '');
  }
  if (late) {
    const L = o.lateness;
    md.push(
      '## Firing lateness, two instances',
      '',
      `${fmtInt(late.items)} items due at random over ${L.spreadMs / 1000} s from ${L.leadMs / 1000} s after scheduling; `,
    );
    md.push('lateness = handler start (local clock; Redis runs on the same machine) − `dueAt` (Redis clock).', '');
    const row = [fmtInt(late.items), late.handled.map(fmtInt).join(' / '), fmtInt(late.redelivered), ...pcts(late.lateness)];
    md.push(table('Items|Handled per instance|Redeliveries|Lateness p50 ms|p90 ms|p99 ms|max ms', [row]), '');
  }
  return md;
}

/** Cancel latency against pending items, log–log (the shared chart has linear axes, so it plots log10 of µs and of items). */
const cancelSvg = (points: CancelPoint[]) =>
  lineChartSvg({
    title: 'Cancel latency vs pending items (log–log)',
    xLabel: 'pending items, log10',
    yLabel: 'cancel round trip, log10 µs',
    series: (['engine', 'list-scan', 'bullmq'] as const).flatMap((d, k) =>
      (['p50', 'p99'] as const).map((q) => ({
        label: `${d} ${q}`,
        colour: ['#1a9850', '#d73027', '#4575b4'][k],
        points: points.filter((p) => p.design === d).map((p): [number, number] => [Math.log10(p.size), Math.log10(p.cancel[q] * 1000)]),
      })),
    ),
  });

export const { main } = defineBench<Result>({
  name: 'delay-queue',
  sections: ['cancel', 'throughput', 'lateness'],
  prefix: PREFIX,
  async run(ctx) {
    const o = options(ctx);
    const admin = new Redis(ctx.redis.url, { maxRetriesPerRequest: 1 });
    const redisCpu = redisCpuFromInfo(admin);
    const engine = await startEngine(ctx.redis.url);
    const unregister = onCleanup(
      'delay-queue engine',
      () => engine.app.close().finally(() => admin.disconnect()),
      () => admin.disconnect(),
    );
    Object.assign(ctx.env, {
      BullMQ: (require('bullmq/package.json') as { version: string }).version,
      'Engine under test': 'DelayQueueService (src/engines/delay-queue) in a Nest application context of AppModule, no HTTP',
      Mode: ctx.quick ? 'quick (10k and 100k only, fewer samples)' : 'full',
    });
    const runs = ctx.has('throughput') ? await measureThroughput(o, ctx.redis, engine, admin, redisCpu) : [];
    const late = ctx.has('lateness') ? await measureLateness(o, ctx.redis, engine, admin, ctx.workDir) : undefined;
    const points = ctx.has('cancel') ? await measureCancel(o, ctx.redis, engine, admin, redisCpu) : [];
    await engine.app.close();
    admin.disconnect();
    unregister();
    if (points.length)
      writeFileSync(ctx.standard ? join(ROOT, 'docs', 'delay-queue-cancel.svg') : join(ctx.outDir, 'delay-queue-cancel.svg'), cancelSvg(points));
    return { o, points, runs, late };
  },
  goals: (r) => goals(r),
  report: (r) => report(r),
});

if (require.main === module && process.env.DQ_BENCH_WORKER) {
  runWorker(process.env.DQ_BENCH_WORKER).catch((err) => {
    console.error('delay-queue worker failed:', err);
    process.exit(1);
  });
}
