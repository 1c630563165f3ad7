/**
 * scale: k instances of the built service against one redis-server, then against a Redis Cluster of m masters (AOF off),
 * for reserve (one product of 10,000,000 units: 1 shard on one Redis, m on the cluster, perUserLimit 1) and grab (a rain
 * in 1 or m sub-pools, its credits included). Each instance gets its own load generator process
 * (this file, run with SCALE_LOADER: see runLoader), every request a new user. Per k: req/s, latency, each master's core use and, per
 * operation, Redis CPU µs by master, commands, service CPU µs and the projected ceiling (1 / Redis CPU per operation).
 * m = max(3, cores / 4); k up to (cores − m) / 2, every party pinned to a core of its own when they fit.
 *
 * Options: --quick, --k 1,2,4, --masters N (≥ 3), --only reserve,grab, --duration S, --no-pin, --no-floors, --dist DIR.
 */
import { readFileSync, writeFileSync } from 'node:fs';
import { availableParallelism } from 'node:os';
import { join } from 'node:path';
import { startBenchCluster } from './lib/redis-server';
import { type CommandStat, commandStats, statsDelta } from './lib/command-stats';
import { bearerTokens, ROOT } from './lib/full-stack';
import { type LoadRequest, type LoadSummary, runLoad } from './lib/load';
import { cpuSeconds, pinProcess, selfCpuSeconds, spawnManaged } from './lib/proc';
import { fmtInt, fmtNum, type GoalLine, markdownTable, statusText } from './lib/report';
import { type BenchContext, defineBench, type Target } from './lib/scenario';
import { createRain, creditedAll, reconciliation } from './red-envelopes';
import { createActivity } from './seckill';

const OPS = ['reserve', 'grab'] as const;
type Op = (typeof OPS)[number];
const GOAL_SHARE_AT_3 = 0.45;
/** What the operations should reach on a 16-core machine (one Redis; the cluster against one master). */
const LARGE = { cores: 16, reserveRps: 15_000, grabRps: 25_000, clusterGain: 3 };
const K_STEPS = [1, 2, 4, 6, 8, 12, 16, 24, 32];
const HEADROOM = 0.7;
const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, Math.max(0, ms)));
const sum = (v: number[]) => v.reduce((s, x) => s + x, 0);

interface Plan {
  cores: number;
  ks: number[];
  masters: number;
  /** CPU of each master, instance and load generator; absent: unpinned. */
  cpus?: { redis: string[]; service: string[]; loader: string[] };
  needs: string;
}

/** Masters and instance counts for `cores`: m = max(3, cores / 4); k up to (cores − m) / 2, so that each party gets a core. */
export function planFor(cores: number, o: { ks?: number[]; masters?: number; pin: boolean }): Plan {
  const mastersFor = (c: number) => Math.max(3, Math.floor(c / 4));
  const masters = o.masters ?? mastersFor(cores);
  const kMax = Math.floor((cores - masters) / 2);
  const ks = o.ks ?? (kMax >= 1 ? K_STEPS.filter((k) => k <= kMax) : [1]);
  const top = Math.max(...ks);
  const fits = masters + 2 * top <= cores;
  const ids = (from: number, n: number) => Array.from({ length: n }, (_, i) => String(from + i));
  const cpus = fits && o.pin ? { redis: ids(0, masters), service: ids(masters, top), loader: ids(masters + top, top) } : undefined;
  const large = { masters: mastersFor(LARGE.cores), ks: K_STEPS.filter((k) => k <= Math.floor((LARGE.cores - mastersFor(LARGE.cores)) / 2)) };
  const needs =
    `The full run (k = ${large.ks.join(', ')} against one Redis and a ${large.masters}-master cluster, every party pinned to a core of its own) needs ${LARGE.cores} cores. This machine has ${cores}: ` +
    (fits
      ? `k = ${ks.join(', ')} on one Redis and on ${masters} masters, each party on its own core${cpus ? '' : ' (pinning off: --no-pin)'}.`
      : `k = ${ks.join(', ')} and ${masters} masters, every process sharing the ${cores} cores unpinned (they would need ${masters + 2 * top}), so req/s and core use say what the cores allow, not what Redis can do; the per-operation costs and the busiest master's share do not depend on it.`);
  return { cores, ks, masters, cpus, needs };
}

