/**
 * costs: the cost account of each hot operation of the built service (`node dist/main.js`, from a snapshot of the
 * build) beside a bare Fastify 5 + ioredis server doing the same Redis work in the cheapest way, on one redis-server
 * (no RDB, no AOF), in one run and under the same load (autocannon, 100 connections):
 *
 * - reserve: `POST /seckill/activities/{id}/products/hot/reservations`, a new user per request; floor: the same work
 *   (bench/seckill-floor-server.ts `/reserve-order`: reserve script recording the order id, buyer index; the order is stored at its first use);
 *   script alone: `/reserve` (lua/features/seckill/reserve-5.lua and nothing else);
 * - grab: `POST /red-envelopes/activities/{id}/grab`, a new user per request, its credit counted; floor:
 *   bench/red-envelopes-floor-server.ts with the JWT check and the credit inline (FLOOR_CREDIT=inline); script alone:
 *   the same server without the credit (lua/features/red-envelope/grab-6.lua);
 * - listing: `GET /seckill/activities/{id}/products?page=1&size=8`, 100 users, cache hits; floor `/products`;
 * - pay: `POST /payment-plans/{planId}/pay`, each request its own PENDING quickpay plan made beforehand (channel
 *   latency 0); floor: bench/pay-floor-server.ts (the same thirteen scripts);
 * - write: `POST /messages` with a service token (a business system's message); floor: bench/messages-floor-server.ts;
 * - pull: `GET /messages?limit=20` of 100 users with 25 messages each; floor: the same.
 *
 * Per request: service CPU µs (/proc, the service's process and its children), Redis CPU µs (INFO cpu), Redis
 * commands (INFO commandstats, all clients), req/s and p99; over the load window and then over the drain window, which
 * lasts until the background work the load left is done (every consumer group of every stream has read and acked all:
 * order events, credits), at most --drain-timeout seconds. Where Redis time goes: the top commands by µs and by calls
 * (commandstats), and the scripts and commands sent per request (MONITOR over a sample of 200 requests). The service's
 * rows run first (each: warm-up, load, drain, sample), then the floors' rows; only the server being measured runs, every
 * other one is stopped (SIGSTOP), so that neither the service's consumers and pollers nor a floor's timers add to another
 * row's figures, and the service never takes up what the floors leave (their events and credit entries).
 *
 * Options: --quick (3 s loads), --only reserve,grab,... , --service DIR/dist (another build; default: this tree's
 * dist), --duration S, --drain-timeout S, --no-pin. Only the run without options writes bench/results/costs.{md,json};
 * any other writes to $TMPDIR/redis-pay-bench/.
 */
import Redis from 'ioredis';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import type { AppConfig } from '../src/platform/config/app-config';
import { orderIndexKey, orderKeys, orderNumberKeyOf } from '../src/features/orders/order.keys';
import { KeyBuilder } from '../src/platform/redis/key-builder';
import { buyerIndexKey } from '../src/features/seckill/seckill.keys';
import { loadAllScripts } from '../src/platform/scripts/script-loader';
import { benchWorkDir } from './lib/cleanup';
import { type CommandStat, redisSnapshot, statsDelta } from './lib/command-stats';
import { assertBuilt, BENCH_SERVICE_TOKEN, bearerTokens, fullEnv, ROOT, snapshotBuild, spawnBareServer } from './lib/full-stack';
import { type LoadRequest, runLoad } from './lib/load';
import { BENCH_MERCHANT, signedOrder } from './lib/merchant-orders';
import { freePort } from './lib/net';
import { cpuSplit, machineCpuSeconds, pinProcess, selfCpuSeconds, treeCpuSeconds, waitUntilServing } from './lib/proc';
import { startBenchRedis } from './lib/redis-server';
import { environmentInfo, fmtInt, fmtNum, type GoalLine, markdownTable, reportHead, RESULTS_DIR, statusText, writeResult } from './lib/report';
import { benchJson, jsonNum, writeJsonResult } from './lib/results-json';
import { type Service, startService, UNDER_LOAD_ENV } from './lib/service-http';
import { message } from './messages';
import { createRain, reconciliation } from './red-envelopes';
import { createActivity } from './seckill';

const NAME = 'costs';
const OPS = ['reserve', 'open', 'reopen', 'grab', 'listing', 'pay', 'write', 'pull'] as const;
type Op = (typeof OPS)[number];
const PREFIX = 'rpco';
const CONNECTIONS = 100;
const SAMPLE = 200;
const GOAL = { service: 1.5, reserveRedis: 1.5, grabRedis: 1.6 };
const SERVICE_ENV: Record<string, string> = {
  ...UNDER_LOAD_ENV,
  RATE_LIMIT_MERCHANT: '10000000',
  RATE_LIMIT_SERVICE: '10000000',
  CHANNEL_LATENCY_MS: '0',
  RED_ENVELOPE_MAX_COUNT: '1000000',
  RED_ENVELOPE_CREDIT_RETRY_MS: '500',
  ORDERS_EVENTS_MAXLEN: '1000000',
};
/** Commands this bench sends itself (snapshots, drain checks, the sample): left out of every figure. */
const OWN = new Set(['info', 'xinfo|groups', 'xinfo|stream', 'scan', 'monitor']);
const LISTED = Array.from({ length: 8 }, (_, i) => `l${i + 1}`);
const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));
const sum = (v: number[]) => v.reduce((s, x) => s + x, 0);

interface Options {
  quick: boolean;
  ops: Op[];
  dist: string;
  durationS: number;
  drainTimeoutS: number;
  pin: boolean;
}

