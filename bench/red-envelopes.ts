/**
 * red-envelopes: the red-envelope module (src/features/red-envelope) and the wallet in the real service (`node dist/main.js` on
 * loopback, from a snapshot of the build) against a redis-server of its own (no RDB, no AOF).
 *
 * 1. Preload: 1,000,000 envelopes (POST, then GET until READY): the time, and Redis bytes per envelope (INFO
 *    used_memory delta / count).
 * 2. Grab: the full stack (JWT users, each request a new user) against a bare Fastify + ioredis floor
 *    (bench/red-envelopes-floor-server.ts) running the same grab-6.lua by EVALSHA on the same keys; autocannon, server
 *    CPU per request, Redis commands per request from INFO commandstats (the service's run on until its grabs are
 *    credited). The bound beside it: the same floor verifying each request's bearer token (floor+identity), and the
 *    service's CPU per credit while it credits the backlog.
 * 2b. The bound of a grab's crediting: on a bare redis-server of its own, with no service, the grab script alone, then
 *    its crediting batched as cheaply as the design allows (200 entries a read, their 200 wallet credits at once, one
 *    settle and one XACK per read); three runs (read + XACK, + settle, + the credits) split it into its parts.
 * 3. Lua against WATCH/MULTI: 200 concurrent grabbers (one connection each) on one pool directly on Redis: grab-6.lua
 *    against WATCH + HEXISTS + LINDEX, then MULTI RPOP + HSET + LPUSH EXEC retried on abort.
 * 4. The storm: 100,000 users tap twice (both taps at once) against 50,000 envelopes through the service; checked from
 *    the answers, from the reconciliation and from a sample of wallets; the time from the last grab to the last credit.
 *    Then again with two instances on one Redis, the second one (which loaded the rain and credits) killed -9 mid-run.
 * 5. Scale: 1 pool vs 3 sub-pools, the service on a 3-master cluster.
 * 6. The amount distribution of a 1,000,000 split (src/features/red-envelope/split.ts) as an SVG.
 *
 * Options: --quick (smaller counts, shorter loads; writes to $TMPDIR/redis-pay-bench/), --only sections, --dist DIR.
 * Env: BENCH_SERVICE_ENV (JSON of extra service settings, for experiments; the standard run sets none); BENCH_PROFILE_DIR
 * (bench/lib/full-stack.ts).
 * Only the standard run writes bench/results/red-envelopes.{md,json} and docs/red-envelope-amounts.svg.
 */