interface Topology {
  name: 'one Redis' | 'cluster';
  urls: string[];
  pids: number[];
  redisEnv: Record<string, string>;
  spread: number;
}

export interface Row {
  topology: Topology['name'];
  target: 'service' | 'floor';
  masters: number;
  op: Op;
  k: number;
  rps: number;
  p50: number;
  p99: number;
  statuses: Record<string, number>;
  errors: number;
  requests: number;
  /** Each master's CPU over the load, as a share of one core. */
  redisCoreUse: number[];
  /** Each master's CPU µs per operation, over the load and what it left behind (credits, events). */
  redisUsPerOp: number[];
  commandsPerOp: number;
  topCommands: [string, number][];
  serviceUsPerOp: number;
  busiestShare: number;
  ceilingPerMaster: number[];
  ceiling: number;
  ranDry?: boolean;
}

/** One load generator process per server (pinned when `cpus`), started together once all are ready; each one's result. */
async function runLoaders(
  servers: Target[],
  spec: Omit<LoaderSpec, 'url' | 'users' | 'out'>,
  tag: string,
  ctx: BenchContext,
  cpus?: string[],
  onStart = () => {},
) {
  const procs = servers.map((s, i) => {
    const full: LoaderSpec = { ...spec, url: s.url, users: `${tag}-${i}-`, out: join(ctx.workDir, `${tag}-${i}.json`) };
    const p = spawnManaged({
      name: `load generator ${tag}-${i}`,
      command: process.execPath,
      args: ['--import', 'tsx', __filename],
      cwd: ROOT,
      env: { ...process.env, SCALE_LOADER: JSON.stringify(full) },
      cpus: cpus?.[i],
    });
    return { p, full, exited: new Promise<void>((done) => p.child.once('exit', () => done())) };
  });
  const t0 = Date.now();
  while (!procs.every((x) => x.p.tail().includes(READY))) {
    procs.forEach((x) => x.p.assertAlive());
    if (Date.now() - t0 > 60_000) throw new Error('load generators not ready after 60 s');
    await sleep(20);
  }
  procs.forEach((x) => x.p.child.kill('SIGUSR2'));
  onStart();
  await Promise.all(procs.map((x) => x.exited));
  return procs.map((x) => {
    try {
      return JSON.parse(readFileSync(x.full.out, 'utf8')) as LoaderResult;
    } catch {
      throw new Error(`${x.p.name} left no result — last output:\n${x.p.tail()}`);
    }
  });
}

interface Snapshot {
  redisCpu: (number | undefined)[];
  serviceCpu: (number | undefined)[];
  stats: Map<string, CommandStat>[];
}
const snapshot = async (t: Topology, servers: Target[]): Promise<Snapshot> => ({
  stats: await Promise.all(t.urls.map((u) => commandStats([u]))),
  redisCpu: t.pids.map((p) => cpuSeconds(p)),
  serviceCpu: servers.map((s) => cpuSeconds(s.pid)),
});
const diff = (a: (number | undefined)[], b: (number | undefined)[]) => a.map((x, i) => (x === undefined || b[i] === undefined ? NaN : b[i] - x));

