/**
 * seckill: the flash-sale module (src/features/seckill) in the real service (`node dist/main.js` on loopback) against a
 * redis-server of its own (no RDB, no AOF), and against a bare Fastify + ioredis floor
 * (bench/seckill-floor-server.ts) on the same Redis.
 *
 * 1. Correctness over HTTP: 10,000 buyers × 3 tries (seckillLoadPlan: each buyer's tries back to back),
 *    200 in flight, 1,000 units, perUserLimit 1, pay window 1 minute. Checked from the answers and from the
 *    admin GET. Then half the reservations are paid through the payment-plan endpoints and the other half left
 *    to expire; the units that come back must be exactly the expired ones, and a second wave of new buyers
 *    must buy them. available / reserved / sold are sampled every 100 ms (admin GET) and plotted.
 * 2. Baselines, same load (seckillLoadPlan), directly on Redis while the first wave's orders expire: the seed's
 *    LLEN + LPUSH + LREM, a naive DECR-then-check, and the module's reserve script alone (EVALSHA, no HTTP).
 * 3. Throughput (autocannon, 100 connections) of the service against the floor: reserve, listing with cache
 *    hits, sold-out storm (service with and without the sold-out memory), 60% listing / 40% reserve; Redis
 *    commands per request from INFO commandstats.
 * 4. Scale: one hot product with 1 shard vs 3 shards, the service on a 3-master cluster.
 * 5. Memory: 1,000,000 cached listing pages with 16- vs 32-hex keys (lib/cache-key-memory.ts).
 *
 * Options: --quick (shorter loads, 100,000 keys; writes to $TMPDIR/redis-pay-bench/), --only sections, --dist DIR.
 * Only the standard run writes bench/results/seckill.{md,json} and docs/seckill-stock.svg.
 */