import Redis from 'ioredis';
import { writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { AppConfig } from '../src/platform/config/app-config';
import { activityKey, poolKeys, type PoolPlacement } from '../src/features/red-envelope/red-envelope.keys';
import { distribution, splitAmounts } from '../src/features/red-envelope/split';
import { KeyBuilder } from '../src/platform/redis/key-builder';
import { walletKeys } from '../src/features/wallet/wallet.keys';
import { parseSectionArgs } from './lib/args';
import { connectScriptRedis } from './lib/bare-server';
import { benchWorkDir } from './lib/cleanup';
import { measuredOnMasters, onClusterService } from './lib/cluster-service';
import { type CommandStat, commandStats, statsDelta } from './lib/command-stats';
import { ADMIN_JSON as ADMIN, type Answer, http, json, type Service, startService as startBenchService, UNDER_LOAD_ENV } from './lib/service-http';
import { bearerTokens, fullEnv, ROOT, snapshotBuild, spawnBareServer } from './lib/full-stack';
import { forEachLimit } from './lib/limit';
import { type LoadRequest } from './lib/load';
import { measuredLoad, type Measured } from './lib/measure';
import { freePort } from './lib/net';
import { cpuSeconds, waitUntilServing } from './lib/proc';
import { usedMemory } from './lib/redis-memory';
import { type BenchRedis, startBenchRedis } from './lib/redis-server';
import { environmentInfo, fmtInt, fmtNum, type GoalLine, markdownTable, reportHead, RESULTS_DIR, statusText, writeResult } from './lib/report';
import { benchJson, jsonNum, writeJsonResult } from './lib/results-json';
import { lineChartSvg } from './lib/svg-chart';

const NAME = 'red-envelopes';
const SECTIONS = ['preload', 'grab', 'credit-bound', 'watch', 'storm', 'scale', 'distribution'] as const;
type Section = (typeof SECTIONS)[number];
const SVG_PATH = join(ROOT, 'docs', 'red-envelope-amounts.svg');
const PREFIX = 'rpre';
const SPONSOR = 'bench_sponsor';
const GOALS = { preloadS: 10, floorRatio: 0.7, lastCreditS: 2 };
const CONNECTIONS = 100;

const SERVICE_ENV: Record<string, string> = {
  ...UNDER_LOAD_ENV,
  RED_ENVELOPE_MAX_COUNT: '1000000',
  RED_ENVELOPE_CREDIT_RETRY_MS: '500',
  ...(JSON.parse(process.env.BENCH_SERVICE_ENV ?? '{}') as Record<string, string>),
};

const sleep = (ms: number) => new Promise((r) => setTimeout(r, Math.max(0, ms)));
const startService = (dist: string, workDir: string, id: string, redisEnv: Record<string, string>) =>
  startBenchService(dist, workDir, id, PREFIX, SERVICE_ENV, redisEnv);
const totalCalls = (d: Record<string, CommandStat>) => Object.values(d).reduce((s, v) => s + v.calls, 0);

// ---------------------------------------------------------------------------------------------
// Activities

let topUps = 0;
async function fund(port: number, amount: number): Promise<void> {
  const a = await http(port, 'POST', `/admin/wallets/merchant:${SPONSOR}/top-ups`, ADMIN, {
    amount,
    currency: 'CNY',
    reference: `bench-${Date.now()}-${++topUps}`,
  });
  if (a.status !== 200 && a.status !== 201) throw new Error(`top-up: ${a.status} ${a.body}`);
}

interface ActivityView {
  state: string;
  seed?: string;
  progress?: { loaded: number; total: number };
}

/** Funds the sponsor, creates a rain (open now, for 3 hours) and waits until it is loaded; the time from POST to READY. */
export async function createRain(
  port: number,
  activityId: string,
  count: number,
  over: { subPools?: number; total?: number } = {},
): Promise<{ ms: number; view: ActivityView }> {
  const totalAmount = over.total ?? count * 100;
  await fund(port, totalAmount);
  const body = {
    activityId,
    sponsorMerchantId: SPONSOR,
    title: `bench ${activityId}`,
    currency: 'CNY',
    totalAmount,
    count,
    startsAt: new Date(Date.now() - 1000).toISOString(),
    endsAt: new Date(Date.now() + 3 * 3600_000).toISOString(),
    ...(over.subPools ? { subPools: over.subPools } : {}),
  };
  const t0 = performance.now();
  const a = await http(port, 'POST', '/admin/red-envelopes/activities', ADMIN, body);
  if (a.status !== 202) throw new Error(`create ${activityId}: ${a.status} ${a.body}`);
  for (;;) {
    const g = await http(port, 'GET', `/admin/red-envelopes/activities/${activityId}`, ADMIN);
    const view = json<ActivityView>(g);
    if (view.state === 'READY' || view.state === 'OPEN') return { ms: performance.now() - t0, view };
    if (performance.now() - t0 > 120_000) throw new Error(`${activityId} not loaded after 120 s: ${g.body}`);
    await sleep(25);
  }
}

interface Reconciliation {
  count: number;
  grabbed: { count: number; amount: number };
  credited: { count: number; amount: number };
  pending: { count: number; amount: number };
  dead: { count: number; amount: number };
  left: { count: number; amount: number };
  balanced: boolean;
}

export async function reconciliation(port: number, activityId: string): Promise<Reconciliation> {
  const a = await http(port, 'GET', `/admin/red-envelopes/activities/${activityId}/reconciliation`, ADMIN);
  if (a.status !== 200) throw new Error(`reconciliation ${activityId}: ${a.status} ${a.body}`);
  return json<Reconciliation>(a);
}

/** Waits until no grab of these rains waits for its credit (so one run's crediting does not fall into the next one's window). */
export async function creditedAll(port: number, ids: string[], timeoutMs = 60_000): Promise<void> {
  const t0 = Date.now();
  while (Date.now() - t0 < timeoutMs) {
    const recs = await Promise.all(ids.map((id) => reconciliation(port, id)));
    if (recs.every((r) => r.pending.count === 0)) return;
    await sleep(100);
  }
  throw new Error(`crediting did not catch up within ${timeoutMs} ms: ${ids.join(', ')}`);
}

// ---------------------------------------------------------------------------------------------
// 1. Preload

interface PreloadResult {
  count: number;
  ms: number;
  bytesPerEnvelope: number;
  seed?: string;
  total: number;
}

async function preload(svc: Service, redis: BenchRedis, count: number): Promise<PreloadResult> {
  const r = new Redis(redis.url);
  try {
    await fund(svc.port, count * 100);
    const before = await usedMemory(r);
    const id = `pre${Date.now().toString(36)}`;
    const { ms, view } = await createRain(svc.port, id, count, { total: count * 100 });
    await sleep(200);
    const after = await usedMemory(r);
    console.log(`[bench] preload ${fmtInt(count)}: ${fmtInt(ms)} ms, ${fmtNum((after - before) / count, 1)} B/envelope`);
    return { count, ms, bytesPerEnvelope: (after - before) / count, seed: view.seed, total: count * 100 };
  } finally {
    r.disconnect();
  }
}

// ---------------------------------------------------------------------------------------------
// 2. Grab against the floor

interface GrabRow {
  who: 'service' | 'floor' | 'floor+identity';
  rps: number;
  p50: number;
  p99: number;
  statuses: Record<string, number>;
  serverUs?: number;
  redisUs?: number;
  commandsPerRequest: number;
  evalshaPerRequest: number;
  evalshaUsecPerCall: number;
  commands: Record<string, number>;
  m: Measured;
}

/** What crediting costs the service per grab: its CPU while it credited a backlog (no grabs meanwhile), per credit. */
interface CreditingCost {
  credited: number;
  pendingAtStop: number;
  serviceUsPerCredit?: number;
}

function grabRow(who: GrabRow['who'], m: Measured, d: Record<string, CommandStat>): GrabRow {
  const n = m.load.total;
  const ev = d.evalsha ?? { calls: 0, usec: 0 };
  return {
    who,
    rps: n / m.load.durationS,
    p50: m.load.p50,
    p99: m.load.p99,
    statuses: m.load.statusCodes,
    serverUs: m.serverCpuS !== undefined ? (m.serverCpuS * 1e6) / n : undefined,
    redisUs: m.redisCpuS !== undefined ? (m.redisCpuS * 1e6) / n : undefined,
    commandsPerRequest: totalCalls(d) / n,
    evalshaPerRequest: ev.calls / n,
    evalshaUsecPerCall: ev.calls ? ev.usec / ev.calls : NaN,
    commands: Object.fromEntries(Object.entries(d).map(([k, v]) => [k, v.calls])),
    m,
  };
}

async function grabVsFloor(
  svc: Service,
  redis: BenchRedis,
  dist: string,
  workDir: string,
  quick: boolean,
): Promise<{ rows: GrabRow[]; svc: Service; rec: Reconciliation; creditedS: number; crediting: CreditingCost }> {
  const durationS = quick ? 3 : 6;
  // Enough for all three runs (with their warm-ups) never to run dry: an empty pool answers NONE_LEFT, a cheaper script path.
  const count = quick ? 250_000 : 500_000;
  const id = `g${Date.now().toString(36)}`;
  await createRain(svc.port, id, count);
  const tokens = bearerTokens(Array.from({ length: quick ? 40_000 : 100_000 }, (_, i) => `gu-${i}`));
  let n = 0;
  const serviceReq = (): LoadRequest => ({
    method: 'POST',
    path: `/red-envelopes/activities/${id}/grab`,
    headers: { authorization: tokens[n++ % tokens.length] },
  });
  let f = 0;
  const floorReq = (): LoadRequest => ({
    method: 'POST',
    path: `/grab/${id}`,
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ account: `fu-${f++}` }),
  });
  const url = `http://127.0.0.1:${svc.port}`;
  const rows: GrabRow[] = [];
  await measuredLoad({ url, connections: CONNECTIONS, durationS: 1, requests: serviceReq }, svc.proc.pid, redis.process.pid);
  let s0 = await commandStats([redis.url]);
  const ms = await measuredLoad({ url, connections: CONNECTIONS, durationS, requests: serviceReq }, svc.proc.pid, redis.process.pid);
  // The row is per grab with its credit included: its Redis and server figures run on until every grab is credited.
  const [redis0, svc0] = [cpuSeconds(redis.process.pid), cpuSeconds(svc.proc.pid)];
  await creditedAll(svc.port, [id], 60_000);
  const [redis1, svc1] = [cpuSeconds(redis.process.pid), cpuSeconds(svc.proc.pid)];
  const tail = (a?: number, b?: number, base?: number) => (a !== undefined && b !== undefined && base !== undefined ? base + b - a : undefined);
  const withCredits = { ...ms, redisCpuS: tail(redis0, redis1, ms.redisCpuS), serverCpuS: tail(svc0, svc1, ms.serverCpuS) };
  rows.push(grabRow('service', withCredits, statsDelta(s0, await commandStats([redis.url]))));
  if (n > tokens.length) console.error(`[bench] grab: ${n} requests for ${tokens.length} users (users repeated)`);
  // The floors alone: the service stopped (it would credit the floors' grabs in the background).
  const beforeStop = await reconciliation(svc.port, id);
  await svc.proc.stop();
  // floor+identity: each request a new user too, with its own bearer token (users the service run did not use), enough
  // for the floor's rate: a repeated user takes the script's cheaper ALREADY_GRABBED path.
  const idTokens = bearerTokens(Array.from({ length: quick ? 100_000 : 250_000 }, (_, i) => `fi-${i}`));
  let fi = 0;
  const floors = [
    { who: 'floor' as const, env: {}, req: floorReq },
    {
      who: 'floor+identity' as const,
      env: { ...fullEnv(0, redis.url, PREFIX), FLOOR_IDENTITY: 'jwt' },
      req: (): LoadRequest => ({ method: 'POST', path: `/grab/${id}`, headers: { authorization: idTokens[fi++ % idTokens.length] } }),
    },
  ];
  for (const fl of floors) {
    const floorPort = await freePort();
    const floor = spawnBareServer({
      id: `red-envelopes-${fl.who}`,
      port: floorPort,
      script: join(__dirname, 'red-envelopes-floor-server.ts'),
      env: { ...process.env, ...fl.env, PORT: String(floorPort), REDIS_URL: redis.url, KEY_PREFIX: PREFIX, LUA_DIR: join(dist, '..', 'lua') },
    });
    try {
      await waitUntilServing(floor, floorPort, undefined, 60_000);
      const fu = `http://127.0.0.1:${floorPort}`;
      await measuredLoad({ url: fu, connections: CONNECTIONS, durationS: 1, requests: fl.req }, floor.pid, redis.process.pid);
      s0 = await commandStats([redis.url]);
      const mf = await measuredLoad({ url: fu, connections: CONNECTIONS, durationS, requests: fl.req }, floor.pid, redis.process.pid);
      rows.push(grabRow(fl.who, mf, statsDelta(s0, await commandStats([redis.url]))));
    } finally {
      await floor.stop();
    }
  }
  if (fi > idTokens.length) console.error(`[bench] grab: ${fi} floor+identity requests for ${idTokens.length} users (users repeated)`);
  for (const r of rows)
    console.log(
      `[bench] grab ${r.who}: ${fmtInt(r.rps)} req/s, p99 ${r.p99} ms, server CPU ${fmtNum(r.serverUs ?? NaN, 0)} µs/req, Redis CPU ${fmtNum(r.redisUs ?? NaN, 0)} µs/req, ${fmtNum(r.commandsPerRequest, 1)} commands/req, ${JSON.stringify(r.statuses)}`,
    );
  const restarted = await startService(dist, workDir, 'main-2', { REDIS_URL: redis.url });
  // Every grab of all runs credited (the restarted service takes the streams up) before the next section. The
  // service's CPU over this catch-up, per envelope it credited, is what crediting costs the service per grab.
  const c0 = performance.now();
  const cpu0 = cpuSeconds(restarted.proc.pid);
  const atStart = await reconciliation(restarted.port, id);
  await creditedAll(restarted.port, [id], 180_000);
  const creditedS = (performance.now() - c0) / 1000;
  const cpu1 = cpuSeconds(restarted.proc.pid);
  const rec = await reconciliation(restarted.port, id);
  const creditedHere = rec.credited.count - atStart.credited.count;
  const crediting = {
    credited: creditedHere,
    pendingAtStop: beforeStop.pending.count,
    serviceUsPerCredit: cpu0 !== undefined && cpu1 !== undefined && creditedHere > 0 ? ((cpu1 - cpu0) * 1e6) / creditedHere : undefined,
  };
  console.log(
    `[bench] grab: the rest credited in ${fmtNum(creditedS, 1)} s (${fmtInt(creditedHere)} envelopes, ${fmtNum(crediting.serviceUsPerCredit ?? NaN, 0)} µs of service CPU each); balanced ${rec.balanced}`,
  );
  return { rows, svc: restarted, rec, creditedS, crediting };
}