/** One measured run of `op` on `servers`: a warm-up, the load, then what it left behind (`settle`). */
async function measure(
  ctx: BenchContext,
  t: Topology,
  plan: Plan,
  servers: Target[],
  op: Op,
  activityId: string,
  settle: () => Promise<void>,
  target: Row['target'],
) {
  const k = servers.length;
  const tag = `${t.name === 'cluster' ? 'c' : 's'}${k}${op[0]}${target[0]}${Date.now().toString(36)}`;
  const spec = { op: target === 'floor' ? (`${op}-floor` as const) : op, activityId, connections: 100 };
  const durationS = Number(ctx.opts.duration ?? ctx.seconds(8, 3));
  await runLoaders(servers, { ...spec, durationS: ctx.seconds(2, 1) }, `${tag}w`, ctx, plan.cpus?.loader);
  await settle();
  let first: Promise<Snapshot> | undefined;
  const results = await runLoaders(servers, { ...spec, durationS }, tag, ctx, plan.cpus?.loader, () => (first = snapshot(t, servers)));
  const [s0, s1] = [await first!, await snapshot(t, servers)];
  await settle();
  const s2 = await snapshot(t, servers);
  const loadS = Math.max(...results.map((r) => r.load.durationS));
  const requests = sum(results.map((r) => r.load.total));
  const statuses: Record<string, number> = {};
  for (const r of results) for (const [code, n] of Object.entries(r.load.statusCodes)) statuses[code] = (statuses[code] ?? 0) + n;
  const commands = new Map<string, number>();
  for (const [i] of t.urls.entries())
    for (const [name, v] of Object.entries(statsDelta(s0.stats[i], s2.stats[i]))) commands.set(name, (commands.get(name) ?? 0) + v.calls);
  const redisUsPerOp = diff(s0.redisCpu, s2.redisCpu).map((s) => (1e6 * s) / requests);
  const p50s = results.map((r) => r.load.p50).sort((a, b) => a - b);
  const row: Row = {
    topology: t.name,
    target,
    masters: t.urls.length,
    op,
    k,
    rps: sum(results.map((r) => r.load.total / r.load.durationS)),
    p50: p50s[Math.floor((p50s.length - 1) / 2)],
    p99: Math.max(...results.map((r) => r.load.p99)),
    statuses,
    errors: sum(results.map((r) => r.load.errors)),
    requests,
    redisCoreUse: diff(s0.redisCpu, s1.redisCpu).map((s) => s / loadS),
    redisUsPerOp,
    commandsPerOp: sum([...commands.values()]) / requests,
    topCommands: [...commands]
      .sort((a, b) => b[1] - a[1])
      .slice(0, 8)
      .map(([name, calls]) => [name, calls / requests]),
    serviceUsPerOp: (1e6 * sum(diff(s0.serviceCpu, s2.serviceCpu))) / requests,
    busiestShare: Math.max(...redisUsPerOp) / sum(redisUsPerOp),
    ceilingPerMaster: redisUsPerOp.map((us) => 1e6 / us),
    ceiling: 1e6 / Math.max(...redisUsPerOp),
  };
  console.log(
    `[bench] ${t.name}, k=${k}, ${op}${target === 'floor' ? ' floor' : ''}: ${fmtInt(row.rps)} req/s, Redis µs/op ${redisUsPerOp.map((u) => fmtNum(u, 0)).join(' / ')}, ${statusText(statuses)}`,
  );
  return row;
}

/** Every k of the plan on one topology (instances added as k grows), each operation at each k; on one Redis its floors too. */
async function onTopology(ctx: BenchContext, t: Topology, plan: Plan): Promise<Row[]> {
  const rows: Row[] = [];
  const services: Target[] = [];
  const floors = !ctx.opts['no-floors'] && t.name === 'one Redis';
  const pin = (cpu: string | undefined, pid: number) => cpu !== undefined && pinProcess(cpu, pid);
  t.pids.forEach((pid, i) => pin(plan.cpus?.redis[i], pid));
  const durationS = Number(ctx.opts.duration ?? ctx.seconds(8, 3));
  try {
    for (const k of plan.ks) {
      const added = await Promise.all(Array.from({ length: k - services.length }, (_, j) => ctx.service(`${t.name[0]}${services.length + j}`, {}, t.redisEnv)));
      added.forEach((s, j) => pin(plan.cpus?.service[services.length + j], s.pid));
      services.push(...added);
      const port = services[0].port;
      for (const op of OPS.filter((x) => ctx.has(x))) {
        const activityId = `${op[0]}${t.spread}k${k}${Date.now().toString(36)}`;
        let settle = () => sleep(1000);
        if (op === 'reserve') await createActivity(port, activityId, [{ productId: 'hot', stock: 10_000_000, shards: t.spread }], { perUserLimit: 1 });
        else {
          // 8,000 grabs/s per instance over the warm-up and the load, with a margin.
          const count = Math.min(1_000_000, Math.max(20_000, Math.ceil(8000 * k * (durationS + ctx.seconds(2, 1)) * 1.25)));
          await createRain(port, activityId, count * (floors ? 2 : 1), { subPools: t.spread });
          settle = () => creditedAll(port, [activityId], 180_000);
        }
        const opRows = [await measure(ctx, t, plan, services, op, activityId, settle, 'service')];
        if (floors) {
          const script = op === 'reserve' ? 'seckill-floor-server.ts' : 'red-envelopes-floor-server.ts';
          const servers = await Promise.all(
            Array.from({ length: k }, (_, i) => ctx.floor(`${op}-floor-${i}`, script, { PRODUCTS: 'hot', ORDERS_EVENTS_MAXLEN: '1000000' })),
          );
          servers.forEach((s, i) => pin(plan.cpus?.service[i], s.pid));
          try {
            opRows.push(await measure(ctx, t, plan, servers, op, activityId, settle, 'floor'));
          } finally {
            await Promise.all(servers.map((f) => f.stop()));
          }
        }
        const dry = op === 'grab' && (await reconciliation(port, activityId)).left.count === 0;
        rows.push(...opRows.map((r) => ({ ...r, ...(dry ? { ranDry: true } : {}) })));
      }
    }
  } finally {
    await Promise.all(services.map((s) => s.stop()));
  }
  return rows;
}