function parseOptions(args: string[]): Options {
  const o: Options = { quick: args.includes('--quick'), ops: [...OPS], dist: join(ROOT, 'dist'), durationS: 0, drainTimeoutS: 0, pin: true };
  o.durationS = o.quick ? 3 : 6;
  o.drainTimeoutS = o.quick ? 15 : 30;
  for (let i = 0; i < args.length; i++) {
    const a = args[i];
    const num = () => {
      const v = Number(args[++i]);
      if (!(v > 0)) throw new Error(`${a} needs a positive number`);
      return v;
    };
    if (a === '--quick') continue;
    else if (a === '--service') o.dist = resolve(args[++i] ?? 'dist');
    else if (a === '--duration') o.durationS = num();
    else if (a === '--drain-timeout') o.drainTimeoutS = num();
    else if (a === '--no-pin') o.pin = false;
    else if (a === '--only') {
      o.ops = (args[++i] ?? '').split(',').filter(Boolean) as Op[];
      if (o.ops.length === 0 || o.ops.some((x) => !OPS.includes(x))) throw new Error(`--only takes a comma-separated list of ${OPS.join(', ')}`);
      if (o.ops.includes('reopen') && !o.ops.includes('open')) throw new Error('--only: reopen opens the orders open stored, so it needs open too');
    } else throw new Error(`unknown option ${a} (known: --quick, --only ${OPS.join(',')}, --service DIR/dist, --duration S, --drain-timeout S, --no-pin)`);
  }
  return o;
}

interface Snap {
  at: number;
  serviceS: number;
  redisS: number;
  stats: Map<string, CommandStat>;
  /** This process (the load generator) and the whole machine, CPU seconds. */
  selfS: number;
  machineS: number;
}

/** Per request over one window. */
interface Window {
  s: number;
  serviceUs: number;
  redisUs: number;
  commands: number;
}

type Target = 'service' | 'floor' | 'script';

interface Row {
  op: Op;
  target: Target;
  label: string;
  requests: number;
  statuses: Record<string, number>;
  errors: number;
  rps: number;
  p99: number;
  load: Window;
  drain: Window;
  settled: boolean;
  /** CPU other jobs on the machine used during the load, in cores (what the server, Redis and the load generator did not use). */
  otherShare: number;
  /** Per request over load + drain: command → [calls, µs]. */
  commands: Record<string, [number, number]>;
  /** Top-level scripts and commands per request in the sample (MONITOR), most first. */
  sent: [string, number][];
}

interface Ctx {
  o: Options;
  redisUrl: string;
  conn: Redis;
  shaToId: Map<string, string>;
  cpu?: string;
}

const ownLess = (d: Record<string, CommandStat>) => Object.fromEntries(Object.entries(d).filter(([k]) => !OWN.has(k)));

function window(a: Snap, b: Snap, n: number): Window {
  const d = ownLess(statsDelta(a.stats, b.stats));
  return {
    s: (b.at - a.at) / 1000,
    serviceUs: (1e6 * (b.serviceS - a.serviceS)) / n,
    redisUs: (1e6 * (b.redisS - a.redisS)) / n,
    commands: sum(Object.values(d).map((v) => v.calls)) / n,
  };
}

/** The streams under the prefix (SCAN: looked for before a measured load, never inside its windows). */
async function streamsOf(conn: Redis): Promise<string[]> {
  const streams: string[] = [];
  let cursor = '0';
  do {
    const [next, keys] = (await conn.call('SCAN', cursor, 'MATCH', `${PREFIX}:*`, 'COUNT', 10_000, 'TYPE', 'stream')) as [string, string[]];
    cursor = next;
    streams.push(...keys);
  } while (cursor !== '0');
  return streams;
}

/** Every consumer group of `streams` has read and acked everything. */
async function settled(conn: Redis, streams: string[]): Promise<boolean> {
  for (const s of streams) {
    const groups = (await conn.call('XINFO', 'GROUPS', s)) as (string | number | null)[][];
    for (const flat of groups) {
      const g = Object.fromEntries(Array.from({ length: flat.length / 2 }, (_, i) => [flat[2 * i], flat[2 * i + 1]]));
      if (Number(g.pending) > 0 || (g.lag !== null && Number(g.lag) > 0)) return false;
      if (g.lag === null) {
        const info = (await conn.call('XINFO', 'STREAM', s)) as (string | number)[];
        if (info[info.indexOf('last-generated-id') + 1] !== g['last-delivered-id']) return false;
      }
    }
  }
  return true;
}

/** MONITOR over `SAMPLE` requests (and their drain): the top-level scripts (by id) and commands sent, per request. */
async function sample(c: Ctx, url: string, requests: () => LoadRequest, drain: () => Promise<unknown>): Promise<[string, number][]> {
  const m = await new Redis(c.redisUrl).monitor();
  const counts = new Map<string, number>();
  let sent = SAMPLE;
  m.on('monitor', (_t: string, args: string[], source: string) => {
    if (source === 'lua') return;
    const cmd = args[0].toLowerCase();
    if (OWN.has(cmd) || cmd === 'xinfo') return;
    const name = cmd === 'evalsha' ? (c.shaToId.get(args[1]) ?? `evalsha ${args[1].slice(0, 8)}`) : cmd;
    counts.set(name, (counts.get(name) ?? 0) + 1);
  });
  try {
    await sleep(50);
    // Divided by the requests made (autocannon may send a few past `amount` that it does not count).
    sent = 0;
    const counted = () => (sent++, requests());
    await runLoad({ url, connections: 20, durationS: 60, amount: SAMPLE, requests: counted });
    await drain();
    await sleep(50);
  } finally {
    m.disconnect();
  }
  return [...counts].sort((a, b) => b[1] - a[1]).map(([k, n]) => [k, n / sent]);
}