// ---------------------------------------------------------------------------------------------
// 2b. The bound of a grab's crediting, on bare Redis

interface CreditBound {
  grabs: number;
  /** Redis CPU µs per grab: the grab script alone (mean of the three runs), and each part of its crediting. */
  grabUs: number;
  readAckUs: number;
  settleUs: number;
  creditUs: number;
  /** (grab + its whole crediting) ÷ the grab alone. */
  ratio: number;
}

const redisCpuS = async (r: Redis) => {
  const info = await r.info('cpu');
  return Number(/used_cpu_user:([\d.]+)/.exec(info)?.[1]) + Number(/used_cpu_sys:([\d.]+)/.exec(info)?.[1]);
};

/**
 * The least Redis work of a grab and of its crediting, exactly once as the service does it (grab-6.lua, then per
 * credit-stream entry the wallet's credit-3.lua with the envelope id as reference, settle-2.lua, XACK), on a
 * redis-server of its own with no service: the reads 200 entries at a time, their credits all in flight at once, one
 * settle and one XACK per read. Three runs on fresh sub-pools: read + XACK only, + settle, + the credits.
 */
async function creditBound(dist: string, quick: boolean): Promise<CreditBound> {
  const bare = await startBenchRedis();
  const s = await connectScriptRedis(bare.url, {}, join(dist, '..', 'lua'));
  const r = s.redis;
  const keys = new KeyBuilder({ redis: { keyPrefix: PREFIX } } as AppConfig);
  const grabs = quick ? 20_000 : 50_000;
  const read = 200;
  try {
    const run = async (variant: number, parts: { settle: boolean; credit: boolean }) => {
      const id = `cb${variant}`;
      const k = poolKeys(keys, { activityId: id, subPools: 1 }, 0);
      for (let i = 0; i < grabs; i += 10_000) await r.rpush(k.staging, ...Array.from({ length: Math.min(10_000, grabs - i) }, (_, j) => `${id}.${i + j}:100`));
      const now = Date.now();
      await s.run('red-envelope/arm', [k.staging, k.pool, k.stats], [grabs, grabs * 100, now - 1000, now + 3600_000, 1, 0, now + 7200_000]);
      await r.xgroup('CREATE', k.credits, 'bound', '0', 'MKSTREAM');
      const c0 = await redisCpuS(r);
      for (let i = 0; i < grabs; i += 50)
        await Promise.all(
          Array.from({ length: 50 }, (_, j) => s.run('red-envelope/grab', [k.pool, k.grabs, k.claims, k.env, k.stats, k.credits], [`${id}-u${i + j}`, 0])),
        );
      const c1 = await redisCpuS(r);
      let credited = 0;
      for (;;) {
        const reply = (await r.xreadgroup('GROUP', 'bound', 'c', 'COUNT', read, 'STREAMS', k.credits, '>')) as [string, [string, string[]][]][] | null;
        const entries = reply?.[0]?.[1] ?? [];
        if (entries.length === 0) break;
        const fields = entries.map(([, f]) => Object.fromEntries(Array.from({ length: f.length / 2 }, (_, i) => [f[2 * i], f[2 * i + 1]])));
        if (parts.credit)
          await Promise.all(
            fields.map((f) => {
              const w = walletKeys(keys, { kind: 'account', id: f.account });
              return s.run('wallet/credit', [w.balances, w.ledger, w.refs], ['CNY', f.amount, f.envelopeId, 'red-envelope', `bench ${id}`]);
            }),
          );
        if (parts.settle) await s.run('red-envelope/settle', [k.env, k.stats], ['credited', ...fields.map((f) => f.envelopeId)]);
        await r.xack(k.credits, 'bound', ...entries.map(([eid]) => eid));
        credited += entries.length;
      }
      const c2 = await redisCpuS(r);
      if (credited !== grabs) throw new Error(`credit bound: ${credited} entries read of ${grabs} grabs`);
      return { grabUs: ((c1 - c0) * 1e6) / grabs, afterUs: ((c2 - c1) * 1e6) / grabs };
    };
    const a = await run(0, { settle: false, credit: false });
    const b = await run(1, { settle: true, credit: false });
    const c = await run(2, { settle: true, credit: true });
    const grabUs = (a.grabUs + b.grabUs + c.grabUs) / 3;
    const out = {
      grabs,
      grabUs,
      readAckUs: a.afterUs,
      settleUs: b.afterUs - a.afterUs,
      creditUs: c.afterUs - b.afterUs,
      ratio: (grabUs + c.afterUs) / grabUs,
    };
    console.log(
      `[bench] credit bound: grab script ${fmtNum(grabUs, 1)} µs, its crediting ${fmtNum(c.afterUs, 1)} µs (read + XACK ${fmtNum(out.readAckUs, 1)}, settle ${fmtNum(out.settleUs, 1)}, wallet credit ${fmtNum(out.creditUs, 1)}): ${fmtNum(out.ratio, 2)} × the grab`,
    );
    return out;
  } finally {
    s.redis.disconnect();
    await bare.stop();
  }
}