const top = (rows: Row[], topology: Row['topology'], op: Op, target: Row['target'] = 'service') =>
  rows.filter((r) => r.topology === topology && r.op === op && r.target === target).sort((a, b) => b.k - a.k)[0];
const noun = (op: Op) => (op === 'reserve' ? 'reservation' : 'grab');

function goals({ rows, plan }: { rows: Row[]; plan: Plan }): GoalLine[] {
  const lines: GoalLine[] = [];
  const target = plan.masters === 3 ? GOAL_SHARE_AT_3 : (GOAL_SHARE_AT_3 * 3) / plan.masters;
  for (const op of OPS) {
    const r = top(rows, 'cluster', op);
    if (r)
      lines.push({
        goal: `${r.masters}-master cluster, ${op === 'reserve' ? `the hot product in ${r.masters} shards` : `the rain in ${r.masters} sub-pools`}: the busiest master's share of a${op === 'reserve' ? ' reservation' : ' grab'}'s Redis CPU (k = ${r.k})`,
        target: `≤ ${fmtNum(target, 2)}${plan.masters === 3 ? '' : ` (${GOAL_SHARE_AT_3} × 3 / ${plan.masters} masters)`}`,
        measured: `${fmtNum(r.busiestShare, 2)} (µs per op by master: ${r.redisUsPerOp.map((u) => fmtNum(u, 0)).join(' / ')})`,
        met: r.busiestShare <= target,
      });
  }
  for (const op of OPS) {
    const [one, cl] = [top(rows, 'one Redis', op), top(rows, 'cluster', op)];
    if (one || cl)
      lines.push({
        goal: `Projected ceiling of a ${noun(op)} (1 / Redis CPU per op): one Redis; the cluster (its busiest master); each master`,
        target: 'reported',
        measured: `${one ? `${fmtInt(one.ceiling)}/s` : 'n/a'}; ${cl ? `${fmtInt(cl.ceiling)}/s on ${cl.masters} masters; ${cl.ceilingPerMaster.map(fmtInt).join(' / ')}/s` : 'n/a'}`,
        info: true,
      });
  }
  for (const op of OPS) {
    const [sv, fl] = [top(rows, 'one Redis', op), top(rows, 'one Redis', op, 'floor')];
    if (sv && fl)
      lines.push({
        goal: `One Redis, ${op}: Redis CPU per operation, the service ÷ the floor (the ${op} script alone on bare Fastify${op === 'grab' ? ', credited by the instances' : ''}), k = ${sv.k}`,
        target: 'information',
        measured: `${fmtNum(sv.redisUsPerOp[0] / fl.redisUsPerOp[0], 2)} (${fmtNum(sv.redisUsPerOp[0], 0)} ÷ ${fmtNum(fl.redisUsPerOp[0], 0)} µs; commands ${fmtNum(sv.commandsPerOp, 1)} ÷ ${fmtNum(fl.commandsPerOp, 1)})`,
        info: true,
      });
  }
  const refused = (r: Row) => 1 - sum(Object.entries(r.statuses).map(([code, n]) => (code.startsWith('2') ? n : 0))) / Math.max(1, r.requests);
  const worst = [...rows].sort((a, b) => refused(b) - refused(a))[0];
  if (worst)
    lines.push({
      goal: 'Every run measured the operation itself: answers 2xx (a refusal is a cheaper path), no socket errors',
      target: '≥ 99% 2xx in every row; 0 errors',
      measured: `worst: ${worst.topology}, k = ${worst.k}, ${worst.op}${worst.target === 'floor' ? ' floor' : ''}: ${fmtNum(100 * (1 - refused(worst)), 1)}% 2xx; errors ${fmtInt(sum(rows.map((r) => r.errors)))}`,
      met: refused(worst) <= 0.01 && rows.every((r) => r.errors === 0),
    });
  const large = plan.cores >= LARGE.cores && plan.cpus !== undefined;
  for (const op of OPS) {
    const [one, cl] = [top(rows, 'one Redis', op), top(rows, 'cluster', op)];
    if (!one) continue;
    const want = op === 'reserve' ? LARGE.reserveRps : LARGE.grabRps;
    lines.push({
      goal: `One Redis on its own core, ${LARGE.cores}+ cores: ${noun(op)}s/s at the largest k`,
      target: `≥ ${fmtInt(want)}/s`,
      measured: `${fmtInt(one.rps)}/s at k = ${one.k} (Redis at ${fmtNum(one.redisCoreUse[0], 2)} of a core; projected ceiling ${fmtInt(one.ceiling)}/s)${large ? '' : `; ${plan.cores} cores here, not measurable`}`,
      met: large ? one.rps >= want : undefined,
    });
    if (cl)
      lines.push({
        goal: `${cl.masters}-master cluster against one Redis, ${op}: req/s at the largest k`,
        target: `≥ ${LARGE.clusterGain}× on ${LARGE.cores}+ cores`,
        measured: `${fmtNum(cl.rps / one.rps, 2)}× (${fmtInt(cl.rps)} / ${fmtInt(one.rps)}); projected ceilings ${fmtNum(cl.ceiling / one.ceiling, 2)}×${large ? '' : '; not measurable here'}`,
        met: large ? cl.rps / one.rps >= LARGE.clusterGain : undefined,
      });
  }
  return lines;
}