import Redis from 'ioredis';
import { mkdirSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { AppConfig } from '../src/platform/config/app-config';
import { KeyBuilder } from '../src/platform/redis/key-builder';
import { activityKeys, shardKeys } from '../src/features/seckill/seckill.keys';
import type { ActivityRecord } from '../src/features/seckill/seckill.types';
import { parseSectionArgs } from './lib/args';
import { connectScriptRedis, type ScriptRedis } from './lib/bare-server';
import { measureCacheKeyMemory, type CacheKeyMemoryResult } from './lib/cache-key-memory';
import { benchWorkDir } from './lib/cleanup';
import { measuredOnMasters, onClusterService } from './lib/cluster-service';
import { type CommandStat, commandStats, statsDelta } from './lib/command-stats';
import { ADMIN_JSON as ADMIN, http, json, type Service, startService as startBenchService, UNDER_LOAD_ENV } from './lib/service-http';
import { ROOT, snapshotBuild, spawnBareServer, userToken } from './lib/full-stack';
import { forEachLimit } from './lib/limit';
import { type LoadRequest } from './lib/load';
import { measuredLoad, type Measured } from './lib/measure';
import { freePort } from './lib/net';
import { waitUntilServing } from './lib/proc';
import { type BenchRedis, startBenchRedis } from './lib/redis-server';
import { environmentInfo, fmtInt, fmtNum, type GoalLine, markdownTable, reportHead, RESULTS_DIR, statusText, writeResult } from './lib/report';
import { benchJson, jsonNum, writeJsonResult } from './lib/results-json';
import {
  type BaselineRunResult,
  DecrCheckDesign,
  DEFAULT_SECKILL_LOAD,
  type DesignCounters,
  type DesignFinalState,
  LlenLpushDesign,
  openConnections,
  type ReserveOutcome,
  runBaselineLoad,
  seckillBuyerId,
  type SeckillDesign,
  seckillLoadPlan,
} from './lib/seckill-baselines';
import { lineChartSvg } from './lib/svg-chart';

const NAME = 'seckill';
const SECTIONS = ['correctness', 'baselines', 'throughput', 'scale', 'memory'] as const;
type Section = (typeof SECTIONS)[number];
const SVG_PATH = join(ROOT, 'docs', 'seckill-stock.svg');
const PREFIX = 'rpsk';
const MERCHANT = 'bench_merchant';
const GOALS = { floorRatio: 0.7, mixRps: 10_000 };
const CONNECTIONS = 100;
const SAMPLE_MS = 100;

/** The service's env in every run: rate limits far above any load here, the shortest safety-net grace. */
const SERVICE_ENV: Record<string, string> = {
  ...UNDER_LOAD_ENV,
  SECKILL_SAFETY_NET_GRACE_SECONDS: '5',
  ORDERS_EVENTS_MAXLEN: '1000000',
};

const sleep = (ms: number) => new Promise((r) => setTimeout(r, Math.max(0, ms)));
const bearer = (account: string) => ({ authorization: `Bearer ${userToken(account)}`, 'content-type': 'application/json' });

interface Live {
  productId: string;
  stock: number;
  available: number;
  reserved: number;
  sold: number;
  returned: number;
}

async function live(port: number, activityId: string): Promise<Map<string, Live>> {
  const a = await http(port, 'GET', `/admin/seckill/activities/${activityId}`, ADMIN);
  if (a.status !== 200) throw new Error(`admin GET ${activityId}: ${a.status} ${a.body}`);
  return new Map(json<{ products: Live[] }>(a).products.map((p) => [p.productId, p]));
}

export async function createActivity(
  port: number,
  activityId: string,
  products: { productId: string; stock: number; shards?: number }[],
  over: { perUserLimit?: number; payWindowMinutes?: number } = {},
): Promise<void> {
  const body = {
    activityId,
    merchantId: MERCHANT,
    title: `bench ${activityId}`,
    startsAt: new Date(Date.now() - 1000).toISOString(),
    endsAt: new Date(Date.now() + 3 * 3600_000).toISOString(),
    payWindowMinutes: over.payWindowMinutes ?? 15,
    perUserLimit: over.perUserLimit ?? 1,
    products: products.map((p) => ({ title: `Product ${p.productId}`, price: 990, currency: 'CNY', ...p })),
  };
  const a = await http(port, 'POST', '/admin/seckill/activities', ADMIN, body);
  if (a.status !== 201) throw new Error(`create activity ${activityId}: ${a.status} ${a.body}`);
}

/**
 * Reservations of one unit of an activity's products, as load requests: `(product) => next request`, each from the
 * next of `tokens` in turn and with its own request id (`idPrefix` and the number `next` gives).
 */
function reserveRequests(activityId: string, tokens: string[], idPrefix: string, next: () => number) {
  return (product: string) => (): LoadRequest => {
    const i = next();
    return {
      method: 'POST',
      path: `/seckill/activities/${activityId}/products/${product}/reservations`,
      headers: { 'content-type': 'application/json', authorization: tokens[i % tokens.length] },
      body: JSON.stringify({ quantity: 1, requestId: `${idPrefix}${i}` }),
    };
  };
}

async function waitFor(what: string, timeoutMs: number, check: () => Promise<boolean>): Promise<number> {
  const t0 = Date.now();
  while (!(await check())) {
    if (Date.now() - t0 > timeoutMs) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await sleep(200);
  }
  return Date.now() - t0;
}

const startService = (dist: string, workDir: string, id: string, redisEnv: Record<string, string>, extra: Record<string, string> = {}) =>
  startBenchService(dist, workDir, id, PREFIX, { ...SERVICE_ENV, ...extra }, redisEnv);

/** Calls per command between two snapshots, minus the INFO calls of the snapshots themselves. */
const callsDelta = (a: Map<string, CommandStat>, b: Map<string, CommandStat>): Record<string, number> =>
  Object.fromEntries(Object.entries(statsDelta(a, b)).map(([k, v]) => [k, v.calls]));

// ---------------------------------------------------------------------------------------------
// 1. Correctness

interface Sample {
  t: number;
  available: number;
  reserved: number;
  sold: number;
  returned: number;
}

interface WaveResult {
  buyers: number;
  tries: number;
  requests: number;
  statuses: Record<string, number>;
  reservedByAnswers: number;
  buyersOverLimit: number;
  after: Live;
  oversold: number;
  undersold: number;
  wallS: number;
  rps: number;
}

interface CorrectnessResult {
  stock: number;
  wave1: WaveResult;
  check: { ok: boolean; problems: unknown[] };
  paid: number;
  payStatuses: Record<string, number>;
  soldAfterPay: number;
  paySettleMs: number;
  expired: number;
  returnedAfterExpiry: Live;
  expiryWaitMs: number;
  unpaidStates: Record<string, number>;
  wave2: WaveResult;
  final: Live;
  invariant: boolean;
  samples: Sample[];
  marks: { x: number; label: string }[];
}

interface Reservation {
  buyer: number;
  reservationId: string;
  orderId: string;
  amount: number;
}

async function wave(
  port: number,
  activityId: string,
  productId: string,
  stock: number,
  buyers: number,
  tries: number,
  firstBuyer: number,
  tag: string,
  before: { available: number; reserved: number; sold: number },
): Promise<{ result: WaveResult; reservations: Reservation[] }> {
  const plan = seckillLoadPlan({ buyers, triesPerBuyer: tries, stock });
  const tokens = Array.from({ length: buyers }, (_, i) => bearer(seckillBuyerId(firstBuyer + i)));
  const statuses: Record<string, number> = {};
  const got = new Map<number, number>();
  const reservations: Reservation[] = [];
  const t0 = performance.now();
  await forEachLimit(plan.length, DEFAULT_SECKILL_LOAD.concurrency, async (i) => {
    const p = plan[i];
    let key: string;
    try {
      const a = await http(port, 'POST', `/seckill/activities/${activityId}/products/${productId}/reservations`, tokens[p.buyer], {
        quantity: p.quantity,
        requestId: `${tag}-${p.attempt}`,
      });
      key = String(a.status);
      if (a.status === 201) {
        const r = json<{ reservationId: string; orderId: string; amount: number }>(a);
        reservations.push({ buyer: firstBuyer + p.buyer, reservationId: r.reservationId, orderId: r.orderId, amount: r.amount });
        got.set(p.buyer, (got.get(p.buyer) ?? 0) + p.quantity);
      } else if (a.status === 409) key = `409 ${json<{ error?: string }>(a).error ?? '?'}`;
    } catch {
      key = 'error';
    }
    statuses[key] = (statuses[key] ?? 0) + 1;
  });
  const wallS = (performance.now() - t0) / 1000;
  const after = (await live(port, activityId)).get(productId)!;
  const reservedByAnswers = [...got.values()].reduce((s, n) => s + n, 0);
  const takenHere = after.reserved + after.sold - (before.reserved + before.sold);
  return {
    reservations,
    result: {
      buyers,
      tries,
      requests: plan.length,
      statuses,
      reservedByAnswers,
      buyersOverLimit: [...got.values()].filter((n) => n > 1).length,
      after,
      oversold: Math.max(0, after.reserved + after.sold - stock) + Math.max(0, reservedByAnswers - before.available),
      undersold: after.available > 0 && (statuses['409 SOLD_OUT'] ?? 0) > 0 ? after.available : Math.max(0, before.available - takenHere),
      wallS,
      rps: plan.length / wallS,
    },
  };
}

async function correctness(svc: Service, quick: boolean, whileExpiring: () => Promise<void>): Promise<CorrectnessResult> {
  const activityId = `c${Date.now().toString(36)}`;
  const productId = 'p1';
  const stock = DEFAULT_SECKILL_LOAD.stock;
  const buyers = quick ? 3000 : DEFAULT_SECKILL_LOAD.buyers;
  await createActivity(svc.port, activityId, [{ productId, stock }], { perUserLimit: 1, payWindowMinutes: 1 });

  const samples: Sample[] = [];
  const marks: { x: number; label: string }[] = [];
  const t0 = Date.now();
  const mark = (label: string) => marks.push({ x: (Date.now() - t0) / 1000, label });
  let sampling = true;
  const sampler = (async () => {
    while (sampling) {
      const next = Date.now() + SAMPLE_MS;
      try {
        const p = (await live(svc.port, activityId)).get(productId)!;
        samples.push({ t: (Date.now() - t0) / 1000, available: p.available, reserved: p.reserved, sold: p.sold, returned: p.returned });
      } catch {
        // a missed sample
      }
      await sleep(next - Date.now());
    }
  })();

  console.log(`[bench] correctness: wave 1, ${buyers} buyers × 3 tries`);
  mark('wave 1');
  const w1 = await wave(svc.port, activityId, productId, stock, buyers, DEFAULT_SECKILL_LOAD.triesPerBuyer, 0, 'w1', {
    available: stock,
    reserved: 0,
    sold: 0,
  });
  const check = json<{ ok: boolean; problems: unknown[] }>(await http(svc.port, 'GET', `/admin/seckill/activities/${activityId}/check`, ADMIN));

  // Half pay (every other reservation in answer order), half are left to expire.
  const sorted = [...w1.reservations].sort((x, y) => x.buyer - y.buyer);
  const toPay = sorted.filter((_, i) => i % 2 === 0);
  const unpaid = sorted.filter((_, i) => i % 2 === 1);
  const payStatuses: Record<string, number> = {};
  const count = (k: string) => (payStatuses[k] = (payStatuses[k] ?? 0) + 1);
  mark('pay half');
  const tPay = Date.now();
  await forEachLimit(toPay.length, 50, async (i) => {
    const r = toPay[i];
    const h = bearer(seckillBuyerId(r.buyer));
    const plan = await http(svc.port, 'POST', `/orders/${r.orderId}/payment-plans`, h, { instructions: [{ method: 'quickpay', amount: r.amount }] });
    count(`plan ${plan.status}`);
    if (plan.status !== 201) {
      if ((payStatuses[`plan ${plan.status}`] ?? 0) === 1) console.log(`[bench] plan ${plan.status}: ${plan.body}`);
      return;
    }
    const paid = await http(svc.port, 'POST', `/payment-plans/${json<{ planId: string }>(plan).planId}/pay`, { authorization: h.authorization });
    count(`pay ${paid.status}`);
  });
  await waitFor('the paid half to be SOLD', 60_000, async () => (await live(svc.port, activityId)).get(productId)!.sold >= toPay.length);
  const paySettleMs = Date.now() - tPay;
  const soldAfterPay = (await live(svc.port, activityId)).get(productId)!.sold;

  console.log('[bench] correctness: waiting for the unpaid half to expire (1-minute pay window); baselines and memory meanwhile');
  const tExp = Date.now();
  await whileExpiring();
  await waitFor('the unpaid half to come back', 180_000, async () => {
    const p = (await live(svc.port, activityId)).get(productId)!;
    return p.returned >= unpaid.length;
  });
  // Let anything still in flight land, then read.
  await sleep(1500);
  mark('expired half returned');
  const expiryWaitMs = Date.now() - tExp;
  const returnedAfterExpiry = (await live(svc.port, activityId)).get(productId)!;
  const unpaidStates: Record<string, number> = {};
  await forEachLimit(unpaid.length, 50, async (i) => {
    const r = unpaid[i];
    const a = await http(svc.port, 'GET', `/seckill/reservations/${r.reservationId}`, bearer(seckillBuyerId(r.buyer)));
    const s = a.status === 200 ? json<{ state: string }>(a).state : `HTTP ${a.status}`;
    unpaidStates[s] = (unpaidStates[s] ?? 0) + 1;
  });

  console.log('[bench] correctness: wave 2 (new buyers)');
  mark('wave 2');
  const w2Buyers = 3 * unpaid.length;
  const w2 = await wave(svc.port, activityId, productId, stock, w2Buyers, 2, 100_000, 'w2', returnedAfterExpiry);
  await sleep(500);
  sampling = false;
  await sampler;
  const final = (await live(svc.port, activityId)).get(productId)!;
  return {
    stock,
    wave1: w1.result,
    check,
    paid: toPay.length,
    payStatuses,
    soldAfterPay,
    paySettleMs,
    expired: unpaid.length,
    returnedAfterExpiry,
    expiryWaitMs,
    unpaidStates,
    wave2: w2.result,
    final,
    invariant: final.available + final.reserved + final.sold === final.stock,
    samples,
    marks,
  };
}

// ---------------------------------------------------------------------------------------------
// 2. Baselines

/** The module's reserve script alone, EVALSHA on a product the service loaded (admin POST per setup), no HTTP. */
class OursScriptDesign implements SeckillDesign {
  readonly id = 'reserve-script';
  readonly label = "this module's reserve-5.lua alone: one EVALSHA (window, limit, stock checked and taken in Redis), no HTTP, no order";
  private c: DesignCounters = { requests: 0, ok: 0, refused: 0, compensations: 0, peakReserved: 0, commands: 0 };
  private n = 0;
  constructor(
    private readonly s: ScriptRedis,
    private readonly port: number,
  ) {}
  /** Shard 0 of product x of each activity, with the hash tags the service loaded it with. */
  private readonly shards = new Map<string, string[]>();
  private keys(activityId: string): string[] {
    return this.shards.get(activityId)!;
  }
  async setup(productKey: string, stock: number): Promise<void> {
    await createActivity(this.port, productKey, [{ productId: 'x', stock }], { perUserLimit: 1 });
    const builder = new KeyBuilder({ redis: { keyPrefix: PREFIX } } as AppConfig);
    const a = JSON.parse((await this.s.redis.get(activityKeys(builder, productKey).config))!) as ActivityRecord;
    const k = shardKeys(
      builder,
      productKey,
      'x',
      0,
      a.products.find((p) => p.productId === 'x')!,
    );
    this.shards.set(productKey, [k.stock, k.rsv, k.holds, k.claims, k.due]);
  }
  async reserve(productKey: string, buyerId: string, quantity: number): Promise<ReserveOutcome> {
    this.c.requests++;
    this.c.commands++;
    const r = await this.s.run<string[]>('seckill/reserve', this.keys(productKey), [
      `sk_${(++this.n).toString(16).padStart(24, '0')}`,
      buyerId,
      quantity,
      1,
      60_000,
      0,
    ]);
    if (r[0] === 'RESERVED') {
      this.c.ok++;
      return 'ok';
    }
    this.c.refused++;
    return 'sold-out';
  }
  async inspect(productKey: string): Promise<DesignFinalState> {
    const p = (await live(this.port, productKey)).get('x')!;
    const holds = await this.s.redis.hgetall(this.keys(productKey)[2]);
    return { sold: p.reserved + p.sold, raw: p.available, unitsByBuyer: new Map(Object.entries(holds).map(([k, v]) => [k, Number(v)])) };
  }
  counters(): DesignCounters {
    return { ...this.c };
  }
  resetCounters(): void {
    this.c = { requests: 0, ok: 0, refused: 0, compensations: 0, peakReserved: 0, commands: 0 };
  }
}

async function baselines(redisUrl: string, port: number): Promise<BaselineRunResult[]> {
  const conn = await openConnections(redisUrl, 1);
  const s = await connectScriptRedis(redisUrl, { maxRetriesPerRequest: 1 });
  try {
    const out: BaselineRunResult[] = [];
    for (const d of [new LlenLpushDesign(conn.clients), new DecrCheckDesign(conn.clients), new OursScriptDesign(s, port)]) {
      const productKey = d.id === 'reserve-script' ? `b${Date.now().toString(36)}` : undefined;
      out.push(await runBaselineLoad(d, { productKey }));
    }
    return out;
  } finally {
    await conn.close();
    s.redis.disconnect();
  }
}

// ---------------------------------------------------------------------------------------------
// 3. Throughput

interface ThroughputRow {
  scenario: string;
  target: string;
  rps: number;
  p50: number;
  p99: number;
  statuses: Record<string, number>;
  errors: number;
  commandsPerRequest: number;
  commands: Record<string, number>;
  serverCpuS?: number;
  redisCpuS?: number;
  otherCpuS?: number;
  /** CPU of this process (autocannon). */
  loadCpuS: number;
  wallS: number;
}

async function measure(
  scenario: string,
  target: string,
  url: string,
  requests: LoadRequest[] | (() => LoadRequest),
  durationS: number,
  serverPid: number,
  redis: BenchRedis,
): Promise<ThroughputRow> {
  const before = await commandStats([redis.url]);
  const m: Measured = await measuredLoad({ url, connections: CONNECTIONS, durationS, requests, title: `${scenario} ${target}` }, serverPid, redis.process.pid);
  const after = await commandStats([redis.url]);
  const commands = callsDelta(before, after);
  const total = Object.values(commands).reduce((s, n) => s + n, 0);
  const row: ThroughputRow = {
    scenario,
    target,
    rps: m.load.total / m.load.durationS,
    p50: m.load.p50,
    p99: m.load.p99,
    statuses: m.load.statusCodes,
    errors: m.load.errors,
    commandsPerRequest: m.load.total ? total / m.load.total : NaN,
    commands,
    serverCpuS: m.serverCpuS,
    redisCpuS: m.redisCpuS,
    otherCpuS: m.otherCpuS,
    loadCpuS: m.loadCpuS,
    wallS: m.wallS,
  };
  console.log(`[bench] ${scenario} / ${target}: ${fmtInt(row.rps)} req/s, p99 ${row.p99} ms, ${fmtNum(row.commandsPerRequest, 2)} Redis commands/request`);
  return row;
}

async function throughput(svc: Service, redis: BenchRedis, dist: string, workDir: string, quick: boolean): Promise<ThroughputRow[]> {
  const durationS = quick ? 3 : 8;
  const activityId = `t${Date.now().toString(36)}`;
  const listed = Array.from({ length: 8 }, (_, i) => `l${i + 1}`);
  await createActivity(
    svc.port,
    activityId,
    [{ productId: 'hot', stock: 10_000_000 }, { productId: 'gone', stock: 1 }, ...listed.map((productId) => ({ productId, stock: 1000 }))],
    { perUserLimit: 1000 },
  );
  // Sell 'gone' out.
  const first = await http(svc.port, 'POST', `/seckill/activities/${activityId}/products/gone/reservations`, bearer('tp-seller'), {
    quantity: 1,
    requestId: 'x',
  });
  if (first.status !== 201) throw new Error(`could not sell out: ${first.status} ${first.body}`);

  const accounts = Array.from({ length: 5000 }, (_, i) => `tp-${i}`);
  const tokens = accounts.map((a) => `Bearer ${userToken(a)}`);
  const listers = accounts.slice(0, CONNECTIONS);
  let n = 0;
  const svcReserve = reserveRequests(activityId, tokens, 'q', () => n++);
  const floorReserve = (product: string) => (): LoadRequest => {
    const i = n++;
    return {
      method: 'POST',
      path: `/reserve/${activityId}/${product}`,
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ account: accounts[i % accounts.length], quantity: 1, requestId: `q${i}` }),
    };
  };
  // The floor doing the same work as the service's reservation: the reserve script recording the order id, the buyer
  // index (bench/seckill-floor-server.ts, /reserve-order); the order is stored at its first use, as the service's.
  const floorReserveOrder = (product: string) => (): LoadRequest => {
    const i = n++;
    return {
      method: 'POST',
      path: `/reserve-order/${activityId}/${product}`,
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ account: accounts[i % accounts.length], quantity: 1, requestId: `q${i}` }),
    };
  };
  const svcList = (i: number): LoadRequest => ({
    method: 'GET',
    path: `/seckill/activities/${activityId}/products?page=1&size=8`,
    headers: { authorization: tokens[i % listers.length] },
  });
  const floorList = (i: number): LoadRequest => ({
    method: 'GET',
    path: `/products/${activityId}?account=${listers[i % listers.length]}&page=1&size=8`,
    headers: {},
  });
  const mix = (list: (i: number) => LoadRequest, reserve: () => LoadRequest) => {
    let k = 0;
    return (): LoadRequest => (k++ % 5 < 3 ? list(k) : reserve());
  };

  const floorPort = await freePort();
  const floor = spawnBareServer({
    id: 'seckill-floor',
    port: floorPort,
    script: join(__dirname, 'seckill-floor-server.ts'),
    env: {
      ...process.env,
      PORT: String(floorPort),
      REDIS_URL: redis.url,
      KEY_PREFIX: PREFIX,
      PRODUCTS: ['hot', 'gone', ...listed].join(','),
      NODE_ENV: 'production',
      LUA_DIR: join(dist, '..', 'lua'),
      ORDERS_EVENTS_MAXLEN: SERVICE_ENV.ORDERS_EVENTS_MAXLEN,
    },
  });
  await waitUntilServing(floor, floorPort, undefined, 60_000);
  let noMemory: Service | undefined;
  const su = `http://127.0.0.1:${svc.port}`;
  const fu = `http://127.0.0.1:${floorPort}`;
  const rows: ThroughputRow[] = [];
  try {
    // Warm both up (JIT, script cache, the listing cache).
    await measure('warm-up', 'service', su, mix(svcList, svcReserve('hot')), quick ? 1 : 2, svc.proc.pid, redis);
    await measure('warm-up', 'floor', fu, mix(floorList, floorReserve('hot')), quick ? 1 : 2, floor.pid, redis);
    rows.push(await measure('reserve', 'service', su, svcReserve('hot'), durationS, svc.proc.pid, redis));
    rows.push(await measure('reserve', 'floor', fu, floorReserve('hot'), durationS, floor.pid, redis));
    await measure('warm-up', SAME_WORK, fu, floorReserveOrder('hot'), 1, floor.pid, redis);
    rows.push(await measure('reserve', SAME_WORK, fu, floorReserveOrder('hot'), durationS, floor.pid, redis));
    rows.push(
      await measure(
        'listing (cache hits)',
        'service',
        su,
        listers.map((_, i) => svcList(i)),
        durationS,
        svc.proc.pid,
        redis,
      ),
    );
    rows.push(
      await measure(
        'listing (cache hits)',
        'floor',
        fu,
        listers.map((_, i) => floorList(i)),
        durationS,
        floor.pid,
        redis,
      ),
    );
    rows.push(await measure('sold-out storm', 'service, sold-out memory on', su, svcReserve('gone'), durationS, svc.proc.pid, redis));
    // The second instance runs only for its own row: it would share the order events' background work otherwise.
    noMemory = await startService(dist, workDir, 'no-memory', { REDIS_URL: redis.url }, { SECKILL_SOLD_OUT_MEMORY_MS: '0' });
    const nu = `http://127.0.0.1:${noMemory.port}`;
    await measure('warm-up', 'service (no sold-out memory)', nu, svcReserve('gone'), quick ? 1 : 2, noMemory.proc.pid, redis);
    rows.push(await measure('sold-out storm', 'service, sold-out memory off', nu, svcReserve('gone'), durationS, noMemory.proc.pid, redis));
    await noMemory.proc.stop();
    noMemory = undefined;
    rows.push(await measure('sold-out storm', 'floor', fu, floorReserve('gone'), durationS, floor.pid, redis));
    rows.push(await measure('60% listing / 40% reserve', 'service', su, mix(svcList, svcReserve('hot')), durationS, svc.proc.pid, redis));
    rows.push(await measure('60% listing / 40% reserve', 'floor', fu, mix(floorList, floorReserve('hot')), durationS, floor.pid, redis));
  } finally {
    await noMemory?.proc.stop();
    await floor.stop();
  }
  return rows;
}