// ---------------------------------------------------------------------------------------------
// 3. Lua against WATCH/MULTI

interface WatchRow {
  design: string;
  grabs: number;
  seconds: number;
  grabsPerS: number;
  attempts: number;
  aborted: number;
  redisCommands: number;
  exactlyOnce: boolean;
}

async function luaVsWatch(
  redis: BenchRedis,
  dist: string,
  quick: boolean,
): Promise<{ rows: WatchRow[]; grabUsecPerCall: number; envelopes: number; watchS: number }> {
  const envelopes = quick ? 10_000 : 30_000;
  // WATCH/MULTI is far slower: it runs for this long rather than until the pool is empty.
  const watchS = quick ? 3 : 6;
  const grabbers = 200;
  const rows: WatchRow[] = [];
  const admin = new Redis(redis.url);
  const conns = await Promise.all(
    Array.from({ length: grabbers }, () => connectScriptRedis(redis.url, { maxRetriesPerRequest: 1 }, join(dist, '..', 'lua'), 'plain')),
  );
  let grabUsecPerCall: number;
  try {
    const fill = async (pool: string) => {
      for (let i = 0; i < envelopes; i += 5000)
        await admin.rpush(pool, ...Array.from({ length: Math.min(5000, envelopes - i) }, (_, j) => `w.${i + j}:${100 + ((i + j) % 50)}`));
    };
    // Lua: grab-6.lua on a pool of its own (stats as arm-3.lua leaves them).
    {
      const t = 'bench:watch:{lua}:';
      const k = { pool: `${t}pool`, grabs: `${t}grabs`, claims: `${t}claims`, env: `${t}env`, stats: `${t}stats`, credits: `${t}credits` };
      await fill(k.pool);
      await admin.hset(k.stats, { startsAt: 0, endsAt: 9e15, endedAt: 0, limit: 1, pool: 0, leftCount: envelopes, leftAmount: 0 });
      let next = 0;
      let attempts = 0;
      const got: string[] = [];
      const s0 = await commandStats([redis.url]);
      const t0 = performance.now();
      await Promise.all(
        conns.map(async (c) => {
          const grab = c.command('red-envelope/grab');
          for (;;) {
            const account = `w${next++}`;
            attempts++;
            const [status, envelopeId] = (await grab(k.pool, k.grabs, k.claims, k.env, k.stats, k.credits, account, 0)) as [string, string?];
            if (status === 'GRABBED') got.push(envelopeId!);
            else return;
          }
        }),
      );
      const seconds = (performance.now() - t0) / 1000;
      const d = statsDelta(s0, await commandStats([redis.url]));
      grabUsecPerCall = d.evalsha ? d.evalsha.usec / d.evalsha.calls : NaN;
      rows.push({
        design: 'grab-6.lua (EVALSHA)',
        grabs: got.length,
        seconds,
        grabsPerS: got.length / seconds,
        attempts,
        aborted: 0,
        redisCommands: totalCalls(d),
        exactlyOnce: got.length === envelopes && new Set(got).size === envelopes,
      });
    }
    // WATCH/MULTI: WATCH pool + grabs, HEXISTS, LINDEX (the envelope to record), MULTI RPOP HSET LPUSH EXEC; again on abort.
    {
      const t = 'bench:watch:{multi}:';
      const k = { pool: `${t}pool`, grabs: `${t}grabs`, taken: `${t}taken` };
      await fill(k.pool);
      let next = 0;
      let attempts = 0;
      let aborted = 0;
      let grabs = 0;
      const s0 = await commandStats([redis.url]);
      const t0 = performance.now();
      const until = t0 + watchS * 1000;
      await Promise.all(
        conns.map(async ({ redis: c }) => {
          while (performance.now() < until) {
            const account = `w${next++}`;
            for (;;) {
              attempts++;
              await c.watch(k.pool, k.grabs);
              if ((await c.hexists(k.grabs, account)) === 1) {
                await c.unwatch();
                break;
              }
              const item = await c.lindex(k.pool, -1);
              if (item === null) {
                await c.unwatch();
                return;
              }
              const r = await c.multi().rpop(k.pool).hset(k.grabs, account, item).lpush(k.taken, `${account}|${item}`).exec();
              if (r === null) {
                aborted++;
                continue;
              }
              grabs++;
              break;
            }
          }
        }),
      );
      const seconds = (performance.now() - t0) / 1000;
      const d = statsDelta(s0, await commandStats([redis.url]));
      const taken = await admin.lrange(k.taken, 0, -1);
      const items = taken.map((x) => x.split('|')[1]);
      rows.push({
        design: 'WATCH/MULTI/EXEC, retried on abort',
        grabs,
        seconds,
        grabsPerS: grabs / seconds,
        attempts,
        aborted,
        redisCommands: totalCalls(d),
        exactlyOnce: items.length === grabs && new Set(items).size === grabs && (await admin.llen(k.pool)) === envelopes - grabs,
      });
    }
    await admin.del(...['lua', 'multi'].flatMap((x) => ['pool', 'grabs', 'claims', 'env', 'stats', 'credits', 'taken'].map((p) => `bench:watch:{${x}}:${p}`)));
  } finally {
    for (const c of conns) c.redis.disconnect();
    admin.disconnect();
  }
  for (const r of rows) console.log(`[bench] ${r.design}: ${fmtInt(r.grabsPerS)} grabs/s, ${fmtInt(r.aborted)} aborted of ${fmtInt(r.attempts)} attempts`);
  return { rows, grabUsecPerCall, envelopes, watchS };
}

// ---------------------------------------------------------------------------------------------
// 4. The storm

interface StormResult {
  label: string;
  users: number;
  envelopes: number;
  requests: number;
  seconds: number;
  statuses: Record<string, number>;
  httpErrors: number;
  grabbedAnswers: number;
  distinctEnvelopes: number;
  usersWithTwo: number;
  lastCreditAfterLastGrabMs: number;
  /** Grabs waiting for their credit at the first poll after the last grab. */
  pendingAtLastGrab: number;
  rec: Reconciliation;
  walletsChecked: number;
  walletsWrong: number;
  killedAtGrabs?: number;
  /** Unacknowledged credit-stream entries of each consumer right after the kill (XPENDING). */
  pendingAtKill?: [string, string][];
  killedPid?: number;
  /** Grabs the killed instance had credited by its last metrics sample before the kill (red_envelope_credited_total). */
  creditedByKilled?: number;
  exactlyOnce: boolean;
}