interface RowSpec {
  op: Op;
  target: Target;
  label: string;
  url: string;
  pid: number;
  requests: () => LoadRequest;
  /** A fixed number of requests (each its own plan) instead of the duration; the warm-up takes warmAmount. */
  amount?: number;
  warmAmount?: number;
}

/** Warm-up, then the measured load, then (service) the drain; then the sample. */
async function measureRow(c: Ctx, r: RowSpec): Promise<Row> {
  const snap = async (): Promise<Snap> => {
    const at = performance.now();
    const serviceS = treeCpuSeconds(r.pid) ?? NaN;
    const [selfS, machineS] = [selfCpuSeconds(), machineCpuSeconds()?.busy ?? NaN];
    const { cpuS, stats } = await redisSnapshot(c.conn);
    return { at, serviceS, redisS: cpuS, stats, selfS, machineS };
  };
  const base = { url: r.url, connections: CONNECTIONS, requests: r.requests };
  let streams: string[] = [];
  // Until the server has answered what it had queued (it uses under 10% of a core over 100 ms) and, for the service,
  // every consumer group has read and acked all.
  const drain = async () => {
    const t0 = Date.now();
    for (;;) {
      const cpu0 = treeCpuSeconds(r.pid) ?? 0;
      await sleep(100);
      const idle = (treeCpuSeconds(r.pid) ?? 0) - cpu0 < 0.01;
      if (idle && (r.target !== 'service' || (await settled(c.conn, streams)))) return true;
      if (Date.now() - t0 > c.o.drainTimeoutS * 1000) return false;
    }
  };
  await runLoad({ ...base, durationS: c.o.quick ? 1 : 2, amount: r.warmAmount });
  if (r.target === 'service') streams = await streamsOf(c.conn);
  await drain();
  let first: Promise<Snap> | undefined;
  const load = await runLoad({ ...base, durationS: c.o.durationS, amount: r.amount, onStart: () => (first = snap()) });
  const s0 = await first!;
  const s1 = await snap();
  const ok = await drain();
  const s2 = await snap();
  const n = load.total;
  const all = ownLess(statsDelta(s0.stats, s2.stats));
  const row: Row = {
    op: r.op,
    target: r.target,
    label: r.label,
    requests: n,
    statuses: load.statusCodes,
    errors: load.errors,
    rps: n / window(s0, s1, 1).s,
    p99: load.p99,
    load: window(s0, s1, n),
    otherShare: (s1.machineS - s0.machineS - (s1.serviceS - s0.serviceS) - (s1.redisS - s0.redisS) - (s1.selfS - s0.selfS)) / ((s1.at - s0.at) / 1000),
    drain: window(s1, s2, n),
    settled: ok,
    commands: Object.fromEntries(Object.entries(all).map(([k, v]) => [k, [v.calls / n, v.usec / n]])),
    sent: await sample(c, r.url, r.requests, drain),
  };
  const t = total(row);
  console.log(
    `[bench] ${r.op} / ${r.label}: ${fmtInt(row.rps)} req/s, p99 ${row.p99} ms, service ${fmtNum(t.serviceUs, 0)} µs, Redis ${fmtNum(t.redisUs, 0)} µs, ` +
      `${fmtNum(t.commands, 1)} commands per request (drain ${fmtNum(row.drain.s, 1)} s${ok ? '' : ', NOT settled'}), ${statusText(row.statuses)}`,
  );
  return row;
}

const total = (r: Row): Window => ({
  s: r.load.s + r.drain.s,
  serviceUs: r.load.serviceUs + r.drain.serviceUs,
  redisUs: r.load.redisUs + r.drain.redisUs,
  commands: r.load.commands + r.drain.commands,
});

// ---------------------------------------------------------------------------------------------
// Fixtures

/** `n` orders of the bench merchant, each with a PENDING quickpay plan of its payer (one of `payers`); their plan ids. */
async function makePlans(port: number, conn: Redis, n: number, payers: string[], tag: string): Promise<{ planId: string; payer: number }[]> {
  const url = `http://127.0.0.1:${port}`;
  const keys = new KeyBuilder({ redis: { keyPrefix: PREFIX } } as AppConfig);
  // A margin: on a busy machine a few creations may answer 503; those are left out.
  const nos = Array.from({ length: Math.ceil(n * 1.05) }, (_, i) => `${tag}-${i}`);
  const tokens = bearerTokens(payers);
  let k = 0;
  await runLoad({ url, connections: 50, durationS: 600, amount: nos.length, requests: () => signedOrder(nos[k], payers[k++ % payers.length]) });
  const ids = (await conn.mget(...nos.map((no) => orderIndexKey(keys, orderNumberKeyOf(BENCH_MERCHANT, no))))) as (string | null)[];
  const made = ids.flatMap((id, i) => (id ? [{ id, payer: i % payers.length }] : []));
  let j = 0;
  await runLoad({
    url,
    connections: 50,
    durationS: 600,
    amount: made.length,
    requests: () => {
      const { id, payer } = made[j++];
      return {
        method: 'POST',
        path: `/orders/${id}/payment-plans`,
        headers: { 'content-type': 'application/json', authorization: tokens[payer] },
        body: JSON.stringify({ instructions: [{ method: 'quickpay', amount: 1200 }] }),
      };
    },
  });
  const exists = await Promise.all(made.map(({ id }) => conn.exists(orderKeys(keys, id, `${id}_p1`)[1])));
  const plans = made.filter((_, i) => exists[i] === 1).map(({ id, payer }) => ({ planId: `${id}_p1`, payer }));
  if (plans.length < n) throw new Error(`only ${plans.length} of ${n} plans for pay could be made`);
  return plans.slice(0, n);
}