/** Masters and instances for a sale or a rain from this run: Redis and service CPU per operation (k = 1) at HEADROOM of a core, × the cluster's imbalance. */
export function capacity(rows: Row[]) {
  const targets = [
    { what: '10k-QPS sale', op: 'reserve' as Op, rate: 10_000 },
    { what: '100k-QPS sale', op: 'reserve' as Op, rate: 100_000 },
    { what: '760k-grabs/s rain', op: 'grab' as Op, rate: 760_000 },
  ];
  const pick = (topology: Row['topology'], op: Op) =>
    rows.filter((r) => r.topology === topology && r.op === op && r.target === 'service').sort((a, b) => a.k - b.k)[0];
  return targets.flatMap(({ what, op, rate }) => {
    const [one, cl] = [pick('one Redis', op), pick('cluster', op)];
    if (!one) return [];
    const imbalance = cl ? Math.max(1, cl.busiestShare * cl.masters) : 1;
    const redisCores = (rate * one.redisUsPerOp[0]) / 1e6;
    const masters = redisCores <= HEADROOM ? 1 : Math.ceil((redisCores * imbalance) / HEADROOM);
    return [
      {
        what,
        rate,
        redisUs: one.redisUsPerOp[0],
        imbalance,
        masters,
        serviceUs: one.serviceUsPerOp,
        instances: Math.ceil((rate * one.serviceUsPerOp) / 1e6 / HEADROOM),
      },
    ];
  });
}