async function storm(
  label: string,
  port: number,
  users: number,
  envelopes: number,
  userPrefix: string,
  opts: { createOn?: number; killAt?: { grabs: number; kill: () => void; pid: number; port: number }; redisUrl?: string } = {},
): Promise<StormResult> {
  const id = `st${Date.now().toString(36)}`;
  await createRain(opts.createOn ?? port, id, envelopes);
  const accountOf = (u: number) => `${userPrefix}-${u}`;
  const tokens = bearerTokens(Array.from({ length: users }, (_, i) => accountOf(i)));
  const statuses: Record<string, number> = {};
  const byUser = new Map<number, Set<string>>();
  const owner = new Map<string, { user: number; amount: number }>();
  let grabbedAnswers = 0;
  let httpErrors = 0;
  let lastGrabAt = 0;
  let killedAtGrabs: number | undefined;
  let pendingAtKillP: Promise<[string, string][]> | undefined;
  let done = false;
  let creditedAt = 0;
  const samples: [number, number][] = [];
  const poller = (async () => {
    while (!creditedAt) {
      await sleep(done ? 20 : 50);
      try {
        const r = await reconciliation(port, id);
        samples.push([performance.now(), r.pending.count]);
        if (r.grabbed.count === envelopes && r.pending.count === 0 && r.credited.count === envelopes) creditedAt = performance.now();
      } catch {
        /* the next poll */
      }
    }
  })();
  // The instance to be killed: its credited counter, sampled until the kill.
  let creditedByKilled: number | undefined;
  const sampler = (async () => {
    if (!opts.killAt) return;
    while (killedAtGrabs === undefined && !done) {
      try {
        const m = await http(opts.killAt.port, 'GET', '/metrics', ADMIN);
        const v = /red_envelope_credited_total(?:\{[^}]*\})? (\d+)/.exec(m.body);
        if (killedAtGrabs === undefined && v) creditedByKilled = Number(v[1]);
      } catch {
        /* the next sample */
      }
      await sleep(100);
    }
  })();
  const t0 = performance.now();
  const path = `/red-envelopes/activities/${id}/grab`;
  await forEachLimit(users, 100, async (u) => {
    const headers = { authorization: tokens[u] };
    await Promise.all(
      [0, 1].map(async () => {
        let a: Answer;
        try {
          a = await http(port, 'POST', path, headers);
        } catch {
          httpErrors++;
          return;
        }
        const b = a.status === 200 ? json<{ status: string; envelopeId?: string; amount?: number }>(a) : { status: `HTTP ${a.status}` };
        statuses[b.status] = (statuses[b.status] ?? 0) + 1;
        if (b.envelopeId) {
          let s = byUser.get(u);
          if (!s) byUser.set(u, (s = new Set()));
          s.add(b.envelopeId);
          const o = owner.get(b.envelopeId);
          if (o && o.user !== u) owner.set(b.envelopeId, { user: -1, amount: 0 });
          else owner.set(b.envelopeId, { user: u, amount: b.amount ?? 0 });
        }
        if (b.status === 'GRABBED') {
          grabbedAnswers++;
          lastGrabAt = performance.now();
          if (opts.killAt && killedAtGrabs === undefined && grabbedAnswers >= opts.killAt.grabs) {
            killedAtGrabs = grabbedAnswers;
            opts.killAt.kill();
            pendingAtKillP = pendingByConsumer(opts.redisUrl!, id);
          }
        }
      }),
    );
  });
  const seconds = (performance.now() - t0) / 1000;
  done = true;
  await sampler;
  const deadline = performance.now() + 60_000;
  while (!creditedAt && performance.now() < deadline) await sleep(50);
  const finished = creditedAt;
  creditedAt ||= -1;
  await poller;
  const rec = await reconciliation(port, id);
  // A sample of the winners' wallets: each holds exactly its envelope (a double credit would show twice the amount).
  const sample = [...owner.values()].filter((o) => o.user >= 0).slice(0, 300);
  let walletsWrong = 0;
  await forEachLimit(sample.length, 20, async (i) => {
    const o = sample[i];
    const a = await http(port, 'GET', `/admin/wallets/account:${accountOf(o.user)}`, ADMIN);
    const body = a.body;
    const m = /"CNY"\D*(\d+)/.exec(body);
    if (a.status !== 200 || !m || Number(m[1]) !== o.amount) walletsWrong++;
  });
  const usersWithTwo = [...byUser.values()].filter((s) => s.size > 1).length;
  const distinctEnvelopes = [...owner.values()].filter((o) => o.user >= 0).length;
  const r: StormResult = {
    label,
    users,
    envelopes,
    requests: 2 * users,
    seconds,
    statuses,
    httpErrors,
    grabbedAnswers,
    distinctEnvelopes,
    usersWithTwo,
    lastCreditAfterLastGrabMs: finished ? finished - lastGrabAt : NaN,
    pendingAtLastGrab: samples.find(([t]) => t >= lastGrabAt)?.[1] ?? NaN,
    rec,
    walletsChecked: sample.length,
    walletsWrong,
    killedAtGrabs,
    pendingAtKill: await pendingAtKillP,
    killedPid: opts.killAt?.pid,
    creditedByKilled,
    exactlyOnce:
      grabbedAnswers === envelopes &&
      distinctEnvelopes === envelopes &&
      owner.size === envelopes &&
      usersWithTwo === 0 &&
      rec.grabbed.count === envelopes &&
      rec.credited.count === envelopes &&
      rec.pending.count === 0 &&
      rec.dead.count === 0 &&
      walletsWrong === 0,
  };
  console.log(
    `[bench] storm (${label}): ${fmtNum(seconds, 1)} s, ${JSON.stringify(statuses)}, last credit ${fmtInt(r.lastCreditAfterLastGrabMs)} ms after the last grab, ` +
      `exactly once ${r.exactlyOnce}, balanced ${rec.balanced}, wallets wrong ${walletsWrong}/${sample.length}`,
  );
  return r;
}

/** XPENDING's summary of sub-pool 0's credit stream: each consumer and its unacknowledged entries. */
async function pendingByConsumer(url: string, activityId: string): Promise<[string, string][]> {
  const r = new Redis(url);
  try {
    const keys = new KeyBuilder({ redis: { keyPrefix: PREFIX } } as AppConfig);
    const k = poolKeys(keys, await placementOf([r], keys, activityId), 0);
    const [, , , consumers] = (await r.xpending(k.credits, 'red-envelope-credit')) as [number, string, string, [string, string][] | null];
    return consumers ?? [];
  } finally {
    r.disconnect();
  }
}

// ---------------------------------------------------------------------------------------------
// 5. Scale

interface ScaleRow {
  subPools: number;
  rps: number;
  p99: number;
  statuses: Record<string, number>;
  evalshaPerMaster: number[];
  /** The master (index into the cluster's masters) holding each sub-pool. */
  subPoolMaster: number[];
  serverUs?: number;
}

async function scale(dist: string, workDir: string, quick: boolean): Promise<{ rows: ScaleRow[]; masters: number }> {
  return onClusterService(
    (redisEnv) => startService(dist, workDir, 'cluster', redisEnv),
    async (svc, urls) => {
      const rows: ScaleRow[] = [];
      const count = quick ? 60_000 : 120_000;
      const ids = [1, 3].map((p) => `sc${p}${Date.now().toString(36)}`);
      await createRain(svc.port, ids[0], count, { subPools: 1 });
      await createRain(svc.port, ids[1], count, { subPools: 3 });
      const tokens = bearerTokens(Array.from({ length: quick ? 30_000 : 60_000 }, (_, i) => `sc-${i}`));
      const url = `http://127.0.0.1:${svc.port}`;
      for (const [k, subPools] of [
        [0, 1],
        [1, 3],
      ] as const) {
        let n = 0;
        const req = (): LoadRequest => ({
          method: 'POST',
          path: `/red-envelopes/activities/${ids[k]}/grab`,
          headers: { authorization: tokens[n++ % tokens.length] },
        });
        await measuredLoad({ url, connections: CONNECTIONS, durationS: 1, requests: req }, svc.proc.pid, 0);
        await creditedAll(svc.port, ids);
        const { m, ...figures } = await measuredOnMasters(urls, () =>
          measuredLoad({ url, connections: CONNECTIONS, durationS: quick ? 3 : 5, requests: req }, svc.proc.pid, 0),
        );
        rows.push({
          subPools,
          ...figures,
          subPoolMaster: await masterOf(urls, ids[k], subPools),
          serverUs: m.serverCpuS !== undefined ? (m.serverCpuS * 1e6) / m.load.total : undefined,
        });
        console.log(`[bench] scale ${subPools} sub-pool(s): ${fmtInt(rows[rows.length - 1].rps)} req/s`);
      }
      return rows;
    },
  );
}