// ---------------------------------------------------------------------------------------------
// 4. Scale

interface ScaleRow {
  shards: number;
  rps: number;
  p99: number;
  statuses: Record<string, number>;
  evalshaPerMaster: number[];
  /** Units the product's shards hold reserved on each master (its shards' stock hashes, found by SCAN). */
  reservedPerMaster: number[];
  serverCpuS?: number;
}

async function reservedOn(url: string, activityId: string, product: string): Promise<number> {
  const r = new Redis(url, { maxRetriesPerRequest: 1 });
  try {
    let total = 0;
    let cursor = '0';
    do {
      const [next, keys] = await r.scan(cursor, 'MATCH', `${PREFIX}:seckill:{p:${activityId}:${product}:*}:stock`, 'COUNT', 1000);
      cursor = next;
      for (const k of keys) total += Number((await r.hget(k, 'reserved')) ?? 0);
    } while (cursor !== '0');
    return total;
  } finally {
    r.disconnect();
  }
}

async function scale(dist: string, workDir: string, quick: boolean): Promise<{ rows: ScaleRow[]; masters: number }> {
  return onClusterService(
    (redisEnv) => startService(dist, workDir, 'cluster', redisEnv),
    async (svc, urls) => {
      const rows: ScaleRow[] = [];
      const activityId = `s${Date.now().toString(36)}`;
      await createActivity(
        svc.port,
        activityId,
        [
          { productId: 'h1', stock: 10_000_000, shards: 1 },
          { productId: 'h3', stock: 10_000_000, shards: 3 },
        ],
        { perUserLimit: 1000 },
      );
      const tokens = Array.from({ length: 5000 }, (_, i) => `Bearer ${userToken(`sc-${i}`)}`);
      let n = 0;
      const req = reserveRequests(activityId, tokens, 's', () => n++);
      const url = `http://127.0.0.1:${svc.port}`;
      await measuredLoad({ url, connections: CONNECTIONS, durationS: quick ? 1 : 2, requests: req('h1') }, svc.proc.pid, 0);
      for (const [product, shards] of [
        ['h1', 1],
        ['h3', 3],
      ] as const) {
        const { m, ...figures } = await measuredOnMasters(urls, () =>
          measuredLoad({ url, connections: CONNECTIONS, durationS: quick ? 3 : 8, requests: req(product) }, svc.proc.pid, 0),
        );
        rows.push({
          shards,
          ...figures,
          reservedPerMaster: await Promise.all(urls.map((u) => reservedOn(u, activityId, product))),
          serverCpuS: m.serverCpuS,
        });
        console.log(`[bench] scale ${shards} shard(s): ${fmtInt(rows[rows.length - 1].rps)} req/s`);
      }
      return rows;
    },
  );
}