interface Fixtures {
  activity: string;
  rain: string;
  listers: string[];
  plans: { service: { planId: string; payer: number }[]; floor: { planId: string; payer: number }[] };
  payers: string[];
  readers: string[];
  /** Reservations whose order has not been used yet: its id and its buyer's bearer token. */
  opens: { orderId: string; token: string }[];
}

/**
 * `n` reservations of the product `open` by new buyers through the service, and the order id each was answered (read
 * from the buyer's index): orders not stored yet, for the first-use row.
 */
async function makeReservations(port: number, conn: Redis, activity: string, n: number, tag: string): Promise<{ orderId: string; token: string }[]> {
  const keys = new KeyBuilder({ redis: { keyPrefix: PREFIX } } as AppConfig);
  const buyers = Array.from({ length: Math.ceil(n * 1.05) }, (_, i) => `op-${tag}-${i}`);
  const tokens = bearerTokens(buyers);
  let k = 0;
  await runLoad({
    url: `http://127.0.0.1:${port}`,
    connections: 50,
    durationS: 600,
    amount: buyers.length,
    requests: () => ({
      method: 'POST',
      path: `/seckill/activities/${activity}/products/open/reservations`,
      headers: { 'content-type': 'application/json', authorization: tokens[k++] },
      body: JSON.stringify({ quantity: 1, requestId: 'open' }),
    }),
  });
  const pipeline = conn.pipeline();
  for (const b of buyers) pipeline.hgetall(buyerIndexKey(keys, b));
  const indexes = ((await pipeline.exec()) ?? []).map(([, v]) => (v ?? {}) as Record<string, string>);
  const made = indexes.flatMap((index, i) => {
    const field = Object.keys(index).find((x) => x.startsWith('o:'));
    return field ? [{ orderId: field.slice(2), token: tokens[i] }] : [];
  });
  if (made.length < n) throw new Error(`only ${made.length} of ${n} reservations for open could be made`);
  return made.slice(0, n);
}

async function fixtures(c: Ctx, svc: Service, payCount: number, openCount: number): Promise<Fixtures> {
  const tag = Date.now().toString(36);
  const f: Fixtures = {
    activity: `a${tag}`,
    rain: `r${tag}`,
    listers: Array.from({ length: CONNECTIONS }, (_, i) => `lister-${i}`),
    plans: { service: [], floor: [] },
    payers: Array.from({ length: 1000 }, (_, i) => `payer-${i}`),
    readers: Array.from({ length: CONNECTIONS }, (_, i) => `reader-${tag}-${i}`),
    opens: [],
  };
  const ops = new Set(c.o.ops);
  if (ops.has('reserve') || ops.has('listing') || ops.has('open') || ops.has('reopen'))
    await createActivity(svc.port, f.activity, [
      { productId: 'hot', stock: 10_000_000 },
      { productId: 'open', stock: 10_000_000 },
      ...LISTED.map((productId) => ({ productId, stock: 1000 })),
    ]);
  if (ops.has('open') || ops.has('reopen')) f.opens = await makeReservations(svc.port, c.conn, f.activity, openCount, tag);
  if (ops.has('grab')) await createRain(svc.port, f.rain, c.o.quick ? 200_000 : 600_000);
  if (ops.has('pay')) {
    f.plans.service = await makePlans(svc.port, c.conn, payCount, f.payers, `cs${tag}`);
    f.plans.floor = await makePlans(svc.port, c.conn, payCount, f.payers, `cf${tag}`);
  }
  if (ops.has('pull')) {
    let n = 0;
    const w = await runLoad({
      url: `http://127.0.0.1:${svc.port}`,
      connections: 50,
      durationS: 600,
      amount: 25 * f.readers.length,
      requests: () => writeRequest(f.readers[n++ % f.readers.length]),
    });
    if (w.ok !== 25 * f.readers.length) throw new Error(`inboxes: ${statusText(w.statusCodes)}`);
  }
  return f;
}

let writes = 0;
const writeRequest = (account: string): LoadRequest => ({
  method: 'POST',
  path: '/messages',
  headers: { 'content-type': 'application/json', 'x-service-token': BENCH_SERVICE_TOKEN },
  body: JSON.stringify(message(account, writes++, new Date().toISOString())),
});

/** The requests of `op` for the service (`floor`: false) or its floor: each call the next request. */
function requestsOf(op: Op, f: Fixtures, floor: boolean, script = false): () => LoadRequest {
  let n = 0;
  const json = { 'content-type': 'application/json' };
  const newUser = () => bearerTokens([`u${op[0]}${floor ? 'f' : 's'}${Date.now().toString(36)}-${n++}`])[0];
  const listers = bearerTokens(f.listers);
  const readers = bearerTokens(f.readers);
  const payerTokens = bearerTokens(f.payers);
  const plans = floor ? f.plans.floor : f.plans.service;
  switch (op) {
    case 'reserve':
      return (): LoadRequest => {
        const i = n++;
        return floor
          ? {
              method: 'POST',
              path: `/${script ? 'reserve' : 'reserve-order'}/${f.activity}/hot`,
              headers: json,
              body: JSON.stringify({ account: `${script ? 's' : 'o'}${i}`, quantity: 1, requestId: `r${i}` }),
            }
          : {
              method: 'POST',
              path: `/seckill/activities/${f.activity}/products/hot/reservations`,
              headers: { ...json, authorization: newUser() },
              body: JSON.stringify({ quantity: 1, requestId: `r${i}` }),
            };
      };
    case 'open':
    case 'reopen':
      return (): LoadRequest => {
        const o = f.opens[Math.min(n++, f.opens.length - 1)];
        return { method: 'GET', path: `/orders/${o.orderId}`, headers: { authorization: o.token } };
      };
    case 'grab':
      return () => ({ method: 'POST', path: floor ? `/grab/${f.rain}` : `/red-envelopes/activities/${f.rain}/grab`, headers: { authorization: newUser() } });
    case 'listing':
      return (): LoadRequest => {
        const i = n++ % f.listers.length;
        return floor
          ? { method: 'GET', path: `/products/${f.activity}?account=${f.listers[i]}&page=1&size=8`, headers: {} }
          : { method: 'GET', path: `/seckill/activities/${f.activity}/products?page=1&size=8`, headers: { authorization: listers[i] } };
      };
    case 'pay':
      return (): LoadRequest => {
        const p = plans[Math.min(n++, plans.length - 1)];
        return floor
          ? { method: 'POST', path: `/pay/${p.planId}`, headers: {} }
          : { method: 'POST', path: `/payment-plans/${p.planId}/pay`, headers: { authorization: payerTokens[p.payer] } };
      };
    case 'write':
      return () => writeRequest(`cw-${n++ % 10_000}`);
    case 'pull':
      return () => {
        const i = n++ % f.readers.length;
        return { method: 'GET', path: '/messages?limit=20', headers: { authorization: readers[i], 'x-account-id': f.readers[i] } };
      };
  }
}