/** Where a rain's sub-pools are: its record, read from whichever of the nodes holds it. */
async function placementOf(conns: Redis[], keys: KeyBuilder, activityId: string): Promise<PoolPlacement> {
  for (const c of conns) {
    const raw = await c.get(activityKey(keys, activityId)).catch(() => null);
    if (raw) return JSON.parse(raw) as PoolPlacement;
  }
  throw new Error(`no record of rain ${activityId}`);
}

/** For each sub-pool of a rain, the index of the master whose keys include its stats hash. */
async function masterOf(urls: string[], activityId: string, subPools: number): Promise<number[]> {
  const keys = new KeyBuilder({ redis: { keyPrefix: PREFIX } } as AppConfig);
  const conns = urls.map((u) => new Redis(u));
  try {
    const out: number[] = [];
    const a = { ...(await placementOf(conns, keys, activityId)), subPools };
    for (let k = 0; k < subPools; k++) {
      const has = await Promise.all(conns.map((c) => c.exists(poolKeys(keys, a, k).stats).catch(() => 0)));
      out.push(has.indexOf(1));
    }
    return out;
  } finally {
    conns.forEach((c) => c.disconnect());
  }
}

// ---------------------------------------------------------------------------------------------
// 6. Distribution

function distributionSvg(seed: string, count: number, total: number): { svg: string; d: ReturnType<typeof distribution> } {
  const amounts = splitAmounts({ total, count, minAmount: 1, seed, maxCount: count });
  const d = distribution(amounts, 60);
  const points: [number, number][] = d.histogram.map((b) => [(b.from + b.to) / 2 / 100, b.count]);
  const svg = lineChartSvg({
    title: `Amounts of a ${fmtInt(count)}-envelope split (total ${fmtInt(total / 100)} CNY, double-mean)`,
    xLabel: 'Amount (CNY), bucket midpoint',
    yLabel: 'Envelopes per bucket',
    series: [{ label: `${d.histogram.length} buckets`, colour: '#c0392b', points }],
    marks: [
      { x: d.mean / 100, label: `mean ${fmtNum(d.mean / 100, 2)}` },
      { x: d.p99 / 100, label: `p99 ${fmtNum(d.p99 / 100, 2)}` },
    ],
  });
  return { svg, d };
}

// ---------------------------------------------------------------------------------------------
// Main