// ---------------------------------------------------------------------------------------------
// Report

/** The extra floor row of the reserve scenario: the floor doing the same Redis work as the service's reservation. */
const SAME_WORK = 'floor, same work (reserve + buyer index)';

function goals(c: CorrectnessResult | undefined, b: BaselineRunResult[], t: ThroughputRow[]): GoalLine[] {
  const lines: GoalLine[] = [];
  const row = (scenario: string, target: string) => t.find((r) => r.scenario === scenario && r.target === target);
  if (c) {
    lines.push({
      goal: 'Wave 1 over HTTP: exactly the stock reserved (admin GET and answers), 0 oversold, 0 undersold, no buyer over the limit',
      target: `${c.stock} reserved; 0; 0; 0`,
      measured: `${c.wave1.after.reserved} reserved (admin), ${c.wave1.reservedByAnswers} (201 answers); oversold ${c.wave1.oversold}; undersold ${c.wave1.undersold}; ${c.wave1.buyersOverLimit} buyers over`,
      met:
        c.wave1.after.reserved === c.stock &&
        c.wave1.reservedByAnswers === c.stock &&
        c.wave1.oversold === 0 &&
        c.wave1.undersold === 0 &&
        c.wave1.buyersOverLimit === 0,
    });
    lines.push({
      goal: 'Half paid, half expired: the stock returned is exactly what expired',
      target: `${c.paid} sold, ${c.expired} returned and available`,
      measured: `${c.soldAfterPay} sold, ${c.returnedAfterExpiry.returned} returned, ${c.returnedAfterExpiry.available} available`,
      met: c.soldAfterPay === c.paid && c.returnedAfterExpiry.returned === c.expired && c.returnedAfterExpiry.available === c.expired,
    });
    lines.push({
      goal: 'The returned stock sells again (wave 2): all of it, 0 oversold, 0 undersold; invariant at the end',
      target: `${c.expired} reserved; 0; 0; initial = available + reserved + sold`,
      measured: `${c.wave2.reservedByAnswers} reserved; oversold ${c.wave2.oversold}; undersold ${c.wave2.undersold}; ${c.final.stock} = ${c.final.available} + ${c.final.reserved} + ${c.final.sold}`,
      met: c.wave2.reservedByAnswers === c.expired && c.wave2.oversold === 0 && c.wave2.undersold === 0 && c.wave2.buyersOverLimit === 0 && c.invariant,
    });
  }
  const ours = b.find((r) => r.design === 'reserve-script');
  if (ours)
    lines.push({
      goal: 'The reserve script alone under the same load (no HTTP): 0 oversold, 0 undersold, no buyer over the limit',
      target: '0; 0; 0',
      measured: `${ours.oversoldUnits}; ${ours.undersoldUnits}; ${ours.buyersOverLimit}`,
      met: ours.oversoldUnits === 0 && ours.undersoldUnits === 0 && ours.buyersOverLimit === 0,
    });
  for (const scenario of ['reserve', 'listing (cache hits)']) {
    const s = row(scenario, 'service');
    const f = row(scenario, 'floor');
    if (s && f)
      lines.push({
        goal: `${scenario[0].toUpperCase()}${scenario.slice(1)}: service / floor req/s`,
        target: `≥ ${GOALS.floorRatio}`,
        measured: `${fmtNum(s.rps / f.rps, 2)} (${fmtInt(s.rps)} / ${fmtInt(f.rps)})`,
        met: s.rps / f.rps >= GOALS.floorRatio,
      });
  }
  const rs = row('reserve', 'service');
  const rw = row('reserve', SAME_WORK);
  if (rs && rw)
    lines.push({
      goal: 'Reserve: service / a floor doing the same work (the reserve script, the buyer index)',
      target: 'information',
      measured: `${fmtNum(rs.rps / rw.rps, 2)} (${fmtInt(rs.rps)} / ${fmtInt(rw.rps)})`,
      info: true,
    });
  const mixS = row('60% listing / 40% reserve', 'service');
  if (mixS)
    lines.push({
      goal: '60% listing / 40% reserve through the service, 2 cores',
      target: `≥ ${fmtInt(GOALS.mixRps)} req/s`,
      measured: `${fmtInt(mixS.rps)} req/s`,
      met: mixS.rps >= GOALS.mixRps,
    });
  const on = row('sold-out storm', 'service, sold-out memory on');
  const off = row('sold-out storm', 'service, sold-out memory off');
  const sf = row('sold-out storm', 'floor');
  if (on && off && sf)
    lines.push({
      goal: 'Sold-out storm: memory on / memory off / floor (script on Redis)',
      target: 'information',
      measured: `${fmtInt(on.rps)} / ${fmtInt(off.rps)} / ${fmtInt(sf.rps)} req/s`,
      info: true,
    });
  return lines;
}