// ---------------------------------------------------------------------------------------------
// The floors

type FloorServer = 'seckill' | 'red-envelopes' | 'red-envelopes-credit' | 'pay' | 'messages';
const FLOOR_ROWS: Record<Op, { server: FloorServer; target: Target; label: string; script?: boolean }[]> = {
  reserve: [
    { server: 'seckill', target: 'floor', label: 'floor: same work (reserve script, buyer index)' },
    { server: 'seckill', target: 'script', label: 'reserve script alone (reserve-5.lua)', script: true },
  ],
  grab: [
    { server: 'red-envelopes-credit', target: 'floor', label: 'floor: same work (JWT check, grab script, its credit and settle inline)' },
    { server: 'red-envelopes', target: 'script', label: 'grab script alone (grab-6.lua; with the JWT check, no credit)' },
  ],
  open: [],
  reopen: [],
  listing: [{ server: 'seckill', target: 'floor', label: 'floor: GET of the cached page' }],
  pay: [{ server: 'pay', target: 'floor', label: 'floor: the same thirteen scripts (bench/pay-floor-server.ts)' }],
  write: [{ server: 'messages', target: 'floor', label: "floor: the service's MessagesService.write on bare Fastify" }],
  pull: [{ server: 'messages', target: 'floor', label: "floor: the service's MessagesService.pull on bare Fastify" }],
};

/** The floor servers the chosen operations need, each started on the service's CPU: server → its URL and pid. */
async function startFloors(c: Ctx, dist: string, needed: Set<FloorServer>): Promise<Map<FloorServer, Service>> {
  const lua = join(dist, '..', 'lua');
  const started = await Promise.all(
    [...needed].map(async (server) => {
      const port = await freePort();
      const env: NodeJS.ProcessEnv = {
        ...process.env,
        ...(server === 'messages' || server.startsWith('red-envelopes') ? fullEnv(port, c.redisUrl, PREFIX, SERVICE_ENV) : {}),
        PORT: String(port),
        REDIS_URL: c.redisUrl,
        KEY_PREFIX: PREFIX,
        LUA_DIR: lua,
        DIST: dist,
        NODE_ENV: 'production',
        PRODUCTS: ['hot', ...LISTED].join(','),
        ORDERS_EVENTS_MAXLEN: SERVICE_ENV.ORDERS_EVENTS_MAXLEN,
        ...(server.startsWith('red-envelopes') ? { FLOOR_IDENTITY: 'jwt', FLOOR_CREDIT: server === 'red-envelopes-credit' ? 'inline' : '' } : {}),
      };
      const proc = spawnBareServer({
        id: `${server}-floor`,
        port,
        cpus: c.cpu,
        script: join(__dirname, `${server.replace('-credit', '')}-floor-server.ts`),
        env,
      });
      await waitUntilServing(proc, port, undefined, 60_000);
      return [server, { port, proc }] as const;
    }),
  );
  return new Map(started);
}

// ---------------------------------------------------------------------------------------------
// Report

const OP_LABEL: Record<Op, string> = {
  reserve: 'seckill reserve',
  open: 'first use of a reservation’s order (GET /orders/{orderId} by its buyer, each request another order)',
  reopen: 'checkout of a stored order (the same orders opened again)',
  grab: 'red-envelope grab (its credit included)',
  listing: 'seckill listing (cache hits)',
  pay: 'pay (POST /payment-plans/{planId}/pay)',
  write: 'message write (business system)',
  pull: 'message pull (app)',
};

const rowOf = (rows: Row[], op: Op, ...targets: Target[]) => targets.map((t) => rows.find((r) => r.op === op && r.target === t)).find(Boolean);
const ratio = (a: number | undefined, b: number | undefined) => (a !== undefined && b !== undefined && b > 0 ? a / b : undefined);

interface GoalFigure {
  key: string;
  op: Op;
  kind: 'service' | 'redis';
  line: GoalLine;
  ratio?: number;
  limit?: number;
}

