/**
 * costs: the cost account of each hot operation of the built service beside a bare Fastify 5 + ioredis server doing
 * the same Redis work (and, for reserve and grab, the script alone), on one redis-server under the same load
 * (autocannon, 100 connections). Per request: service CPU µs (/proc, the process and its children), Redis CPU µs
 * (INFO cpu) and Redis commands (INFO commandstats), over the load window and then over the drain window, which lasts
 * until the background work the load left is done (every consumer group has read and acked all), at most
 * --drain-timeout seconds. Only the server being measured runs; every other one is stopped (SIGSTOP).
 *
 * Options: --quick, --only reserve,grab,..., --dist DIR, --duration S, --drain-timeout S, --no-pin.
 */
import Redis from 'ioredis';
import { Agent } from 'node:http';
import { forEachLimit } from '../src/platform/core/for-each-limit';
import { type CommandStat, redisSnapshot, statsDelta } from './lib/command-stats';
import { bearerTokens, BENCH_SERVICE_TOKEN, fullEnv, httpOn, signedOrder } from './lib/full-stack';
import { type LoadRequest, runLoad } from './lib/load';
import { cpuSplit, machineCpuSeconds, pinProcess, selfCpuSeconds, treeCpuSeconds } from './lib/proc';
import { fmtInt, fmtNum, type GoalLine, jsonNum, markdownTable, statusText } from './lib/report';
import { defineBench, type Target as Server } from './lib/scenario';
import { message } from './messages';
import { createRain, reconciliation } from './red-envelopes';
import { createActivity } from './seckill';

const OPS = ['reserve', 'open', 'reopen', 'grab', 'listing', 'pay', 'write', 'pull'] as const;
type Op = (typeof OPS)[number];
const PREFIX = 'rpco';
const GOAL = { service: 1.5, reserveRedis: 1.5, grabRedis: 1.6 };
const SERVICE_ENV: Record<string, string> = {
  RATE_LIMIT_MERCHANT: '10000000',
  RATE_LIMIT_SERVICE: '10000000',
  CHANNEL_LATENCY_MS: '0',
  RED_ENVELOPE_MAX_COUNT: '1000000',
  RED_ENVELOPE_CREDIT_RETRY_MS: '500',
  ORDERS_EVENTS_MAXLEN: '1000000',
};
/** Commands this bench sends itself (snapshots, drain checks): left out of every figure. */
const OWN = new Set(['info', 'xinfo|groups', 'xinfo|stream', 'scan']);
const LISTED = Array.from({ length: 8 }, (_, i) => `l${i + 1}`);
const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));
const JSON_BODY = { 'content-type': 'application/json' };

type Kind = 'service' | 'floor' | 'script';
interface Window {
  s: number;
  serviceUs: number;
  redisUs: number;
  commands: number;
}
interface Row {
  op: Op;
  kind: Kind;
  label: string;
  requests: number;
  statuses: Record<string, number>;
  errors: number;
  rps: number;
  p99: number;
  load: Window;
  drain: Window;
  total: Window;
  settled: boolean;
  /** Cores other jobs on the machine used during the load. */
  otherShare: number;
  /** Per request over load + drain: command → [calls, µs]. */
  commands: Record<string, [number, number]>;
}
interface Snap {
  at: number;
  serviceS: number;
  redisS: number;
  stats: Map<string, CommandStat>;
  selfS: number;
  machineS: number;
}

function window(a: Snap, b: Snap, n: number): Window {
  const d = Object.entries(statsDelta(a.stats, b.stats)).filter(([k]) => !OWN.has(k));
  return {
    s: (b.at - a.at) / 1000,
    serviceUs: (1e6 * (b.serviceS - a.serviceS)) / n,
    redisUs: (1e6 * (b.redisS - a.redisS)) / n,
    commands: d.reduce((s, [, v]) => s + v.calls, 0) / n,
  };
}