/** EVALSHA per request of the floor's sold-out storm row. */
function sfPer(t: ThroughputRow[]): number {
  const r = t.find((x) => x.scenario === 'sold-out storm' && x.target === 'floor');
  return r ? perRequest(r).evalsha : NaN;
}

/** Per request of a row: µs of CPU of the server, Redis and autocannon, and EVALSHA sent. */
function perRequest(r: ThroughputRow) {
  const n = Math.max(1, r.rps * r.wallS);
  const us = (x: number | undefined) => (x === undefined ? NaN : (1e6 * x) / n);
  return { server: us(r.serverCpuS), redis: us(r.redisCpuS), load: us(r.loadCpuS), evalsha: (r.commands.evalsha ?? 0) / n };
}

function missedNotes(gl: GoalLine[], t: ThroughputRow[]): string[] {
  const missed = gl.filter((g) => g.met === false);
  if (missed.length === 0) return [];
  const out = ['## Goals missed', ''];
  for (const g of missed) out.push(`- **${g.goal}**: target ${g.target}, measured ${g.measured}.`);
  const row = (s: string, a: string) => t.find((r) => r.scenario === s && r.target === a);
  const why: string[] = [];
  const pair = (s: string) => {
    const a = row(s, 'service');
    const b = row(s, 'floor');
    return a && b ? { a, b, pa: perRequest(a), pb: perRequest(b) } : undefined;
  };
  const res = pair('reserve');
  const same = row('reserve', SAME_WORK);
  if (res && res.a.rps / res.b.rps < GOALS.floorRatio) {
    const ps = same ? perRequest(same) : undefined;
    why.push(
      `- Reserve is ${fmtNum(100 * (1 - res.a.rps / res.b.rps / GOALS.floorRatio), 0)}% short of ${GOALS.floorRatio} × floor. The floor runs one script; a reservation through the service sends ${fmtNum(res.pa.evalsha, 1)} scripts per request (reserve-5.lua, recording the order id; the order itself is stored at its first use, not here) plus the buyer index (one HSET of two fields and two PEXPIREAT in one round trip) and a new account's rate-limit window (one SET NX: with 5,000 accounts most requests are the first of their account in its window), and ${fmtNum(res.a.commandsPerRequest, 1)} Redis commands in all against ${fmtNum(res.b.commandsPerRequest, 1)} (background work in the window included). ` +
        `Server CPU is ${fmtInt(res.pa.server)} µs per request against ${fmtInt(res.pb.server)} µs, Redis CPU ${fmtInt(res.pa.redis)} µs against ${fmtInt(res.pb.redis)} µs: the service also authenticates, rate-limits, validates, indexes, logs and counts; the floor only reserves.` +
        (same && ps
          ? ` A floor doing the same work (the same scripts and commands on bare Fastify + ioredis) answers ${fmtInt(same.rps)} req/s with ${fmtNum(ps.evalsha, 1)} scripts, ${fmtNum(same.commandsPerRequest, 1)} commands and ${fmtInt(ps.server)} µs of CPU per request: the service is at ${fmtNum(res.a.rps / same.rps, 2)} of it, and 0.7 × the one-script floor (${fmtInt(GOALS.floorRatio * res.b.rps)} req/s) is ${fmtNum((GOALS.floorRatio * res.b.rps) / same.rps, 2)} × even that floor.`
          : ''),
    );
  }
  const lst = pair('listing (cache hits)');
  if (lst && lst.a.rps / lst.b.rps < GOALS.floorRatio)
    why.push(
      `- Listing is ${fmtNum(100 * (1 - lst.a.rps / lst.b.rps / GOALS.floorRatio), 0)}% short. Redis work is the same (${fmtNum(lst.a.commandsPerRequest, 2)} against ${fmtNum(lst.b.commandsPerRequest, 2)} commands per request: one GET of the page); the gap is in the server: ${fmtInt(lst.pa.server)} µs of CPU per request against ${fmtInt(lst.pb.server)} µs. ` +
        `Both answer the cached JSON text as it is; the service also verifies a JWT, runs its guards (rate limit), validates the path and query DTOs, logs, counts metrics and reads the activity from its in-process catalog. ` +
        'bench/results/http-floor.md measures the same stack at about 44 µs per request for its simplest route against a floor doing an EVALSHA; a bare GET of a cached string is a far lower floor. ' +
        `autocannon runs in this process on the same two cores (${fmtInt(lst.pb.load)} µs of its CPU per floor request), so the floor row is partly bound by the load generator.`,
    );
  const mix = row('60% listing / 40% reserve', 'service');
  if (mix && mix.rps < GOALS.mixRps) {
    const p = perRequest(mix);
    const total = p.server + p.redis + p.load;
    why.push(
      `- The mix is ${fmtNum(100 * (1 - mix.rps / GOALS.mixRps), 0)}% short of ${fmtInt(GOALS.mixRps)} req/s. Per request it cost ${fmtInt(p.server)} µs of service CPU, ${fmtInt(p.redis)} µs of Redis CPU and ${fmtInt(p.load)} µs of autocannon CPU: ${fmtInt(total)} µs of the machine's 2,000,000 µs per second, so two cores top out near ${fmtInt(2e6 / total)} req/s at this cost` +
        (mix.otherCpuS !== undefined ? `, and other jobs took ${fmtNum((100 * mix.otherCpuS) / mix.wallS, 0)}% of a core during the run` : '') +
        '. 40% of the requests are reservations, each creating an order (see reserve above).',
    );
  }
  const off = row('sold-out storm', 'service, sold-out memory off');
  if (off) {
    const p = perRequest(off);
    why.push(
      `- Seen on the way: with the sold-out memory off, a refused reservation sends ${fmtNum(p.evalsha, 2)} scripts (reserve-5.lua; nothing is scheduled or cancelled for a refusal) and ${fmtNum(off.commandsPerRequest, 1)} Redis commands in all (background work included), against ${fmtNum(sfPer(t), 2)} scripts for the floor.`,
    );
  }
  if (why.length) out.push('', 'Why:', '', ...why);
  out.push(
    '',
    'Redis commands per request (INFO commandstats over the run: every client, commands run inside scripts and background work included; EVALSHA = scripts sent):',
    '',
  );
  for (const r of t) {
    const top = Object.entries(r.commands)
      .sort((a, b) => b[1] - a[1])
      .slice(0, 6)
      .map(([k, v]) => `${k} ${fmtNum(v / Math.max(1, r.rps * r.wallS), 2)}`)
      .join(', ');
    out.push(`- ${r.scenario}, ${r.target}: ${fmtNum(r.commandsPerRequest, 2)} (${top}); server CPU ${fmtInt(perRequest(r).server)} µs/request`);
  }
  out.push('');
  return out;
}