function goalFigures(rows: Row[]): GoalFigure[] {
  const out: GoalFigure[] = [];
  /** `a` ÷ `b` of the figure `key` over load + drain; `limit` undefined: information only. */
  const figure = (op: Op, kind: GoalFigure['kind'], goal: string, a: Row | undefined, b: Row | undefined, limit?: number) => {
    if (!a || !b) return;
    const key = kind === 'service' ? 'serviceUs' : 'redisUs';
    const r = ratio(total(a)[key], total(b)[key]);
    const measured = `${fmtNum(r, 2)} (${fmtNum(total(a)[key], 0)} µs ÷ ${fmtNum(total(b)[key], 0)} µs)`;
    const line: GoalLine = { goal, target: limit === undefined ? 'information' : `≤ ${limit}`, measured };
    out.push({
      key: `${kind}_${op}`,
      op,
      kind,
      ratio: r,
      limit,
      line: limit === undefined ? { ...line, info: true } : { ...line, met: r !== undefined && r <= limit },
    });
  };
  for (const op of OPS)
    figure(
      op,
      'service',
      `Service CPU per request, its background counted, ÷ the same-work floor: ${OP_LABEL[op]}`,
      rowOf(rows, op, 'service'),
      rowOf(rows, op, 'floor', 'script'),
      op === 'pull' ? undefined : GOAL.service,
    );
  const redisGoal = (op: Op, goal: string, limit: number) => figure(op, 'redis', goal, rowOf(rows, op, 'service'), rowOf(rows, op, 'script'), limit);
  redisGoal('reserve', 'Redis CPU per reservation (its background included) ÷ the reserve script alone', GOAL.reserveRedis);
  redisGoal('grab', 'Redis CPU per grab, its credit included ÷ the grab script alone', GOAL.grabRedis);
  // A reservation's order is stored at its first use (or its close), not on the reservation's path. What that first
  // use costs beyond a checkout of a stored order (open row less reopen row) is the reservation's, spent later.
  const [reserved, opened, reopened, script] = [
    rowOf(rows, 'reserve', 'service'),
    rowOf(rows, 'open', 'service'),
    rowOf(rows, 'reopen', 'service'),
    rowOf(rows, 'reserve', 'script'),
  ];
  if (reserved && opened && reopened && script) {
    const [a, b, s] = [total(reserved).redisUs, total(opened).redisUs - total(reopened).redisUs, total(script).redisUs];
    out.push({
      key: 'redis_reserve_with_order',
      op: 'reserve',
      kind: 'redis',
      ratio: (a + b) / s,
      line: {
        goal: 'Redis CPU per reservation with its order stored at its first use (reserve row + what a first use costs beyond a checkout: open row less reopen row) ÷ the reserve script alone',
        target: 'information',
        measured: `${fmtNum((a + b) / s, 2)} ((${fmtNum(a, 0)} + ${fmtNum(b, 0)}) µs ÷ ${fmtNum(s, 0)} µs)`,
        info: true,
      },
    });
  }
  return out;
}

const sentText = (sent: [string, number][], top = 10) =>
  sent
    .filter(([, n]) => n >= 0.05)
    .slice(0, top)
    .map(([k, n]) => `${k} ${fmtNum(n, 2)}`)
    .join(', ') || 'none';

/** What the service sends or runs per request beyond its comparison row: the largest positive differences. */
function excess(a: Record<string, number>, b: Record<string, number>, unit: string, digits: number, min: number): string {
  const d = Object.keys(a)
    .map((k) => [k, a[k] - (b[k] ?? 0)] as const)
    .filter(([, v]) => v >= min)
    .sort((x, y) => y[1] - x[1])
    .slice(0, 8);
  return d.map(([k, v]) => `${k} +${fmtNum(v, digits)}${unit}`).join(', ') || 'nothing above the noise';
}

const usecOf = (r: Row) => Object.fromEntries(Object.entries(r.commands).map(([k, [, us]]) => [k, us]));
const callsOf = (r: Row) => Object.fromEntries(Object.entries(r.commands).map(([k, [n]]) => [k, n]));

function explainMisses(rows: Row[], goals: GoalFigure[]): string[] {
  const out: string[] = [];
  for (const g of goals.filter((x) => x.line.met === false)) {
    const s = rowOf(rows, g.op, 'service')!;
    const other = g.kind === 'service' ? rowOf(rows, g.op, 'floor', 'script')! : rowOf(rows, g.op, 'script')!;
    const ts = total(s);
    const to = total(other);
    if (g.kind === 'service') {
      out.push(
        `- **${OP_LABEL[g.op]}, service CPU** ${fmtNum(ts.serviceUs, 0)} µs against ${fmtNum(to.serviceUs, 0)} µs: ` +
          `${fmtNum(s.load.serviceUs - to.serviceUs, 0)} µs more while answering, ${fmtNum(s.drain.serviceUs, 0)} µs of background after the load ` +
          `(${fmtNum(s.drain.s, 1)} s of drain). Top-level Redis calls per request ${fmtNum(sum(s.sent.map(([, n]) => n)), 1)} against ` +
          `${fmtNum(sum(other.sent.map(([, n]) => n)), 1)}; the extra ones: ${excess(Object.fromEntries(s.sent), Object.fromEntries(other.sent), '', 2, 0.05)}. ` +
          'The rest is the layers around the handler (auth, rate limit, validation, logging, metrics, serialization: see `npm run bench -- http-floor`).',
      );
    } else {
      // Script alone → the same-work floor (the work the operation is made of) → the service (what it adds to that work).
      const f = rowOf(rows, g.op, 'floor');
      const step = (a: Row, b: Row) =>
        `sent per request beyond it: ${excess(Object.fromEntries(a.sent), Object.fromEntries(b.sent), '', 2, 0.05)}; ` +
        `commandstats µs per request beyond it: ${excess(usecOf(a), usecOf(b), ' µs', 1, 0.5)}; calls: ${excess(callsOf(a), callsOf(b), '', 2, 0.05)}`;
      out.push(
        `- **${OP_LABEL[g.op]}, Redis CPU** ${fmtNum(ts.redisUs, 0)} µs (answering ${fmtNum(s.load.redisUs, 0)} + background ${fmtNum(s.drain.redisUs, 0)}; ` +
          `${fmtNum(ts.commands, 1)} commands) against ${fmtNum(to.redisUs, 0)} µs (${fmtNum(to.commands, 1)} commands) for the ${other.label}.`,
        ...(f
          ? [
              `  - The work itself: the ${f.label} costs ${fmtNum(total(f).redisUs, 0)} µs (${fmtNum(total(f).commands, 1)} commands), ` +
                `${fmtNum(total(f).redisUs - to.redisUs, 0)} µs more than the script alone; ${step(f, other)}.`,
              `  - What the service adds to that work: ${fmtNum(ts.redisUs - total(f).redisUs, 0)} µs; ${step(s, f)}.`,
              `  - The work alone is at ${fmtNum(total(f).redisUs / to.redisUs, 2)}× the script: ` +
                (total(f).redisUs / to.redisUs > (g.limit ?? Infinity)
                  ? 'above the target, so only less work (another design of what the operation writes) can meet it.'
                  : `within the target: the service's additions are what to remove.`),
            ]
          : [`  - ${step(s, other)}.`]),
      );
    }
  }
  if (out.length)
    out.push(
      '',
      "commandstats µs are time spent inside commands (EVALSHA's include the commands its scripts run, which are listed under their own names too); " +
        "they run above Redis CPU when Redis waits for a core. The service's xreadgroup and xack are its consumer groups reading the operation's events.",
    );
  return out.length ? out : ['Every goal measured is met.'];
}