const table = (rows: Row[]) =>
  markdownTable(
    [
      'Operation',
      'k',
      'req/s',
      'p50 / p99 ms',
      'Answers',
      'Redis core use (by master)',
      'Redis CPU µs/op (by master)',
      'Commands/op',
      'Service CPU µs/op',
      'Busiest master share',
      'Projected ceiling/s (by master; whole)',
    ],
    rows.map((r) => [
      (r.target === 'floor' ? `${r.op}: floor (the script alone)` : r.op) + (r.ranDry ? ' (rain ran dry)' : ''),
      r.k,
      fmtInt(r.rps),
      `${r.p50} / ${r.p99}`,
      statusText(r.statuses) + (r.errors ? `, errors ${fmtInt(r.errors)}` : ''),
      r.redisCoreUse.map((u) => fmtNum(u, 2)).join(' / '),
      r.redisUsPerOp.map((u) => fmtNum(u, 0)).join(' / '),
      fmtNum(r.commandsPerOp, 1),
      fmtInt(r.serviceUsPerOp),
      r.masters > 1 ? fmtNum(r.busiestShare, 2) : '—',
      r.masters > 1 ? `${r.ceilingPerMaster.map(fmtInt).join(' / ')}; ${fmtInt(r.ceiling)}` : fmtInt(r.ceiling),
    ]),
  );

export const { main } = defineBench({
  name: 'scale',
  prefix: 'rpsc',
  sections: OPS,
  options: { k: 'value', masters: 'value', duration: 'value', 'no-pin': 'flag', 'no-floors': 'flag' },
  serviceEnv: { RED_ENVELOPE_MAX_COUNT: '1000000', ORDERS_EVENTS_MAXLEN: '1000000' },
  async run(ctx) {
    const ints = (v: string | true | undefined) =>
      typeof v === 'string'
        ? v
            .split(',')
            .map(Number)
            .filter((n) => Number.isInteger(n) && n > 0)
        : undefined;
    const ks = ints(ctx.opts.k);
    const plan = planFor(availableParallelism(), {
      ks: ks && [...new Set(ks)].sort((a, b) => a - b),
      masters: ints(ctx.opts.masters)?.map((m) => Math.max(3, m))[0],
      pin: !ctx.opts['no-pin'],
    });
    console.log(`[bench] scale: ${plan.needs}`);
    ctx.env['Cores (os.availableParallelism())'] = plan.cores;
    ctx.env.Placement = plan.cpus
      ? `Redis/masters on CPU ${plan.cpus.redis.join(',')}; instances on ${plan.cpus.service.join(',')}; load generators on ${plan.cpus.loader.join(',')} (taskset)`
      : 'unpinned: every process shares every core';
    const rows = await onTopology(
      ctx,
      { name: 'one Redis', urls: [ctx.redis.url], pids: [ctx.redis.process.pid], redisEnv: { REDIS_URL: ctx.redis.url }, spread: 1 },
      plan,
    );
    const cluster = await startBenchCluster({ masters: plan.masters, appendonly: false });
    try {
      rows.push(...(await onTopology(ctx, { name: 'cluster', ...cluster, spread: plan.masters }, plan)));
    } finally {
      await cluster.stop();
    }
    return { rows, plan };
  },
  goals,
  report: ({ rows, plan }, ctx) => [
    '## What ran',
    '',
    plan.needs,
    '',
    `k instances of the built service (rate limit on, raised far above the load; logging at warn), one load generator process per instance (autocannon, 100 connections, ${ctx.opts.duration ?? ctx.seconds(8, 3)} s after a warm-up), every request a new user with its own JWT. ` +
      "On one Redis each operation runs again against k floor servers (bench/seckill-floor-server.ts `/reserve`, bench/red-envelopes-floor-server.ts `/grab`: the script alone, the grabs credited by the idle instances). Redis CPU is each redis-server's CPU (/proc) over the load and what it left behind, per request answered; the projected ceiling is 1 / Redis CPU per operation (for the cluster, its busiest master's).",
    '',
    '## 1. One Redis',
    '',
    table(rows.filter((r) => r.topology === 'one Redis')),
    '',
    `## 2. A ${plan.masters}-master Redis Cluster (the hot product in ${plan.masters} shards, the rain in ${plan.masters} sub-pools)`,
    '',
    table(rows.filter((r) => r.topology === 'cluster')),
    '',
    'Top commands per operation (calls per operation, all masters):',
    '',
    ...rows.map(
      (r) =>
        `- ${r.topology}, k = ${r.k}, ${r.op}${r.target === 'floor' ? ', floor' : ''}: ${r.topCommands.map(([n, v]) => `${n} ${fmtNum(v, 2)}`).join(', ')}`,
    ),
    '',
    '## Capacity',
    '',
    `Sized from this run at ${HEADROOM} of a core per master and per instance at the peak (see docs/benchmarks.md, Capacity). Replicas come on top (one per master).`,
    '',
    markdownTable(
      ['Target', 'Operations/s', 'Redis CPU µs/op', 'Cluster imbalance', 'Masters', 'Shards or sub-pools', 'Service CPU µs/op', 'Instances (one core each)'],
      capacity(rows).map((c) => [
        c.what,
        fmtInt(c.rate),
        fmtNum(c.redisUs, 0),
        fmtNum(c.imbalance, 2),
        fmtInt(c.masters),
        fmtInt(c.masters),
        fmtInt(c.serviceUs),
        fmtInt(c.instances),
      ]),
    ),
    '',
  ],
  json: (r) => r,
});