/** Every consumer group of every stream under the prefix has read and acked everything. */
async function settled(conn: Redis, streams: string[]): Promise<boolean> {
  for (const s of streams) {
    for (const flat of (await conn.call('XINFO', 'GROUPS', s)) as (string | number | null)[][]) {
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

async function streamsOf(conn: Redis): Promise<string[]> {
  const out: string[] = [];
  let cursor = '0';
  do {
    const [next, keys] = (await conn.call('SCAN', cursor, 'MATCH', `${PREFIX}:*`, 'COUNT', 10_000, 'TYPE', 'stream')) as [string, string[]];
    cursor = next;
    out.push(...keys);
  } while (cursor !== '0');
  return out;
}

interface RowSpec {
  op: Op;
  kind: Kind;
  label: string;
  on: Server;
  requests: () => LoadRequest;
  /** A fixed number of requests (each its own plan or order) instead of the duration; the warm-up takes warm. */
  amount?: number;
  warm?: number;
}

/** Warm-up and drain, then the measured load and its drain, each window snapshotted. */
async function measureRow(conn: Redis, r: RowSpec, durationS: number, drainS: number, quick: boolean): Promise<Row> {
  const snap = async (): Promise<Snap> => {
    const at = performance.now();
    const [serviceS, selfS, machineS] = [treeCpuSeconds(r.on.pid) ?? NaN, selfCpuSeconds(), machineCpuSeconds()?.busy ?? NaN];
    const { cpuS, stats } = await redisSnapshot(conn);
    return { at, serviceS, redisS: cpuS, stats, selfS, machineS };
  };
  const base = { url: r.on.url, connections: 100, requests: r.requests };
  let streams: string[] = [];
  // Until the server is idle (under 10% of a core over 100 ms) and, for the service, every consumer group has read and acked all.
  const drain = async () => {
    const t0 = Date.now();
    for (;;) {
      const cpu0 = treeCpuSeconds(r.on.pid) ?? 0;
      await sleep(100);
      if ((treeCpuSeconds(r.on.pid) ?? 0) - cpu0 < 0.01 && (r.kind !== 'service' || (await settled(conn, streams)))) return true;
      if (Date.now() - t0 > drainS * 1000) return false;
    }
  };
  await runLoad({ ...base, durationS: quick ? 1 : 2, amount: r.warm });
  if (r.kind === 'service') streams = await streamsOf(conn);
  await drain();
  let first: Promise<Snap> | undefined;
  const load = await runLoad({ ...base, durationS, amount: r.amount, onStart: () => (first = snap()) });
  const [s0, s1] = [await first!, await snap()];
  const ok = await drain();
  const s2 = await snap();
  const n = load.total;
  const [lw, dw] = [window(s0, s1, n), window(s1, s2, n)];
  const all = Object.entries(statsDelta(s0.stats, s2.stats)).filter(([k]) => !OWN.has(k));
  const row: Row = {
    op: r.op,
    kind: r.kind,
    label: r.label,
    requests: n,
    statuses: load.statusCodes,
    errors: load.errors,
    rps: n / lw.s,
    p99: load.p99,
    load: lw,
    drain: dw,
    total: { s: lw.s + dw.s, serviceUs: lw.serviceUs + dw.serviceUs, redisUs: lw.redisUs + dw.redisUs, commands: lw.commands + dw.commands },
    settled: ok,
    otherShare: (s1.machineS - s0.machineS - (s1.serviceS - s0.serviceS) - (s1.redisS - s0.redisS) - (s1.selfS - s0.selfS)) / lw.s,
    commands: Object.fromEntries(all.map(([k, v]) => [k, [v.calls / n, v.usec / n]])),
  };
  console.log(
    `[bench] ${r.op} / ${r.label}: ${fmtInt(row.rps)} req/s, service ${fmtNum(row.total.serviceUs, 0)} µs, Redis ${fmtNum(row.total.redisUs, 0)} µs, ` +
      `${fmtNum(row.total.commands, 1)} commands per request${ok ? '' : ' (drain NOT settled)'}, ${statusText(row.statuses)}`,
  );
  return row;
}

// ---------------------------------------------------------------------------------------------
// Fixtures: what the rows use up (plans to pay, orders to open, inboxes to pull), made through the service first

/** Each of `n` requests through the service (50 in flight, answers read): the body of each 2xx answer, the rest left out. */
async function each<T>(port: number, n: number, req: (i: number) => LoadRequest) {
  const out: { i: number; body: T }[] = [];
  await forEachLimit(n, 50, async (i) => {
    const r = req(i);
    const a = await httpOn(agent, port, r.method ?? 'POST', r.path ?? '/', r.headers, r.body).catch(() => undefined);
    if (a && a.status >= 200 && a.status < 300) out.push({ i, body: JSON.parse(a.body) as T });
  });
  return out.sort((x, y) => x.i - y.i);
}
const agent = new Agent({ keepAlive: true, maxSockets: 64 });

/** `n` orders of the bench merchant, each with a PENDING quickpay plan of its payer (one of `payers`); a margin for a busy machine's 503s. */
async function makePlans(port: number, n: number, payers: string[], tag: string) {
  const tokens = bearerTokens(payers);
  const orders = await each<{ orderId: string }>(port, Math.ceil(n * 1.05), (i) => signedOrder(`${tag}-${i}`, payers[i % payers.length]));
  const plans = await each<{ planId: string }>(port, orders.length, (j) => ({
    method: 'POST',
    path: `/orders/${orders[j].body.orderId}/payment-plans`,
    headers: { ...JSON_BODY, authorization: tokens[orders[j].i % payers.length] },
    body: JSON.stringify({ instructions: [{ method: 'quickpay', amount: 1200 }] }),
  }));
  if (plans.length < n) throw new Error(`only ${plans.length} of ${n} plans for pay could be made`);
  return plans.slice(0, n).map((p) => ({ planId: p.body.planId, payer: orders[p.i].i % payers.length }));
}

/** `n` reservations of product `open` by new buyers, and the order id each was answered: orders not stored yet. */
async function makeReservations(port: number, activity: string, n: number, tag: string) {
  const tokens = bearerTokens(Array.from({ length: Math.ceil(n * 1.05) }, (_, i) => `op-${tag}-${i}`));
  const made = await each<{ orderId: string }>(port, tokens.length, (i) => ({
    method: 'POST',
    path: `/seckill/activities/${activity}/products/open/reservations`,
    headers: { ...JSON_BODY, authorization: tokens[i] },
    body: JSON.stringify({ quantity: 1, requestId: 'open' }),
  }));
  if (made.length < n) throw new Error(`only ${made.length} of ${n} reservations for open could be made`);
  return made.slice(0, n).map((m) => ({ orderId: m.body.orderId, token: tokens[m.i] }));
}

let writes = 0;
const writeRequest = (account: string): LoadRequest => ({
  method: 'POST',
  path: '/messages',
  headers: { ...JSON_BODY, 'x-service-token': BENCH_SERVICE_TOKEN },
  body: JSON.stringify(message(account, writes++, new Date().toISOString())),
});

// ---------------------------------------------------------------------------------------------
// Rows: per operation the service's requests and, for each floor row, the floor's

type FloorServer = 'seckill' | 'red-envelopes' | 'red-envelopes-credit' | 'pay' | 'messages';
const FLOOR_ROWS: Record<Op, { server: FloorServer; kind: Kind; label: string }[]> = {
  reserve: [
    { server: 'seckill', kind: 'floor', label: 'floor: same work (reserve script, buyer index)' },
    { server: 'seckill', kind: 'script', label: 'reserve script alone (reserve-5.lua)' },
  ],
  grab: [
    { server: 'red-envelopes-credit', kind: 'floor', label: 'floor: same work (JWT check, grab script, its credit and settle inline)' },
    { server: 'red-envelopes', kind: 'script', label: 'grab script alone (grab-6.lua; with the JWT check, no credit)' },
  ],
  open: [],
  reopen: [],
  listing: [{ server: 'seckill', kind: 'floor', label: 'floor: GET of the cached page' }],
  pay: [{ server: 'pay', kind: 'floor', label: 'floor: the same thirteen scripts (bench/pay-floor-server.ts)' }],
  write: [{ server: 'messages', kind: 'floor', label: "floor: the service's MessagesService.write on bare Fastify" }],
  pull: [{ server: 'messages', kind: 'floor', label: "floor: the service's MessagesService.pull on bare Fastify" }],
};

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

interface Result {
  rows: Row[];
  warnings: string[];
  drainS: number;
}

const rowOf = (rows: Row[], op: Op, ...kinds: Kind[]) => kinds.map((k) => rows.find((r) => r.op === op && r.kind === k)).find(Boolean);

/** The goals: `a` ÷ `b` of service or Redis µs per request over load + drain, with a key for the JSON. */
function goalFigures(rows: Row[]): { key: string; ratio?: number; line: GoalLine }[] {
  const out: { key: string; ratio?: number; line: GoalLine }[] = [];
  const figure = (key: string, goal: string, field: 'serviceUs' | 'redisUs', a?: Row, b?: Row, limit?: number) => {
    if (!a || !b) return;
    const r = a.total[field] / b.total[field];
    const measured = `${fmtNum(r, 2)} (${fmtNum(a.total[field], 0)} µs ÷ ${fmtNum(b.total[field], 0)} µs)`;
    const line = limit === undefined ? { goal, target: 'information', measured, info: true } : { goal, target: `≤ ${limit}`, measured, met: r <= limit };
    out.push({ key, ratio: r, line });
  };
  for (const op of OPS)
    figure(
      `service_${op}`,
      `Service CPU per request, its background counted, ÷ the same-work floor: ${OP_LABEL[op]}`,
      'serviceUs',
      rowOf(rows, op, 'service'),
      rowOf(rows, op, 'floor', 'script'),
      op === 'pull' ? undefined : GOAL.service,
    );
  const [reserve, script] = [rowOf(rows, 'reserve', 'service'), rowOf(rows, 'reserve', 'script')];
  figure('redis_reserve', 'Redis CPU per reservation (its background included) ÷ the reserve script alone', 'redisUs', reserve, script, GOAL.reserveRedis);
  figure(
    'redis_grab',
    'Redis CPU per grab, its credit included ÷ the grab script alone',
    'redisUs',
    rowOf(rows, 'grab', 'service'),
    rowOf(rows, 'grab', 'script'),
    GOAL.grabRedis,
  );
  // A reservation's order is stored at its first use: what that use costs beyond a checkout (open less reopen) is the reservation's, spent later.
  const [opened, reopened] = [rowOf(rows, 'open', 'service'), rowOf(rows, 'reopen', 'service')];
  if (reserve && opened && reopened && script) {
    const [a, b, s] = [reserve.total.redisUs, opened.total.redisUs - reopened.total.redisUs, script.total.redisUs];
    out.push({
      key: 'redis_reserve_with_order',
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

export const { main } = defineBench<Result>({
  name: 'costs',
  prefix: PREFIX,
  sections: OPS,
  options: { duration: 'value', 'drain-timeout': 'value', 'no-pin': 'flag' },
  serviceEnv: SERVICE_ENV,
  async run(ctx) {
    const ops = OPS.filter((op) => ctx.has(op));
    if (ops.includes('reopen') && !ops.includes('open')) throw new Error('--only: reopen opens the orders open stored, so it needs open too');
    const durationS = Number(ctx.opts.duration ?? ctx.seconds(6, 3));
    const drainS = Number(ctx.opts['drain-timeout'] ?? ctx.seconds(30, 15));
    const split = ctx.opts['no-pin'] ? undefined : cpuSplit();
    if (split) pinProcess(split.rest);
    ctx.env['CPU placement'] = split
      ? `each server under test alone on CPU ${split.server}; autocannon (this process) and redis-server on CPU ${split.rest} (taskset)`
      : 'not pinned: servers, autocannon and redis-server share every CPU';
    ctx.env.Load = `100 connections, ${durationS} s per row after a warm-up (pay, open: a fixed number of requests), drain up to ${drainS} s`;
    const conn = new Redis(ctx.redis.url, { maxRetriesPerRequest: 1 });
    const svc = await ctx.service('service');
    const rows: Row[] = [];
    const warnings: string[] = [];
    const tag = Date.now().toString(36);
    const [activity, rain] = [`a${tag}`, `r${tag}`];
    const listers = Array.from({ length: 100 }, (_, i) => `lister-${i}`);
    const readers = Array.from({ length: 100 }, (_, i) => `reader-${tag}-${i}`);
    const payers = Array.from({ length: 1000 }, (_, i) => `payer-${i}`);
    const [listerTokens, readerTokens, payerTokens] = [bearerTokens(listers), bearerTokens(readers), bearerTokens(payers)];
    const payCount = ctx.seconds(6000, 1500);
    const openCount = ctx.seconds(20000, 6000);
    const fixed = (count: number) => ({ warm: Math.round(count / 6), amount: count - Math.round(count / 6) });
    const has = (...o: Op[]) => o.some((x) => ops.includes(x));
    if (has('reserve', 'listing', 'open'))
      await createActivity(svc.port, activity, [
        { productId: 'hot', stock: 10_000_000 },
        { productId: 'open', stock: 10_000_000 },
        ...LISTED.map((productId) => ({ productId, stock: 1000 })),
      ]);
    const opens = has('open') ? await makeReservations(svc.port, activity, openCount, tag) : [];
    if (has('grab')) await createRain(svc.port, rain, ctx.seconds(600_000, 200_000));
    const plans = has('pay')
      ? { service: await makePlans(svc.port, payCount, payers, `cs${tag}`), floor: await makePlans(svc.port, payCount, payers, `cf${tag}`) }
      : undefined;
    if (has('pull')) {
      const w = await each(svc.port, 25 * readers.length, (i) => writeRequest(readers[i % readers.length]));
      if (w.length !== 25 * readers.length) throw new Error(`inboxes: ${w.length} of ${25 * readers.length} messages written`);
    }

    /** The requests of `op` for the service or a floor (`script`: the script-alone route): each call the next request. */
    const requestsOf = (op: Op, kind: Kind): (() => LoadRequest) => {
      let n = 0;
      const floor = kind !== 'service';
      // A user per request and row: a row must not meet the grabs of another row's users (ALREADY_GRABBED is a cheaper path).
      const newUser = () => bearerTokens([`u-${op}-${kind}-${tag}-${n++}`])[0];
      const next: Record<Op, () => LoadRequest> = {
        reserve: () => {
          const i = n++;
          return floor
            ? {
                method: 'POST',
                path: `/${kind === 'script' ? 'reserve' : 'reserve-order'}/${activity}/hot`,
                headers: JSON_BODY,
                body: JSON.stringify({ account: `${kind[0]}${i}`, quantity: 1, requestId: `r${i}` }),
              }
            : {
                method: 'POST',
                path: `/seckill/activities/${activity}/products/hot/reservations`,
                headers: { ...JSON_BODY, authorization: newUser() },
                body: JSON.stringify({ quantity: 1, requestId: `r${i}` }),
              };
        },
        open: () => {
          const o = opens[Math.min(n++, opens.length - 1)];
          return { method: 'GET', path: `/orders/${o.orderId}`, headers: { authorization: o.token } };
        },
        reopen: () => next.open(),
        grab: () => ({ method: 'POST', path: floor ? `/grab/${rain}` : `/red-envelopes/activities/${rain}/grab`, headers: { authorization: newUser() } }),
        listing: (): LoadRequest => {
          const i = n++ % listers.length;
          return floor
            ? { method: 'GET', path: `/products/${activity}?account=${listers[i]}&page=1&size=8`, headers: {} }
            : { method: 'GET', path: `/seckill/activities/${activity}/products?page=1&size=8`, headers: { authorization: listerTokens[i] } };
        },
        pay: (): LoadRequest => {
          const list = floor ? plans!.floor : plans!.service;
          const p = list[Math.min(n++, list.length - 1)];
          return floor
            ? { method: 'POST', path: `/pay/${p.planId}`, headers: {} }
            : { method: 'POST', path: `/payment-plans/${p.planId}/pay`, headers: { authorization: payerTokens[p.payer] } };
        },
        write: () => writeRequest(`cw-${n++ % 10_000}`),
        pull: () => {
          const i = n++ % readers.length;
          return { method: 'GET', path: '/messages?limit=20', headers: { authorization: readerTokens[i], 'x-account-id': readers[i] } };
        },
      };
      return next[op];
    };

    const floors = new Map<FloorServer, Server>();
    for (const server of new Set(ops.flatMap((op) => FLOOR_ROWS[op].map((x) => x.server)))) {
      const env = {
        ...(server === 'messages' || server.startsWith('red-envelopes') ? fullEnv(0, ctx.redis.url, PREFIX, SERVICE_ENV) : {}),
        PRODUCTS: ['hot', ...LISTED].join(','),
        ORDERS_EVENTS_MAXLEN: SERVICE_ENV.ORDERS_EVENTS_MAXLEN,
        ...(server.startsWith('red-envelopes') ? { FLOOR_IDENTITY: 'jwt', FLOOR_CREDIT: server === 'red-envelopes-credit' ? 'inline' : '' } : {}),
      } as Record<string, string>;
      floors.set(server, await ctx.floor(`${server}-floor`, `${server.replace('-credit', '')}-floor-server.ts`, env));
    }
    const servers = [svc, ...floors.values()];
    if (split) servers.forEach((x) => pinProcess(split.server, x.pid));
    // Only the server of the row runs; the service's rows come first and it stays stopped through the floors' rows, or
    // its consumers would take up what the floors leave (order events, credit entries) inside later windows.
    const only = (running: Server) => servers.forEach((x) => process.kill(x.pid, x === running ? 'SIGCONT' : 'SIGSTOP'));
    const amounts = (op: Op) => (op === 'pay' ? fixed(payCount) : op === 'open' || op === 'reopen' ? fixed(openCount) : {});
    try {
      only(svc);
      for (const op of ops)
        rows.push(
          await measureRow(
            conn,
            { op, kind: 'service', label: 'service', on: svc, requests: requestsOf(op, 'service'), ...amounts(op) },
            durationS,
            drainS,
            ctx.quick,
          ),
        );
      for (const op of ops)
        for (const x of FLOOR_ROWS[op]) {
          const on = floors.get(x.server)!;
          only(on);
          rows.push(
            await measureRow(
              conn,
              { op, kind: x.kind, label: x.label, on, requests: requestsOf(op, x.kind), ...(op === 'pay' ? fixed(payCount) : {}) },
              durationS,
              drainS,
              ctx.quick,
            ),
          );
        }
    } finally {
      servers.forEach((x) => process.kill(x.pid, 'SIGCONT'));
    }
    // A rain that ran dry answers NONE_LEFT, a cheaper path. (Twice: the first request after the long stop may meet a closed keep-alive socket.)
    const left = () => reconciliation(svc.port, rain).then((r) => r.left.count);
    if (has('grab') && (await left().catch(left)) === 0) warnings.push('The rain ran dry during the grab rows: their figures are not those of grabs.');
    for (const r of rows.filter((x) => x.errors || Object.keys(x.statuses).some((code) => !code.startsWith('2'))))
      warnings.push(`${r.op} / ${r.label}: answers ${statusText(r.statuses)}${r.errors ? `, ${r.errors} errors` : ''}.`);
    conn.disconnect();
    await Promise.all(servers.map((x) => x.stop()));
    rows.sort((a, b) => OPS.indexOf(a.op) - OPS.indexOf(b.op));
    return { rows, warnings, drainS };
  },
  goals: (r) => goalFigures(r.rows).map((g) => g.line),
  report(r) {
    const w = (row: Row, key: keyof Omit<Window, 's'>, digits: number) =>
      `${fmtNum(row.load[key], digits)} + ${fmtNum(row.drain[key], digits)} = **${fmtNum(row.total[key], digits)}**`;
    const top = (row: Row) =>
      Object.entries(row.commands)
        .sort((a, b) => b[1][1] - a[1][1])
        .slice(0, 6)
        .map(([k, [n, us]]) => `${k} ${fmtNum(us, 1)} µs / ${fmtNum(n, 2)}`)
        .join(', ');
    return [
      ...(r.warnings.length ? ['**Warnings.**', '', ...r.warnings.map((x) => `- ${x}`), ''] : []),
      '## Per request',
      '',
      markdownTable(
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
          'top commands by Redis µs (µs / calls)',
        ],
        r.rows.map((x) => [
          x.op,
          x.label,
          fmtInt(x.rps),
          x.p99,
          w(x, 'serviceUs', 0),
          w(x, 'redisUs', 1),
          w(x, 'commands', 1),
          `${fmtNum(x.load.s, 1)} + ${fmtNum(x.drain.s, 1)}${x.settled ? '' : ' (not settled)'}`,
          fmtNum(x.otherShare, 2),
          statusText(x.statuses) + (x.errors ? `, errors ${x.errors}` : ''),
          top(x),
        ]),
      ),
      '',
      '## How it is measured',
      '',
      `- Service CPU: /proc of the server and its children; Redis CPU: INFO cpu; commands: INFO commandstats of every client, this bench's own INFO, XINFO and SCAN left out; all divided by the requests of the load.`,
      `- Drain: from the load's end until the server is idle (under 10% of a core over 100 ms) and, for the service, every consumer group of every stream has read and acked all, at most ${r.drainS} s. The floors do no background work.`,
      "- open: a reservation's order is stored at its first use (checkout or first plan) or when the reservation is released; the open row opens orders of reservations made before the rows, the reopen row the same orders again. The information line adds what a first use costs beyond that checkout to the reserve row.",
      '',
    ];
  },
  ratios: (r) => Object.fromEntries(goalFigures(r.rows).map((g) => [`${g.key}_floorOverService`, jsonNum(g.ratio ? 1 / g.ratio : undefined)])),
  json: (r) => ({ rows: r.rows, goalRatios: Object.fromEntries(goalFigures(r.rows).map((g) => [g.key, jsonNum(g.ratio)])) }),
});