function tables(rows: Row[]): string[] {
  const w = (x: Window, t: Window, key: 'serviceUs' | 'redisUs' | 'commands', digits: number) =>
    `${fmtNum(x[key], digits)} + ${fmtNum(t[key] - x[key], digits)} = **${fmtNum(t[key], digits)}**`;
  const main = markdownTable(
    [
      'operation',
      'server',
      'req/s',
      'p99 ms',
      'service CPU µs (load + drain = total)',
      'Redis CPU µs (load + drain = total)',
      'Redis commands (load + drain = total)',
      'load s + drain s',
      'other jobs (cores)',
      'answers',
    ],
    rows.map((r) => [
      r.op,
      r.label,
      fmtInt(r.rps),
      r.p99,
      w(r.load, total(r), 'serviceUs', 0),
      w(r.load, total(r), 'redisUs', 1),
      w(r.load, total(r), 'commands', 1),
      `${fmtNum(r.load.s, 1)} + ${fmtNum(r.drain.s, 1)}${r.settled ? '' : ' (not settled)'}`,
      fmtNum(r.otherShare, 2),
      statusText(r.statuses) + (r.errors ? `, errors ${r.errors}` : ''),
    ]),
    ['left', 'left', 'right', 'right', 'right', 'right', 'right', 'right', 'right', 'left'],
  );
  const top = (r: Row, i: 0 | 1) =>
    Object.entries(r.commands)
      .sort((a, b) => b[1][i] - a[1][i])
      .slice(0, 6)
      .map(([k, [n, us]]) => `${k} ${fmtNum(us, 1)} µs / ${fmtNum(n, 2)}`)
      .join(', ');
  const where = markdownTable(
    [
      'operation',
      'server',
      'top commands by Redis µs (µs / calls per request)',
      'top commands by calls',
      'sent per request (top level: scripts by id, commands)',
    ],
    rows.map((r) => [r.op, r.label, top(r, 1), top(r, 0), sentText(r.sent)]),
  );
  return ['## Per request', '', main, '', '## Where the Redis time goes', '', where, ''];
}

// ---------------------------------------------------------------------------------------------