export async function main(args: string[]): Promise<void> {
  const o = parseSectionArgs(args, SECTIONS);
  const has = (s: Section) => o.sections.has(s);
  const standard = args.length === 0;
  const workDir = benchWorkDir('redis-pay-sk-');
  const dist = snapshotBuild(o.dist, join(workDir, 'build'));
  const redis = await startBenchRedis();
  const svc = await startService(dist, workDir, 'main', { REDIS_URL: redis.url });

  let c: CorrectnessResult | undefined;
  let b: BaselineRunResult[] = [];
  let mem: CacheKeyMemoryResult | undefined;
  const memKeys = o.quick ? 100_000 : 1_000_000;
  const sideWork = async () => {
    if (has('baselines')) {
      console.log('[bench] baselines');
      b = await baselines(redis.url, svc.port);
    }
    if (has('memory')) {
      console.log(`[bench] memory: ${memKeys} cached pages`);
      mem = await measureCacheKeyMemory({ keys: memKeys });
    }
  };
  if (has('correctness')) c = await correctness(svc, o.quick, sideWork);
  else await sideWork();
  const t = has('throughput') ? await throughput(svc, redis, dist, workDir, o.quick) : [];
  await svc.proc.stop();
  const sc = has('scale') ? await scale(dist, workDir, o.quick) : undefined;

  const env = environmentInfo(redis.version, {
    'Service env (beyond the bench defaults)': Object.entries(SERVICE_ENV)
      .map(([k, v]) => `${k}=${v}`)
      .join(' '),
  });
  const gl = goals(c, b, t);
  const outDir = standard ? RESULTS_DIR : join(tmpdir(), 'redis-pay-bench');
  const svgPath = standard ? SVG_PATH : join(outDir, 'seckill-stock.svg');
  const svgRef = standard ? '../../docs/seckill-stock.svg' : svgPath;
  const md: string[] = [...reportHead(NAME, args, env, gl), ...missedNotes(gl, t)];

  if (c) {
    mkdirSync(join(svgPath, '..'), { recursive: true });
    writeFileSync(
      svgPath,
      lineChartSvg({
        title: `Flash sale of ${c.stock} units over HTTP: stock every ${SAMPLE_MS} ms`,
        xLabel: 'seconds since the sale opened',
        yLabel: 'units',
        series: [
          { label: 'available', colour: '#4575b4', points: c.samples.map((s) => [s.t, s.available]) },
          { label: 'reserved', colour: '#fdae61', points: c.samples.map((s) => [s.t, s.reserved]) },
          { label: 'sold', colour: '#1a9850', points: c.samples.map((s) => [s.t, s.sold]) },
          { label: 'returned (total)', colour: '#d73027', points: c.samples.map((s) => [s.t, s.returned]) },
        ],
        marks: c.marks,
      }),
    );
    console.log(`[bench] written ${svgPath}`);
    const w = (label: string, x: WaveResult) => [
      label,
      `${fmtInt(x.buyers)} × ${x.tries}`,
      fmtInt(x.requests),
      statusText(x.statuses),
      `${x.reservedByAnswers}`,
      `${x.after.available} / ${x.after.reserved} / ${x.after.sold}`,
      `${x.oversold} / ${x.undersold} / ${x.buyersOverLimit}`,
      `${fmtInt(x.rps)} req/s over ${fmtNum(x.wallS, 1)} s`,
    ];
    md.push(
      '## 1. Correctness over HTTP',
      '',
      `One product of ${c.stock} units, perUserLimit 1, pay window 1 minute (the shortest), ${DEFAULT_SECKILL_LOAD.concurrency} requests in flight on keep-alive connections, each buyer with its own JWT (signed with the secret the bench gives the service); a buyer's tries are back to back (seckillLoadPlan, order \`grouped\`), each try its own requestId. The rate limit is on, raised far above this load (RATE_LIMIT_USER=10,000,000 per second).`,
      '',
      markdownTable(
        [
          'Wave',
          'Buyers × tries',
          'Requests',
          'Answers',
          'Reserved (201)',
          'After: available / reserved / sold (admin GET)',
          'Oversold / undersold / buyers over the limit',
          'Speed',
        ],
        [w('1: the sale', c.wave1), w('2: new buyers after the expiry', c.wave2)],
      ),
      '',
      `- Pre-sale check endpoint after wave 1: ${c.check.ok ? 'ok' : `problems: ${JSON.stringify(c.check.problems)}`}.`,
      `- Paid: ${c.paid} reservations (every other one) through \`POST /orders/{orderId}/payment-plans\` (quickpay, the order amount) and \`POST /payment-plans/{planId}/pay\` (${statusText(c.payStatuses)}); sold ${c.soldAfterPay} ${fmtNum(c.paySettleMs / 1000, 1)} s after the first pay (order.paid events).`,
      `- Left unpaid: ${c.expired}; their orders expire after the 1-minute window, and the units came back ${fmtNum(c.expiryWaitMs / 1000, 1)} s after the pays (returned ${c.returnedAfterExpiry.returned}, available ${c.returnedAfterExpiry.available}). Unpaid reservations read back: ${statusText(c.unpaidStates)}.`,
      `- End: stock ${c.final.stock} = available ${c.final.available} + reserved ${c.final.reserved} + sold ${c.final.sold}; returned ${c.final.returned}.`,
      '',
      `Stock over time: [${svgRef}](${svgRef}).`,
      '',
      `Oversold: units reserved or sold beyond the stock (admin GET), plus 201 answers beyond the units available before the wave. Undersold: units still available after the wave although some request was answered SOLD_OUT, or units that were available before the wave and neither taken nor left.`,
      '',
    );
  }
  if (b.length) {
    md.push(
      '## 2. Baselines under the same load (directly on Redis, one connection, no HTTP)',
      '',
      `${fmtInt(DEFAULT_SECKILL_LOAD.buyers)} buyers × ${DEFAULT_SECKILL_LOAD.triesPerBuyer} tries, ${DEFAULT_SECKILL_LOAD.concurrency} in flight, ${DEFAULT_SECKILL_LOAD.stock} units of 1 (seckillLoadPlan, the same requests as wave 1), limit 1 unit per buyer. Run while wave 1's orders expire, on the same redis-server.`,
      '',
      markdownTable(
        [
          'Design',
          'Units granted',
          'Held at the end',
          'Oversold',
          'Undersold (lost)',
          'Compensations',
          'Peak over the stock',
          'Refused with stock left',
          'Buyers over the limit',
          'Commands/request',
          'req/s',
        ],
        b.map((r) => [
          `${r.design}: ${r.label}`,
          fmtInt(r.unitsGranted),
          fmtInt(r.final.sold),
          fmtInt(r.oversoldUnits),
          fmtInt(r.undersoldUnits),
          fmtInt(r.compensations),
          fmtInt(r.peakOverStock),
          fmtInt(r.refusedWithStockLeft),
          `${fmtInt(r.buyersOverLimit)} (${fmtInt(r.unitsOverLimit)} units)`,
          fmtNum(r.commandsPerRequest, 2),
          fmtInt(r.rps),
        ]),
      ),
      '',
      'Neither baseline checks a per-buyer limit (what a separate check would cost is not added); lost stock = units never granted although a request was refused. The module also creates an order per reservation; that is in the HTTP figures above and in section 3, not here.',
      '',
    );
  }
  if (t.length) {
    const rows = t.map((r) => [
      r.scenario,
      r.target,
      fmtInt(r.rps),
      `${r.p50} / ${r.p99}`,
      statusText(r.statuses) + (r.errors ? `, errors ${r.errors}` : ''),
      fmtNum(r.commandsPerRequest, 2),
      r.serverCpuS !== undefined ? fmtInt((1e6 * r.serverCpuS) / Math.max(1, r.rps * r.wallS)) : 'n/a',
      r.redisCpuS !== undefined ? fmtInt((1e6 * r.redisCpuS) / Math.max(1, r.rps * r.wallS)) : 'n/a',
      r.otherCpuS !== undefined ? `${fmtNum((100 * r.otherCpuS) / r.wallS, 0)}%` : 'n/a',
    ]);
    const ratio = (s: string, a: string, f = 'floor') => {
      const x = t.find((r) => r.scenario === s && r.target === a);
      const y = t.find((r) => r.scenario === s && r.target === f);
      return x && y ? fmtNum(x.rps / y.rps, 2) : 'n/a';
    };
    md.push(
      '## 3. Throughput against the floor',
      '',
      `autocannon in this process, ${CONNECTIONS} connections, ${o.quick ? 3 : 8} s per row after a short warm-up of each server, one run each, on the same redis-server. The service runs with the rate limit on (raised), logging at warn.`,
      'The floor (bench/seckill-floor-server.ts) is bare Fastify 5 + one ioredis connection, no auth, no validation, no logging, no metrics, no rate limit, no order:',
      '- reserve: the same reservation id derivation and the same reserve-5.lua (same source and SHA) by EVALSHA on the same keys of the same product (shard 0), one call; 201 on RESERVED, 409 otherwise;',
      `- reserve, ${SAME_WORK} (an extra row, for information; the goal is against the row above): the same reserve-5.lua recording the order id, then on RESERVED the same buyer index writes as the service's (one HSET of the location and the order id's entry, PEXPIREAT NX and GT), on the service's keys; the order is stored at its first use, as the service's is, so neither writes it here;`,
      "- listing: GET of the page key (16-hex md5 of the same inputs) and the cached JSON returned; on a miss HGET available of the page's products and SET … PX 2000 (one call on a hit);",
      '- sold-out storm: the reserve script on a sold-out product (409);',
      '- mix: 3 listing requests then 2 reserve requests, over and over, as for the service.',
      'Service requests: reserve `POST /seckill/activities/{id}/products/hot/reservations` (5,000 accounts with their own JWT, a new requestId each, perUserLimit 1,000, 10,000,000 units); listing `GET …/products?page=1&size=8` with one account per connection (so every page but the first of each account per 2 s is a cache hit); storm on a product sold out beforehand.',
      '',
      markdownTable(
        [
          'Scenario',
          'Target',
          'req/s',
          'p50 / p99 (ms)',
          'Answers',
          'Redis commands/request',
          'Server CPU µs/request',
          'Redis CPU µs/request',
          'Other CPU on the machine',
        ],
        rows,
      ),
      '',
      `Ratios to the floor: reserve ${ratio('reserve', 'service')} (to the floor doing the same work: ${ratio('reserve', 'service', SAME_WORK)}), listing ${ratio('listing (cache hits)', 'service')}, storm with memory ${ratio('sold-out storm', 'service, sold-out memory on')}, storm without memory ${ratio('sold-out storm', 'service, sold-out memory off')}, mix ${ratio('60% listing / 40% reserve', 'service')}.`,
      '',
      "Redis commands per request are INFO commandstats deltas over the run divided by the requests answered: every client, and the commands scripts run inside (Redis 7 counts those under their own names, so an EVALSHA of reserve-5.lua also counts its HGETs, TIME, HSET …). The service's background work in the window (order events read by every consumer group, the delay queue) is part of its cost. EVALSHA per request is the number of scripts sent; the rest are inside scripts or single commands.",
      '',
    );
    for (const r of t) {
      const top = Object.entries(r.commands)
        .sort((a, b2) => b2[1] - a[1])
        .slice(0, 8)
        .map(([k, v]) => `${k} ${fmtNum(v / Math.max(1, r.rps * r.wallS), 2)}`)
        .join(', ');
      md.push(`- ${r.scenario}, ${r.target}: ${top}`);
    }
    md.push('');
  }
  if (sc) {
    md.push(
      `## 4. Scale: one hot product, 1 shard vs 3 shards, service on a ${sc.masters}-master cluster`,
      '',
      `Reserve load as in section 3 (${CONNECTIONS} connections, 5,000 accounts, ${o.quick ? 3 : 8} s), the service in cluster mode (REDIS_CLUSTER_NODES), all processes on the same 2 cores.`,
      '',
      markdownTable(
        [
          'Shards',
          'req/s',
          'p99 (ms)',
          'Answers',
          "Units of the product reserved per master (its shards' stock hashes)",
          'EVALSHA per master (every script: orders, delay queue, …)',
          'Server CPU µs/request',
        ],
        sc.rows.map((r) => [
          String(r.shards),
          fmtInt(r.rps),
          String(r.p99),
          statusText(r.statuses),
          r.reservedPerMaster.map(fmtInt).join(' / '),
          r.evalshaPerMaster.map(fmtInt).join(' / '),
          r.serverCpuS !== undefined ? fmtInt((1e6 * r.serverCpuS) / Math.max(1, r.rps * (o.quick ? 3 : 8))) : 'n/a',
        ]),
      ),
      '',
      "With 3 shards the product's units are taken on all three masters (each buyer on its home shard); with 1 shard on one. The other work a reservation does (the rate limit, the buyer index) is on other slots in both cases, so EVALSHA is spread either way. On this 2-core machine the service process (and the cluster's three redis-servers, with AOF on as the test harness starts them) share two cores, so req/s cannot grow with the shards here: what sharding buys is that one hot product's stock work is no longer bound to one master's core. The service in cluster mode is slower than against one standalone Redis (section 3) for the same reason.",
      '',
    );
  }
  if (mem) {
    md.push(
      '## 5. Memory: cached listing pages, 16- vs 32-hex keys',
      '',
      `${fmtInt(mem.keys)} keys \`${mem.prefix}<md5>\`, ${mem.valueBytes}-byte values, no TTL, each variant in a fresh redis-server ${mem.redisVersion} (INFO used_memory delta; lib/cache-key-memory.ts).`,
      '',
      markdownTable(
        ['Key digest', 'Example key', 'Memory', 'Per key', 'MEMORY USAGE per key'],
        mem.variants.map((v) => [
          `${v.hexChars} hex`,
          v.exampleKey,
          `${fmtNum(v.bytes / 1e6, 1)} MB`,
          `${fmtNum(v.perKey, 1)} B`,
          `${fmtNum(v.memoryUsagePerKey, 1)} B`,
        ]),
      ),
      '',
      `32-hex / 16-hex: ${fmtNum(mem.ratio, 3)} (the seed reports about 160 vs 130 MB for a million pages).`,
      '',
    );
  }
  md.push(
    '## Noise',
    '',
    'The machine is shared: other jobs may have run during the run (the "Other CPU" column of section 3). Each throughput row is a single run; read the ratios, not the absolute req/s.',
    '',
  );
  writeResult(NAME, md.join('\n'), outDir);
  const rowOf = (s: string, a: string) => t.find((r) => r.scenario === s && r.target === a);
  const rr = (s: string) => {
    const x = rowOf(s, 'service');
    const y = rowOf(s, 'floor');
    return x && y ? jsonNum(x.rps / y.rps) : null;
  };
  writeJsonResult(
    NAME,
    benchJson(
      {
        bench: NAME,
        args,
        environment: env,
        goals: gl,
        dist: o.dist,
        ratios: {
          reserveOverFloor: rr('reserve'),
          reserveOverSameWorkFloor: (() => {
            const x = rowOf('reserve', 'service');
            const y = rowOf('reserve', SAME_WORK);
            return x && y ? jsonNum(x.rps / y.rps) : null;
          })(),
          listingOverFloor: rr('listing (cache hits)'),
          mixOverFloor: rr('60% listing / 40% reserve'),
        },
      },
      {
        correctness: c ? { ...c, samples: c.samples.length } : undefined,
        baselines: b.map(({ final, ...r }) => ({ ...r, final: { sold: final.sold, raw: final.raw } })),
        throughput: t,
        scale: sc,
        memory: mem,
      },
    ),
    outDir,
  );
  await redis.stop();
}