// ---------------------------------------------------------------------------------------------
// The load generator process: `node --import tsx bench/scale.ts` with SCALE_LOADER set to a LoaderSpec (JSON).

const READY = 'scale-loader ready';

interface LoaderSpec {
  url: string;
  /** The service's routes, or a floor server's (bench/seckill-floor-server.ts `/reserve`, bench/red-envelopes-floor-server.ts `/grab`). */
  op: 'reserve' | 'grab' | 'reserve-floor' | 'grab-floor';
  activityId: string;
  durationS: number;
  connections: number;
  /** Accounts are `<users><n>`: a new one for every request. */
  users: string;
  out: string;
}

interface LoaderResult {
  load: LoadSummary;
  cpuS: number;
  users: number;
}

/**
 * Prepares, says READY on stderr, starts its load (autocannon) on SIGUSR2 and writes its summary and its own CPU to the
 * spec's `out` file. Every request is from a new user, with its own bearer token signed as it is sent (the floors take
 * the account from the body: they have no identity to take it from).
 */
async function runLoader(spec: LoaderSpec): Promise<void> {
  let n = 0;
  const json = { 'content-type': 'application/json' };
  const next = (): LoadRequest => {
    const [i, account] = [n, `${spec.users}${n++}`];
    if (spec.op === 'grab-floor') return { method: 'POST', path: `/grab/${spec.activityId}`, headers: json, body: JSON.stringify({ account }) };
    if (spec.op === 'reserve-floor')
      return { method: 'POST', path: `/reserve/${spec.activityId}/hot`, headers: json, body: JSON.stringify({ account, quantity: 1, requestId: `r${i}` }) };
    const authorization = bearerTokens([account])[0];
    if (spec.op === 'grab') return { method: 'POST', path: `/red-envelopes/activities/${spec.activityId}/grab`, headers: { authorization } };
    const body = JSON.stringify({ quantity: 1, requestId: `r${i}` });
    return { method: 'POST', path: `/seckill/activities/${spec.activityId}/products/hot/reservations`, headers: { authorization, ...json }, body };
  };
  // A signal listener does not keep the process alive: the timer does, until the signal.
  const alive = setInterval(() => undefined, 60_000);
  await new Promise<void>((go) => (process.once('SIGUSR2', () => go()), console.error(READY)));
  clearInterval(alive);
  const cpu0 = selfCpuSeconds();
  const load = await runLoad({ url: spec.url, connections: spec.connections, durationS: spec.durationS, requests: next });
  writeFileSync(spec.out, JSON.stringify({ load, cpuS: selfCpuSeconds() - cpu0, users: n } satisfies LoaderResult));
}

if (require.main === module && process.env.SCALE_LOADER)
  runLoader(JSON.parse(process.env.SCALE_LOADER) as LoaderSpec).then(
    () => process.exit(0),
    (err: Error) => (console.error('scale load generator failed:', err), process.exit(1)),
  );