export async function main(args: string[]): Promise<void> {
  const o = parseOptions(args);
  assertBuilt([o.dist]);
  const workDir = benchWorkDir('rp-costs-');
  const dist = snapshotBuild(o.dist, join(workDir, 'build'));
  const split = o.pin ? cpuSplit() : undefined;
  if (o.pin && !split) console.error('[bench] cannot pin CPUs (fewer than 2 CPUs or no taskset); the scheduler places everything');
  if (split) pinProcess(split.rest);
  const redis = await startBenchRedis();
  const conn = new Redis(redis.url, { maxRetriesPerRequest: 1 });
  const c: Ctx = {
    o,
    redisUrl: redis.url,
    conn,
    cpu: split?.server,
    shaToId: new Map([...loadAllScripts(join(dist, '..', 'lua')).values()].map((d) => [d.sha, d.id])),
  };
  const env = environmentInfo(redis.version, {
    'CPU placement': split
      ? `each server under test alone on CPU ${split.server}; autocannon (this process) and redis-server on CPU ${split.rest} (taskset)`
      : 'not pinned: servers, autocannon and redis-server share every CPU',
    'Service build': o.dist,
    Load: `${CONNECTIONS} connections, ${o.durationS} s per row after a warm-up (pay: a fixed number of plans), drain up to ${o.drainTimeoutS} s`,
  });
  const rows: Row[] = [];
  const warnings: string[] = [];
  try {
    const svc = await startService(dist, workDir, 'service', PREFIX, SERVICE_ENV, { REDIS_URL: redis.url });
    if (split) pinProcess(split.server, svc.proc.pid);
    const payCount = o.quick ? 1500 : 6000;
    const pay = { warmAmount: Math.round(payCount / 6), amount: payCount - Math.round(payCount / 6) - SAMPLE };
    const openCount = o.quick ? 6000 : 20000;
    const open = { warmAmount: Math.round(openCount / 6), amount: openCount - Math.round(openCount / 6) - SAMPLE };
    const t0 = performance.now();
    const f = await fixtures(c, svc, payCount, openCount);
    console.log(`[bench] fixtures ready in ${fmtNum((performance.now() - t0) / 1000, 1)} s`);
    const floors = await startFloors(c, dist, new Set(o.ops.flatMap((op) => FLOOR_ROWS[op].map((x) => x.server))));
    // Only the server of the row being measured runs: the others are stopped (SIGSTOP). The service's rows come first,
    // and the service stays stopped through the floors' rows: its consumers would otherwise take up what the floors
    // leave (their order events, their grabs' credit entries, reservations without an order) inside later windows.
    const servers = [svc, ...floors.values()];
    const only = (running?: Service) => servers.forEach((x) => process.kill(x.proc.pid, x === running ? 'SIGCONT' : 'SIGSTOP'));
    try {
      only(svc);
      const url = `http://127.0.0.1:${svc.port}`;
      for (const op of o.ops)
        rows.push(
          await measureRow(c, {
            op,
            target: 'service',
            label: 'service',
            url,
            pid: svc.proc.pid,
            requests: requestsOf(op, f, false),
            ...(op === 'pay' ? pay : op === 'open' || op === 'reopen' ? open : {}),
          }),
        );
      for (const op of o.ops)
        for (const x of FLOOR_ROWS[op]) {
          const srv = floors.get(x.server)!;
          only(srv);
          const requests = requestsOf(op, f, true, x.script);
          const at = `http://127.0.0.1:${srv.port}`;
          rows.push(await measureRow(c, { op, target: x.target, label: x.label, url: at, pid: srv.proc.pid, requests, ...(op === 'pay' ? pay : {}) }));
        }
    } finally {
      servers.forEach((x) => process.kill(x.proc.pid, 'SIGCONT'));
    }
    // A rain that ran dry answers NONE_LEFT, a cheaper path than a grab: then the grab rows do not say what a grab costs.
    // (Twice: the first request after the service's long stop may meet a keep-alive socket the service has closed.)
    const left = () => reconciliation(svc.port, f.rain).then((r) => r.left.count);
    if (o.ops.includes('grab') && (await left().catch(left)) === 0)
      warnings.push('The rain ran dry during the grab rows: their figures are not those of grabs.');
  } finally {
    conn.disconnect();
  }
  rows.sort((a, b) => OPS.indexOf(a.op) - OPS.indexOf(b.op));

  const goals = goalFigures(rows);
  for (const r of rows.filter((x) => x.errors || Object.keys(x.statuses).some((code) => !code.startsWith('2'))))
    warnings.push(`${r.op} / ${r.label}: answers ${statusText(r.statuses)}${r.errors ? `, ${r.errors} errors` : ''}.`);
  warnings.forEach((w) => console.error(`[bench] warning: ${w}`));
  const md = [
    ...reportHead(
      NAME,
      args,
      env,
      goals.map((g) => g.line),
    ),
    ...(warnings.length ? ['**Warnings.**', '', ...warnings.map((w) => `- ${w}`), ''] : []),
    '## What explains a miss',
    '',
    ...explainMisses(rows, goals),
    '',
    ...tables(rows),
    '## How it is measured',
    '',
    '- Service CPU: /proc of the service process and its children; Redis CPU: INFO cpu (used_cpu_sys + used_cpu_user); commands: INFO commandstats of every client, ' +
      "this bench's own INFO, XINFO and SCAN left out. All per request: the window's figure divided by the requests of the load.",
    '- Load: the measured autocannon run. Drain: from its end until the server has answered what it had queued (under 10% of a core over 100 ms) and, ' +
      `for the service, every consumer group of every stream has read and acked all (order events, credits), at most ${o.drainTimeoutS} s. ` +
      "The service's idle pollers run in both windows. The floors do no background work.",
    '- Other jobs: CPU the rest of the machine used during the load (machine busy time less the server, Redis and the load generator), in cores: ' +
      'where it is high, the row shared its CPUs and its µs run high.',
    `- Sent per request: MONITOR over ${SAMPLE} more requests (20 connections) and their drain, top-level calls only (scripts by id).`,
    "- open: a reservation's order is not written on the reservation's path; it is stored at its first use (the buyer's checkout or first plan) or " +
      'when the reservation is released. The open row measures that first use: reservations made through the service before the rows (product ' +
      '`open`, new buyers), then each request opens another one of their orders, a fixed number like pay. Its Redis time belongs to the ' +
      'reservation it was answered with, spent later. The reopen row opens the same orders again (stored now): a checkout as any. ' +
      'The information line adds what a first use costs beyond that checkout (open less reopen) to the reserve row.',
    '',
  ];
  const standard = args.length === 0;
  const dir = standard ? RESULTS_DIR : join(tmpdir(), 'redis-pay-bench');
  // `ratios` are higher-is-better (as --compare reads them): the floor's (or the script's) cost ÷ the service's. The goals'
  // ratios (service ÷ floor, lower is better) are in `goalRatios`.
  const goalRatios = Object.fromEntries(goals.map((g) => [g.key, jsonNum(g.ratio)]));
  const figures = { goalRatios, rows: rows.map((r) => ({ ...r, total: total(r), rps: jsonNum(r.rps, 0) })) };
  const ratios = Object.fromEntries(goals.map((g) => [`${g.key}_floorOverService`, jsonNum(g.ratio ? 1 / g.ratio : undefined)]));
  writeResult(NAME, md.join('\n'), dir);
  writeJsonResult(NAME, benchJson({ bench: NAME, args, environment: env, goals: goals.map((g) => g.line), ratios, dist: o.dist }, figures), dir);
}