export async function main(args: string[]): Promise<void> {
  const { quick, sections, dist: builtDist } = parseSectionArgs<Section>(args, SECTIONS);
  const workDir = benchWorkDir('redis-pay-re-');
  const dist = snapshotBuild(builtDist, join(workDir, 'build'));
  const redis = await startBenchRedis();
  const run = async <T>(s: Section, f: () => Promise<T>): Promise<T | undefined> => (sections.has(s) ? f() : undefined);

  let svc = await startService(dist, workDir, 'main', { REDIS_URL: redis.url });
  const pre = await run('preload', () => preload(svc, redis, quick ? 200_000 : 1_000_000));
  const grab = await run('grab', () => grabVsFloor(svc, redis, dist, workDir, quick));
  if (grab) svc = grab.svc;
  const creditB = await run('credit-bound', () => creditBound(dist, quick));
  const watch = await run('watch', () => luaVsWatch(redis, dist, quick));
  const storms = await run('storm', async () => {
    const users = quick ? 20_000 : 100_000;
    const envelopes = users / 2;
    const one = await storm('one instance', svc.port, users, envelopes, 's1');
    const second = await startService(dist, workDir, 'crediting-2', { REDIS_URL: redis.url });
    const two = await storm('two instances, the second killed -9 mid-run', svc.port, users, envelopes, 's2', {
      createOn: second.port,
      killAt: { grabs: envelopes / 2, kill: () => second.proc.child.kill('SIGKILL'), pid: second.proc.pid, port: second.port },
      redisUrl: redis.url,
    });
    return [one, two];
  });
  await svc.proc.stop();
  const sc = await run('scale', () => scale(dist, workDir, quick));
  const distRes = await run('distribution', async () => distributionSvg(pre?.seed ?? 'bench-distribution', 1_000_000, 100_000_000));

  // ---- goals
  const svcRow = grab?.rows.find((r) => r.who === 'service');
  const floorRow = grab?.rows.find((r) => r.who === 'floor');
  const idRow = grab?.rows.find((r) => r.who === 'floor+identity');
  const ratio = svcRow && floorRow ? svcRow.rps / floorRow.rps : undefined;
  const creditUs = grab?.crediting.serviceUsPerCredit;
  // The bound: what the floor keeps with the identity every app endpoint needs, and the service's CPU per grab without its crediting.
  const cpuBound =
    svcRow?.serverUs && floorRow?.serverUs && idRow?.serverUs && creditUs !== undefined
      ? {
          identityRps: idRow.rps / floorRow.rps,
          grabOnlyUs: svcRow.serverUs - creditUs,
          vsIdentityCpu: idRow.serverUs / (svcRow.serverUs - creditUs),
        }
      : undefined;
  const worstLag = storms ? Math.max(...storms.map((s) => s.lastCreditAfterLastGrabMs)) : undefined;
  const goals: GoalLine[] = [
    {
      goal: `Preload ${fmtInt(pre?.count ?? 1_000_000)} envelopes (POST to READY)`,
      target: `≤ ${GOALS.preloadS} s`,
      measured: pre ? `${fmtNum(pre.ms / 1000, 2)} s (${fmtNum(pre.bytesPerEnvelope, 1)} B of Redis per envelope)` : 'n/a',
      met: pre ? pre.ms / 1000 <= GOALS.preloadS : undefined,
    },
    {
      goal: 'Grab: service / floor req/s',
      target: `≥ ${GOALS.floorRatio}`,
      measured: ratio !== undefined ? `${fmtNum(ratio, 2)} (${fmtInt(svcRow!.rps)} / ${fmtInt(floorRow!.rps)})` : 'n/a',
      met: ratio !== undefined ? ratio >= GOALS.floorRatio : undefined,
    },
    {
      goal: 'Balanced after every run (reconciliation); in the storms every envelope grabbed once, nobody twice, every credit landed',
      target: 'every run',
      measured:
        [
          ...(grab
            ? [`grab runs: balanced ${grab.rec.balanced} (${fmtInt(grab.rec.credited.count)} credited, ${fmtInt(grab.rec.pending.count)} pending)`]
            : []),
          ...(storms ?? []).map((s) => `storm, ${s.label}: balanced ${s.rec.balanced}, exactly once ${s.exactlyOnce}`),
        ].join('; ') || 'n/a',
      met: grab || storms ? (grab?.rec.balanced ?? true) && (storms ?? []).every((s) => s.rec.balanced && s.exactlyOnce) : undefined,
    },
    {
      goal: 'Crediting keeps up: last credit after the last grab',
      target: `≤ ${GOALS.lastCreditS} s`,
      measured: storms ? storms.map((s) => `${s.label}: ${fmtNum(s.lastCreditAfterLastGrabMs / 1000, 2)} s`).join('; ') : 'n/a',
      met: worstLag !== undefined ? worstLag <= GOALS.lastCreditS * 1000 : undefined,
    },
  ];

  // ---- report
  const env = environmentInfo(redis.version, { service: 'node dist/main.js, NODE_ENV=production, LOG_LEVEL=warn, RED_ENVELOPE_CREDIT_RETRY_MS=500' });
  const md: string[] = reportHead(NAME, args, env, goals);
  const missed: string[] = [];
  if (ratio !== undefined && ratio < GOALS.floorRatio)
    missed.push(
      `- Grab is ${fmtNum(100 * (1 - ratio / GOALS.floorRatio), 0)}% short of ${GOALS.floorRatio} × floor (${fmtNum(ratio, 2)}). Server CPU is ${fmtInt(svcRow!.serverUs ?? NaN)} µs per request against ${fmtInt(floorRow!.serverUs ?? NaN)} µs for the floor; ` +
        `Redis commands per request ${fmtNum(svcRow!.commandsPerRequest, 2)} against ${fmtNum(floorRow!.commandsPerRequest, 2)} (the service's include the crediting of each grab in the same window: ${describeCommands(svcRow!)}). ` +
        `The floor does one EVALSHA and no auth, validation, rate limit, logging, metrics or crediting; on two shared cores the service's crediting (a wallet credit and a settle per grab) competes with its own grabs for the CPU.`,
    );
  if (ratio !== undefined && ratio < GOALS.floorRatio && cpuBound)
    missed.push(
      `- The bound, measured in the same run: verifying each request's bearer token (which every app endpoint must do, and the floor does not) alone leaves the floor ${fmtNum(cpuBound.identityRps, 2)} of itself (floor+identity ${fmtInt(idRow!.rps)} req/s, ${fmtInt(idRow!.serverUs ?? NaN)} µs of CPU per request). ` +
        `Crediting costs the service ${fmtInt(creditUs ?? NaN)} µs of CPU per grab (measured on the backlog the restarted service credited, no grabs meanwhile), and crediting must keep up with grabbing (the last credit within ${GOALS.lastCreditS} s), so on two cores it is paid in the grab window. ` +
        `Without it the service's grab would take about ${fmtInt(cpuBound.grabOnlyUs)} µs: ${fmtNum(cpuBound.vsIdentityCpu, 2)} of the identity floor by CPU. ` +
        `The rest: NestJS and the service's always-on layers (about 11 µs a request: see http-floor), and the per-account rate limit, which leases from Redis once per new account and window, so with every grab a new user it adds a script call to each grab (6.3 of its Redis commands, counted with RATE_LIMIT_ENABLED=false).`,
    );
  if (worstLag !== undefined && worstLag > GOALS.lastCreditS * 1000)
    missed.push(`- The last credit came ${fmtNum(worstLag / 1000, 2)} s after the last grab, ${fmtNum(worstLag / 1000 - GOALS.lastCreditS, 2)} s over.`);
  if (pre && pre.ms / 1000 > GOALS.preloadS)
    missed.push(`- The preload took ${fmtNum(pre.ms / 1000, 2)} s, ${fmtNum(pre.ms / 1000 - GOALS.preloadS, 2)} s over.`);
  if (missed.length) md.push('### What explains a miss', '', ...missed, '');

  if (pre)
    md.push(
      '## 1. Preload',
      '',
      `One rain of ${fmtInt(pre.count)} envelopes (total ${fmtInt(pre.total / 100)} CNY) created by POST /admin/red-envelopes/activities (the sponsor's wallet debited, the split computed, each sub-pool staged in batches and armed by RENAME), polled every 25 ms by GET until READY: ` +
        `**${fmtNum(pre.ms / 1000, 2)} s**. Redis memory (INFO used_memory before the POST and after READY) grew by ${fmtNum(pre.bytesPerEnvelope, 1)} bytes per envelope (the list item \`<activity>.<index>:<amount>\` and its share of the list's nodes).`,
      '',
    );
  if (grab && svcRow && floorRow)
    md.push(
      '## 2. Grab against the floor',
      '',
      `autocannon, ${CONNECTIONS} connections, a new user (a new JWT) on every request, one sub-pool with enough envelopes not to run dry. ` +
        "The floor (bench/red-envelopes-floor-server.ts) is bare Fastify 5 + one ioredis connection running the same grab-6.lua (loaded by the service's script loader, same SHA) by EVALSHA on the same keys; no auth, validation, rate limit, logging, metrics or crediting. The service was stopped during the floor run (it would credit the floor's grabs). " +
        "The service's row is per grab with its credit included: its server CPU, Redis CPU and commands run on after the load until every grab of the run is credited; the floors' rows are the grab script alone.",
      '',
      markdownTable(
        [
          'Server',
          'req/s',
          'p50 ms',
          'p99 ms',
          'Answers',
          'Server CPU µs/req',
          'Redis CPU µs/req',
          'Redis commands/req',
          'EVALSHA/req',
          'EVALSHA µs/call (commandstats)',
        ],
        grab.rows.map((r) => [
          r.who,
          fmtInt(r.rps),
          r.p50,
          r.p99,
          statusText(r.statuses),
          fmtInt(r.serverUs ?? NaN),
          fmtInt(r.redisUs ?? NaN),
          fmtNum(r.commandsPerRequest, 2),
          fmtNum(r.evalshaPerRequest, 2),
          fmtNum(r.evalshaUsecPerCall, 1),
        ]),
      ),
      '',
      `floor+identity is the same floor verifying each request's bearer token with the service's own JwtVerifier and settings (each request a new user with a new token, as for the service), the account taken from the token.`,
      '',
      `Service / floor: **${fmtNum(ratio, 2)}**; floor+identity / floor: ${idRow ? fmtNum(idRow.rps / floorRow.rps, 2) : 'n/a'}. After the runs the restarted service credited every grab (the floors' too) in ${fmtNum(grab.creditedS, 1)} s: ${fmtInt(grab.crediting.credited)} envelopes (${fmtInt(grab.crediting.pendingAtStop)} of them left pending by the service at its stop), ${fmtInt(creditUs ?? NaN)} µs of service CPU per credit; reconciliation balanced: ${grab.rec.balanced ? 'yes' : 'NO'}. The service's Redis commands in the window: ${describeCommands(svcRow)}.`,
      '',
    );
  if (creditB)
    md.push(
      "## 2b. A grab's crediting on bare Redis: the bound",
      '',
      `The Redis work of a grab and of its crediting with no service at all, on a redis-server of its own: ${fmtInt(creditB.grabs)} grabs by grab-6.lua (50 in flight), then their credit-stream entries read 200 at a time, the 200 wallet credits (credit-3.lua, the envelope id as reference) sent at once, one settle-2.lua and one XACK per read: as cheap as crediting each grab exactly once can be batched. ` +
        'Redis CPU (INFO used_cpu_sys + used_cpu_user) per grab; three runs on fresh sub-pools split the crediting into its parts.',
      '',
      markdownTable(
        ['Redis work', 'µs per grab'],
        [
          ['grab-6.lua (the grab script alone)', fmtNum(creditB.grabUs, 1)],
          ['credit stream: XREADGROUP (200 a read) + XACK', fmtNum(creditB.readAckUs, 1)],
          ['settle-2.lua (200 envelopes a call)', fmtNum(creditB.settleUs, 1)],
          ["wallet credit-3.lua (one per grab: the user's wallet is on its own slot)", fmtNum(creditB.creditUs, 1)],
          ['**(grab + its crediting) ÷ the grab alone**', `**${fmtNum(creditB.ratio, 2)}**`],
        ],
        ['left', 'right'],
      ),
      '',
    );
  if (watch)
    md.push(
      '## 3. Lua against WATCH/MULTI',
      '',
      `200 grabbers, one connection each, on one pool of ${fmtInt(watch.envelopes)} envelopes directly on Redis (no HTTP); each grab a new user. The Lua grabbers run until the pool is empty; WATCH/MULTI (WATCH pool + grabs, HEXISTS, LINDEX, then MULTI RPOP + HSET + LPUSH EXEC, the whole thing again when EXEC aborts) for ${watch.watchS} s. "Each envelope once": no envelope taken twice, and the pool holds exactly the ones not taken.`,
      '',
      markdownTable(
        ['Design', 'Grabs', 'Seconds', 'Grabs/s', 'Attempts', 'Aborted EXECs', 'Redis commands per grab', 'Each envelope once'],
        watch.rows.map((r) => [
          r.design,
          fmtInt(r.grabs),
          fmtNum(r.seconds, 2),
          fmtInt(r.grabsPerS),
          fmtInt(r.attempts),
          fmtInt(r.aborted),
          fmtNum(r.redisCommands / r.grabs, 1),
          r.exactlyOnce ? 'yes' : 'NO',
        ]),
      ),
      '',
      `grab-6.lua costs ${fmtNum(watch.grabUsecPerCall, 1)} µs of Redis time per call (INFO commandstats).`,
      '',
    );
  if (storms)
    md.push(
      '## 4. The storm',
      '',
      `${fmtInt(storms[0].users)} users tap twice (both taps at once) against ${fmtInt(storms[0].envelopes)} envelopes, 100 users (200 requests) in flight, through the service. ` +
        'The reconciliation is polled during the run; "last credit" is the first poll that saw every envelope credited, minus the time the last GRABBED answer arrived. ' +
        'The second run has two instances on one Redis: the second created (and so loaded and credits) the rain, the grabs go to the first; the second is killed with SIGKILL once half the envelopes are grabbed, and the first takes its pending credits over after RED_ENVELOPE_CREDIT_RETRY_MS (500 ms).',
      '',
      markdownTable(
        [
          'Run',
          'Seconds',
          'Answers',
          'HTTP errors',
          'GRABBED',
          'Distinct envelopes',
          'Users with two',
          'Grabbed / credited / pending / dead (reconciliation)',
          'Balanced',
          'Wallets checked (wrong)',
          'Pending at the last grab',
          'Last credit after last grab',
        ],
        storms.map((s) => [
          s.label + (s.killedAtGrabs ? ` (killed at ${fmtInt(s.killedAtGrabs)} grabs)` : ''),
          fmtNum(s.seconds, 1),
          statusText(s.statuses),
          s.httpErrors,
          fmtInt(s.grabbedAnswers),
          fmtInt(s.distinctEnvelopes),
          s.usersWithTwo,
          `${fmtInt(s.rec.grabbed.count)} / ${fmtInt(s.rec.credited.count)} / ${fmtInt(s.rec.pending.count)} / ${fmtInt(s.rec.dead.count)}`,
          s.rec.balanced ? 'yes' : 'NO',
          `${s.walletsChecked} (${s.walletsWrong})`,
          fmtInt(s.pendingAtLastGrab),
          `${fmtNum(s.lastCreditAfterLastGrabMs / 1000, 2)} s`,
        ]),
      ),
      '',
      ...storms
        .filter((s) => s.pendingAtKill)
        .map(
          (s) =>
            `Right after the kill, the credit stream's unacknowledged entries by consumer (XPENDING): ${s.pendingAtKill!.map(([c, n]) => `${c.endsWith(`-${s.killedPid}`) ? 'the killed instance' : 'the survivor'} ${n}`).join(', ') || 'none'}. The killed instance had credited ${s.creditedByKilled === undefined ? 'an unknown number of' : fmtInt(s.creditedByKilled)} grabs by its last metrics sample (every 100 ms) before the kill.`,
        ),
      '',
    );
  if (sc)
    md.push(
      '## 5. Scale: 1 pool vs 3 sub-pools on a 3-master cluster',
      '',
      `The service on a ${sc.masters}-master cluster (test/harness/redis-cluster.ts), one rain with 1 sub-pool and one with 3, a new user per request, ${CONNECTIONS} connections. On this 2-core machine one service instance is the bottleneck, so the figure that matters is the spread of the script calls over the masters.`,
      '',
      markdownTable(
        ['Sub-pools', 'req/s', 'p99 ms', 'Answers', 'Server CPU µs/req', 'EVALSHA per master (masters 1 / 2 / 3)', 'Sub-pool on master'],
        sc.rows.map((r) => [
          r.subPools,
          fmtInt(r.rps),
          r.p99,
          statusText(r.statuses),
          fmtInt(r.serverUs ?? NaN),
          r.evalshaPerMaster.map(fmtInt).join(' / '),
          r.subPoolMaster.map((m, k) => `${k}→${m + 1}`).join(', '),
        ]),
      ),
      '',
    );
  if (distRes)
    md.push(
      '## 6. The amount distribution',
      '',
      `A 1,000,000-envelope split of 1,000,000.00 CNY (minimum 0.01) with ${pre?.seed ? "the preloaded rain's seed" : 'a fixed seed'}: min ${fmtNum(distRes.d.min / 100)}, mean ${fmtNum(distRes.d.mean / 100)}, p50 ${fmtNum(distRes.d.p50 / 100)}, p90 ${fmtNum(distRes.d.p90 / 100)}, p99 ${fmtNum(distRes.d.p99 / 100)}, max ${fmtNum(distRes.d.max / 100)} CNY. Plot: docs/red-envelope-amounts.svg.`,
      '',
    );

  // Only the standard run (no options, no experiment settings) is the committed result.
  const standard = args.length === 0 && !process.env.BENCH_SERVICE_ENV;
  const outDir = standard ? RESULTS_DIR : join(tmpdir(), 'redis-pay-bench');
  writeResult(NAME, md.join('\n'), outDir);
  writeJsonResult(
    NAME,
    benchJson(
      { bench: NAME, args, environment: env, goals, ratios: { grabServiceOverFloor: jsonNum(ratio) }, dist: builtDist },
      {
        preload: pre ?? null,
        grab: grab?.rows.map(({ m: _m, ...r }) => ({ ...r, rps: jsonNum(r.rps, 0), serverUs: jsonNum(r.serverUs, 1), redisUs: jsonNum(r.redisUs, 1) })) ?? null,
        crediting: grab ? { ...grab.crediting, serviceUsPerCredit: jsonNum(grab.crediting.serviceUsPerCredit, 1) } : null,
        creditBound: creditB
          ? {
              ...creditB,
              grabUs: jsonNum(creditB.grabUs, 1),
              readAckUs: jsonNum(creditB.readAckUs, 1),
              settleUs: jsonNum(creditB.settleUs, 1),
              creditUs: jsonNum(creditB.creditUs, 1),
              ratio: jsonNum(creditB.ratio, 2),
            }
          : null,
        luaVsWatch: watch ?? null,
        storms: storms ?? null,
        scale: sc ?? null,
        distribution: distRes ? { ...distRes.d, histogram: distRes.d.histogram } : null,
      },
    ),
    outDir,
  );
  if (distRes) {
    const svgPath = standard ? SVG_PATH : join(outDir, 'red-envelope-amounts.svg');
    writeFileSync(svgPath, distRes.svg);
    console.log(`[bench] written ${svgPath}`);
  }
}

function describeCommands(r: GrabRow): string {
  return Object.entries(r.commands)
    .sort((a, b) => b[1] - a[1])
    .slice(0, 8)
    .map(([k, v]) => `${k} ${fmtNum(v / r.m.load.total, 2)}`)
    .join(', ');
}
