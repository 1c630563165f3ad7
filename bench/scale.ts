/**
 * scale: k instances of the built service (`node dist/main.js`, from a snapshot of the build) against one
 * redis-server (no RDB, no AOF), then against a Redis Cluster of m masters (test/harness/redis-cluster.ts, AOF off
 * as well), for two hot operations:
 *
 * - reserve: `POST /seckill/activities/{id}/products/hot/reservations`, one product of 10,000,000 units in 1 shard on
 *   one Redis and in m shards on the cluster, perUserLimit 1;
 * - grab: `POST /red-envelopes/activities/{id}/grab`, a rain in 1 sub-pool on one Redis and in m sub-pools on the
 *   cluster, large enough not to run dry (checked), its credits included (the run's window ends when all are credited).
 *
 * Each instance gets its own load generator process (autocannon, bench/lib/scale-loader.ts), and
 * every request is a new user (its own JWT, signed as it is sent). Per k it reports req/s, p50/p99, each master's core
 * use under the load, and per operation: Redis CPU µs on each master (/proc), Redis command µs (INFO commandstats),
 * Redis commands, service CPU µs; and the projected ceiling (1 / Redis CPU time per operation) of each master and of
 * the whole (its busiest master).
 *
 * k and m come from the cores (os.availableParallelism()): m = max(3, cores / 4) masters, k up to (cores − m) / 2 in
 * 1, 2, 4, 6, 8, …; with m + 2·k cores every master, instance and load generator runs pinned on a core of its own
 * (16 cores: k = 1, 2, 4, 6 and m = 4). With fewer (2 cores: k = 1, m = 3) everything shares the cores, unpinned, and
 * the report says what the full run needs.
 *
 * Options: --quick (3 s loads), --k 1,2,4 (instances), --masters N (at least 3), --only reserve,grab, --duration S,
 * --no-pin, --dist DIR. The run with no options or with --quick alone writes bench/results/scale.{md,json}; any other
 * option writes to $TMPDIR/redis-pay-bench/.
 */
import { readFileSync } from 'node:fs';
import { availableParallelism, tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { benchWorkDir } from './lib/cleanup';
import { startBenchCluster } from './lib/cluster-service';
import { type CommandStat, commandStats, statsDelta } from './lib/command-stats';
import { ROOT, snapshotBuild, spawnBareServer } from './lib/full-stack';
import { LOADER_ENV, LOADER_SCRIPT, type LoaderResult, type LoaderSpec, READY } from './lib/scale-loader';
import { cpuSeconds, pinProcess, spawnManaged, waitUntilServing } from './lib/proc';
import { freePort } from './lib/net';
import { startBenchRedis } from './lib/redis-server';
import { environmentInfo, fmtInt, fmtNum, type GoalLine, markdownTable, reportHead, RESULTS_DIR, statusText, writeResult } from './lib/report';
import { benchJson, writeJsonResult } from './lib/results-json';
import { type Service, startService, UNDER_LOAD_ENV } from './lib/service-http';
import { createRain, creditedAll, reconciliation } from './red-envelopes';
import { createActivity } from './seckill';

const NAME = 'scale';
const OPS = ['reserve', 'grab'] as const;
type Op = (typeof OPS)[number];
const PREFIX = 'rpsc';
const CONNECTIONS = 100;
/** The busiest master's share of an operation's Redis time on a 3-master cluster (m shards / sub-pools). */
const GOAL_SHARE_AT_3 = 0.45;
/** What the operations should reach on a 16-core machine (one Redis; a 4-master cluster against one master). */
const LARGE = { cores: 16, reserveRps: 15_000, grabRps: 25_000, clusterGain: 3 };
const K_STEPS = [1, 2, 4, 6, 8, 12, 16, 24, 32];

const SERVICE_ENV: Record<string, string> = { ...UNDER_LOAD_ENV, RED_ENVELOPE_MAX_COUNT: '1000000', ORDERS_EVENTS_MAXLEN: '1000000' };

const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, Math.max(0, ms)));

// ---------------------------------------------------------------------------------------------
// Options and the plan

interface Options {
  quick: boolean;
  ks?: number[];
  masters?: number;
  ops: Op[];
  durationS?: number;
  pin: boolean;
  /** The floors beside the service on one Redis (--no-floors: without). */
  floors: boolean;
  dist: string;
}

function parseOptions(args: string[]): Options {
  const o: Options = { quick: false, ops: [...OPS], pin: true, floors: true, dist: join(ROOT, 'dist') };
  const ints = (a: string, v: string | undefined) => {
    const n = (v ?? '').split(',').map(Number);
    if (n.length === 0 || n.some((x) => !Number.isInteger(x) || x < 1)) throw new Error(`${a} takes positive integers (comma-separated)`);
    return n;
  };
  for (let i = 0; i < args.length; i++) {
    const a = args[i];
    if (a === '--quick') o.quick = true;
    else if (a === '--k') o.ks = [...new Set(ints(a, args[++i]))].sort((x, y) => x - y);
    else if (a === '--masters') o.masters = Math.max(3, ints(a, args[++i])[0]);
    else if (a === '--duration') o.durationS = ints(a, args[++i])[0];
    else if (a === '--no-pin') o.pin = false;
    else if (a === '--no-floors') o.floors = false;
    else if (a === '--dist') o.dist = resolve(args[++i] ?? 'dist');
    else if (a === '--only') {
      o.ops = (args[++i] ?? '').split(',').filter(Boolean) as Op[];
      if (o.ops.length === 0 || o.ops.some((x) => !OPS.includes(x))) throw new Error(`--only takes a comma-separated list of ${OPS.join(', ')}`);
    } else
      throw new Error(`unknown option ${a} (known: --quick, --k 1,2,4, --masters N, --only ${OPS.join(',')}, --duration S, --no-pin, --no-floors, --dist DIR)`);
  }
  return o;
}

/** What runs where: instance counts, masters, and (with enough cores) a core of its own for every party. */
interface Plan {
  cores: number;
  ks: number[];
  masters: number;
  /** CPU of each Redis (index = master; one Redis: 0), of each instance and of each load generator; absent: unpinned. */
  cpus?: { redis: string[]; service: string[]; loader: string[] };
  /** What the full run needs, and whether this machine has it. */
  needs: string;
}

/** Masters and instance counts for `cores`: m = max(3, cores / 4); k up to (cores − m) / 2, so that each party gets a core. */
export function planFor(cores: number, o: Pick<Options, 'ks' | 'masters' | 'pin'>): Plan {
  const masters = o.masters ?? Math.max(3, Math.floor(cores / 4));
  const kMax = Math.floor((cores - masters) / 2);
  const ks = o.ks ?? (kMax >= 1 ? K_STEPS.filter((k) => k <= kMax) : [1]);
  const top = Math.max(...ks);
  const fits = masters + 2 * top <= cores;
  const ids = (from: number, n: number) => Array.from({ length: n }, (_, i) => String(from + i));
  const cpus = fits && o.pin ? { redis: ids(0, masters), service: ids(masters, top), loader: ids(masters + top, top) } : undefined;
  const large = planForLarge();
  const needs =
    `The full run (k = ${large.ks.join(', ')} against one Redis and a ${large.masters}-master cluster, every master, instance and load generator ` +
    `pinned to a core of its own) needs ${LARGE.cores} cores. This machine has ${cores}: ` +
    (fits
      ? `k = ${ks.join(', ')} on one Redis and on ${masters} masters, each party on its own core${cpus ? '' : ' (pinning off: --no-pin)'}.`
      : `k = ${ks.join(', ')} and ${masters} masters, every process sharing the ${cores} cores unpinned (${masters} masters + ${top} instance(s) + ${top} load generator(s) ` +
        `would need ${masters + 2 * top}), so req/s and core use here say what the cores allow, not what Redis can do; the per-operation costs and the ` +
        "busiest master's share do not depend on it.");
  return { cores, ks, masters, cpus, needs };
}

const planForLarge = () => {
  const masters = Math.max(3, Math.floor(LARGE.cores / 4));
  return { masters, ks: K_STEPS.filter((k) => k <= Math.floor((LARGE.cores - masters) / 2)) };
};

// ---------------------------------------------------------------------------------------------
// Load generator processes

/**
 * One load generator process per instance (pinned to `cpus[i]` when given), each on its own instance, started together
 * once all are ready; `onStart` runs right after the start signal. Resolves with each one's result.
 */
async function runLoaders(
  services: Service[],
  spec: Omit<LoaderSpec, 'url' | 'users' | 'out'>,
  tag: string,
  workDir: string,
  cpus: string[] | undefined,
  onStart: () => void = () => undefined,
): Promise<LoaderResult[]> {
  const procs = services.map((svc, i) => {
    const full: LoaderSpec = { ...spec, url: `http://127.0.0.1:${svc.port}`, users: `${tag}-${i}-`, out: join(workDir, `${tag}-${i}.json`) };
    const p = spawnManaged({
      name: `load generator ${tag}-${i}`,
      command: process.execPath,
      args: ['--import', 'tsx', LOADER_SCRIPT],
      cwd: ROOT,
      env: { ...process.env, [LOADER_ENV]: JSON.stringify(full) },
      cpus: cpus?.[i],
    });
    const exited = new Promise<void>((done) => p.child.once('exit', () => done()));
    return { p, full, exited };
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

// ---------------------------------------------------------------------------------------------
// Topologies and runs

interface Topology {
  name: 'one Redis' | 'cluster';
  urls: string[];
  pids: number[];
  redisEnv: Record<string, string>;
  /** Shards of the hot product and sub-pools of the rain. */
  spread: number;
  stop(): Promise<void>;
}

interface Snapshot {
  redisCpu: (number | undefined)[];
  serviceCpu: (number | undefined)[];
  stats: Map<string, CommandStat>[];
}

async function snapshot(t: Topology, services: Service[]): Promise<Snapshot> {
  const stats = await Promise.all(t.urls.map((u) => commandStats([u])));
  return { redisCpu: t.pids.map((p) => cpuSeconds(p)), serviceCpu: services.map((s) => cpuSeconds(s.proc.pid)), stats };
}

const diff = (a: (number | undefined)[], b: (number | undefined)[]) => a.map((x, i) => (x === undefined || b[i] === undefined ? NaN : b[i] - x));
const sum = (v: number[]) => v.reduce((s, x) => s + x, 0);

export interface Row {
  topology: Topology['name'];
  /** The service, or k floor servers doing the operation's script alone (one Redis only). */
  target: 'service' | 'floor';
  masters: number;
  spread: number;
  op: Op;
  k: number;
  rps: number;
  /** Median of the load generators' p50, and the worst p99 (ms). */
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
  /** The commands of an operation, most first (calls per operation). */
  topCommands: [string, number][];
  serviceUsPerOp: number;
  /** The load generators' CPU over the load, as a share of one core (summed). */
  loaderCoreUse: number;
  /** The busiest master's share of the operation's Redis CPU. */
  busiestShare: number;
  /** 1e6 / each master's µs per operation; the whole: 1e6 / the busiest master's. */
  ceilingPerMaster: number[];
  ceiling: number;
  /** The rain ran out during the run (grabs then answer NONE_LEFT, a cheaper path). */
  ranDry?: boolean;
}

interface RunContext {
  t: Topology;
  /** The servers under load (k service instances, or k floor servers). */
  services: Service[];
  plan: Plan;
  workDir: string;
  durationS: number;
  warmupS: number;
}

/** One measured run of `op` at k = services.length: a warm-up, then the load, then what it left behind, measured. */
async function measure(c: RunContext, op: Op, activityId: string, settle: () => Promise<void>, target: Row['target'] = 'service'): Promise<Row> {
  const k = c.services.length;
  const tag = `${c.t.name === 'cluster' ? 'c' : 's'}${k}${op[0]}${target[0]}${Date.now().toString(36)}`;
  const spec = { op: target === 'floor' ? (`${op}-floor` as const) : op, activityId, connections: CONNECTIONS };
  await runLoaders(c.services, { ...spec, durationS: c.warmupS }, `${tag}w`, c.workDir, c.plan.cpus?.loader);
  await settle();
  const start: { snapshot?: Promise<Snapshot> } = {};
  const results = await runLoaders(c.services, { ...spec, durationS: c.durationS }, tag, c.workDir, c.plan.cpus?.loader, () => {
    start.snapshot = snapshot(c.t, c.services);
  });
  const s0 = await start.snapshot!;
  const s1 = await snapshot(c.t, c.services);
  await settle();
  const s2 = await snapshot(c.t, c.services);

  const loadS = Math.max(...results.map((r) => r.load.durationS));
  const requests = sum(results.map((r) => r.load.total));
  const statuses: Record<string, number> = {};
  for (const r of results) for (const [code, n] of Object.entries(r.load.statusCodes)) statuses[code] = (statuses[code] ?? 0) + n;
  const perMaster = c.t.urls.map((_, i) => statsDelta(s0.stats[i], s2.stats[i]));
  const commands = new Map<string, number>();
  for (const d of perMaster) for (const [name, v] of Object.entries(d)) commands.set(name, (commands.get(name) ?? 0) + v.calls);
  const redisUsPerOp = diff(s0.redisCpu, s2.redisCpu).map((s) => (1e6 * s) / requests);
  const maxUs = Math.max(...redisUsPerOp);
  const p50s = results.map((r) => r.load.p50).sort((a, b) => a - b);
  const row: Row = {
    topology: c.t.name,
    target,
    masters: c.t.urls.length,
    spread: c.t.spread,
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
    loaderCoreUse: sum(results.map((r) => r.cpuS)) / loadS,
    busiestShare: maxUs / sum(redisUsPerOp),
    ceilingPerMaster: redisUsPerOp.map((us) => 1e6 / us),
    ceiling: 1e6 / maxUs,
  };
  console.log(
    `[bench] ${row.topology} (${row.masters} master(s)), k=${k}, ${op}${target === 'floor' ? ' floor' : ''}: ${fmtInt(row.rps)} req/s, p50 ${row.p50} ms, p99 ${row.p99} ms, ` +
      `Redis core use ${row.redisCoreUse.map((u) => fmtNum(u, 2)).join(' / ')}, Redis CPU µs/op ${row.redisUsPerOp.map((u) => fmtNum(u, 0)).join(' / ')}, ` +
      `${fmtNum(row.commandsPerOp, 1)} commands/op, statuses ${JSON.stringify(statuses)}`,
  );
  return row;
}

/** Rain size for one run of k instances: 8,000 grabs/s per instance over the warm-up and the load, with a margin. */
const rainCount = (k: number, c: Pick<RunContext, 'durationS' | 'warmupS'>) =>
  Math.min(1_000_000, Math.max(20_000, Math.ceil(8000 * k * (c.durationS + c.warmupS) * 1.25)));

/**
 * k floor servers of `op` on one Redis, each on its instance's core: bench/seckill-floor-server.ts (`/reserve`: the
 * reserve script alone) or bench/red-envelopes-floor-server.ts (`/grab`: the grab script alone; the instances credit).
 */
async function startFloors(k: number, op: Op, t: Topology, dist: string, plan: Plan): Promise<Service[]> {
  return Promise.all(
    Array.from({ length: k }, async (_, i) => {
      const port = await freePort();
      const proc = spawnBareServer({
        id: `${op}-floor-${i}`,
        port,
        cpus: plan.cpus?.service[i],
        script: join(__dirname, op === 'reserve' ? 'seckill-floor-server.ts' : 'red-envelopes-floor-server.ts'),
        env: {
          ...process.env,
          PORT: String(port),
          REDIS_URL: t.urls[0],
          KEY_PREFIX: PREFIX,
          PRODUCTS: 'hot',
          LUA_DIR: join(dist, '..', 'lua'),
          NODE_ENV: 'production',
          ORDERS_EVENTS_MAXLEN: SERVICE_ENV.ORDERS_EVENTS_MAXLEN,
        },
      });
      await waitUntilServing(proc, port, undefined, 60_000);
      return { port, proc };
    }),
  );
}

/** Every k of the plan on one topology: instances added as k grows, each operation measured at each k. */
async function onTopology(t: Topology, o: Options, plan: Plan, dist: string, workDir: string): Promise<Row[]> {
  const c: RunContext = { t, services: [], plan, workDir, durationS: o.durationS ?? (o.quick ? 3 : 8), warmupS: o.quick ? 1 : 2 };
  const rows: Row[] = [];
  const floors = o.floors && t.name === 'one Redis';
  const pin = (cpu: string | undefined, pid: number) => cpu !== undefined && pinProcess(cpu, pid);
  t.pids.forEach((pid, i) => pin(plan.cpus?.redis[i], pid));
  try {
    for (const k of plan.ks) {
      const added = await Promise.all(
        Array.from({ length: k - c.services.length }, (_, j) =>
          startService(dist, workDir, `${t.name === 'cluster' ? 'c' : 's'}${c.services.length + j}`, PREFIX, SERVICE_ENV, t.redisEnv),
        ),
      );
      added.forEach((svc, j) => pin(plan.cpus?.service[c.services.length + j], svc.proc.pid));
      c.services.push(...added);
      const port = c.services[0].port;
      for (const op of o.ops) {
        const activityId = `${op[0]}${t.spread}k${k}${Date.now().toString(36)}`;
        let settle = () => sleep(1000);
        if (op === 'reserve') await createActivity(port, activityId, [{ productId: 'hot', stock: 10_000_000, shards: t.spread }], { perUserLimit: 1 });
        else {
          await createRain(port, activityId, rainCount(k, c) * (floors ? 2 : 1), { subPools: t.spread });
          settle = () => creditedAll(port, [activityId], 180_000);
        }
        const opRows = [await measure(c, op, activityId, settle)];
        if (floors) {
          const servers = await startFloors(k, op, t, dist, plan);
          try {
            opRows.push(await measure({ ...c, services: servers }, op, activityId, settle, 'floor'));
          } finally {
            await Promise.all(servers.map((f) => f.proc.stop()));
          }
        }
        const dry = op === 'grab' && (await reconciliation(port, activityId)).left.count === 0;
        rows.push(...opRows.map((r) => ({ ...r, ...(dry ? { ranDry: true } : {}) })));
      }
    }
  } finally {
    await Promise.all(c.services.map((s) => s.proc.stop()));
  }
  return rows;
}

// ---------------------------------------------------------------------------------------------
// Report

const OP_LABEL: Record<Op, string> = { reserve: 'seckill reserve', grab: 'red-envelope grab (its credit included)' };

function goals(rows: Row[], plan: Plan): GoalLine[] {
  const lines: GoalLine[] = [];
  const top = (topology: Row['topology'], op: Op, target: Row['target'] = 'service') =>
    rows.filter((r) => r.topology === topology && r.op === op && r.target === target).sort((a, b) => b.k - a.k)[0];
  const target = plan.masters === 3 ? GOAL_SHARE_AT_3 : (GOAL_SHARE_AT_3 * 3) / plan.masters;
  for (const op of OPS) {
    const r = top('cluster', op);
    if (!r) continue;
    lines.push({
      goal: `${r.masters}-master cluster, ${op === 'reserve' ? `the hot product in ${r.spread} shards` : `the rain in ${r.spread} sub-pools`}: the busiest master's share of a${op === 'reserve' ? ' reservation' : ' grab'}'s Redis CPU (k = ${r.k})`,
      target: `≤ ${fmtNum(target, 2)}${plan.masters === 3 ? '' : ` (${GOAL_SHARE_AT_3} × 3 / ${plan.masters} masters)`}`,
      measured: `${fmtNum(r.busiestShare, 2)} (µs per op by master: ${r.redisUsPerOp.map((u) => fmtNum(u, 0)).join(' / ')})`,
      met: r.busiestShare <= target,
    });
  }
  for (const op of OPS) {
    const one = top('one Redis', op);
    const cl = top('cluster', op);
    if (!one && !cl) continue;
    lines.push({
      goal: `Projected ceiling of a ${op === 'reserve' ? 'reservation' : 'grab'} (1 / Redis CPU per op): one Redis; the cluster (its busiest master); each master`,
      target: 'reported',
      measured:
        `${one ? `${fmtInt(one.ceiling)}/s` : 'n/a'}; ` +
        (cl ? `${fmtInt(cl.ceiling)}/s on ${cl.masters} masters; ${cl.ceilingPerMaster.map(fmtInt).join(' / ')}/s` : 'n/a'),
      info: true,
    });
  }
  for (const op of OPS) {
    const sv = top('one Redis', op);
    const fl = top('one Redis', op, 'floor');
    if (sv && fl)
      lines.push({
        goal: `One Redis, ${op}: Redis CPU per operation, the service ÷ the floor (the ${op} script alone on bare Fastify${op === 'grab' ? ', credited by the instances' : ''}), k = ${sv.k}`,
        target: 'information',
        measured: `${fmtNum(sv.redisUsPerOp[0] / fl.redisUsPerOp[0], 2)} (${fmtNum(sv.redisUsPerOp[0], 0)} ÷ ${fmtNum(fl.redisUsPerOp[0], 0)} µs; commands ${fmtNum(sv.commandsPerOp, 1)} ÷ ${fmtNum(fl.commandsPerOp, 1)})`,
        info: true,
      });
  }
  const refused = rows.map((r) => ({
    r,
    share: 1 - sum(Object.entries(r.statuses).map(([code, n]) => (code.startsWith('2') ? n : 0))) / Math.max(1, r.requests),
  }));
  const worst = refused.sort((a, b) => b.share - a.share)[0];
  if (worst)
    lines.push({
      goal: 'Every run measured the operation itself: answers 2xx (a refusal is a cheaper path), no socket errors',
      target: '≥ 99% 2xx in every row; 0 errors',
      measured: `worst: ${worst.r.topology}, k = ${worst.r.k}, ${worst.r.op}${worst.r.target === 'floor' ? ' floor' : ''}: ${fmtNum(100 * (1 - worst.share), 1)}% 2xx; errors ${fmtInt(sum(rows.map((r) => r.errors)))}`,
      met: worst.share <= 0.01 && rows.every((r) => r.errors === 0),
    });
  const large = plan.cores >= LARGE.cores && plan.cpus !== undefined;
  for (const op of OPS) {
    const one = top('one Redis', op);
    if (!one) continue;
    const want = op === 'reserve' ? LARGE.reserveRps : LARGE.grabRps;
    lines.push({
      goal: `One Redis on its own core, ${LARGE.cores}+ cores: ${op === 'reserve' ? 'reservations' : 'grabs'}/s at the largest k`,
      target: `≥ ${fmtInt(want)}/s`,
      measured: `${fmtInt(one.rps)}/s at k = ${one.k} (Redis at ${fmtNum(one.redisCoreUse[0], 2)} of a core; projected ceiling ${fmtInt(one.ceiling)}/s)${large ? '' : `; ${plan.cores} cores here, not measurable`}`,
      met: large ? one.rps >= want : undefined,
    });
    const cl = top('cluster', op);
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

/** What a deployment is sized for: flash sales by reservations/s, a rain by grabs/s. */
const CAPACITY_TARGETS: readonly { what: string; op: Op; rate: number }[] = [
  { what: '10k-QPS sale', op: 'reserve', rate: 10_000 },
  { what: '100k-QPS sale', op: 'reserve', rate: 100_000 },
  { what: '760k-grabs/s rain', op: 'grab', rate: 760_000 },
];
/** The core use a master or an instance is sized to at the peak: room for replication, persistence and a failover. */
const CAPACITY_HEADROOM = 0.7;

/**
 * Masters and instances for each target, from this run's per-operation figures: Redis CPU per operation on one Redis
 * times the cluster's imbalance (the busiest master's share × masters, never below 1), and the service CPU per
 * operation (one instance = one core), each at CAPACITY_HEADROOM of a core.
 */
export function capacity(
  rows: Row[],
): { what: string; rate: number; redisUs: number; imbalance: number; masters: number; serviceUs: number; instances: number; shards: number }[] {
  const pick = (topology: Row['topology'], op: Op) =>
    rows.filter((r) => r.topology === topology && r.op === op && r.target === 'service').sort((a, b) => a.k - b.k)[0];
  return CAPACITY_TARGETS.flatMap(({ what, op, rate }) => {
    const one = pick('one Redis', op);
    if (!one) return [];
    const cl = pick('cluster', op);
    const imbalance = cl ? Math.max(1, cl.busiestShare * cl.masters) : 1;
    const redisCores = (rate * one.redisUsPerOp[0]) / 1e6;
    const masters = redisCores <= CAPACITY_HEADROOM ? 1 : Math.ceil((redisCores * imbalance) / CAPACITY_HEADROOM);
    const instances = Math.ceil((rate * one.serviceUsPerOp) / 1e6 / CAPACITY_HEADROOM);
    return [{ what, rate, redisUs: one.redisUsPerOp[0], imbalance, masters, serviceUs: one.serviceUsPerOp, instances, shards: masters }];
  });
}

function capacityTable(rows: Row[]): string {
  return markdownTable(
    ['Target', 'Operations/s', 'Redis CPU µs/op', 'Cluster imbalance', 'Masters', 'Shards or sub-pools', 'Service CPU µs/op', 'Instances (one core each)'],
    capacity(rows).map((c) => [
      c.what,
      fmtInt(c.rate),
      fmtNum(c.redisUs, 0),
      fmtNum(c.imbalance, 2),
      fmtInt(c.masters),
      fmtInt(c.shards),
      fmtInt(c.serviceUs),
      fmtInt(c.instances),
    ]),
    ['left', 'right', 'right', 'right', 'right', 'right', 'right', 'right'],
  );
}

function table(rows: Row[]): string {
  return markdownTable(
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
    ['left', 'right', 'right', 'right', 'left', 'right', 'right', 'right', 'right', 'right', 'right'],
  );
}

function report(
  args: string[],
  rows: Row[],
  plan: Plan,
  o: Options,
  redisVersion: string,
): { md: string; gl: GoalLine[]; env: ReturnType<typeof environmentInfo> } {
  const env = environmentInfo(redisVersion, {
    'Cores (os.availableParallelism())': plan.cores,
    Placement: plan.cpus
      ? `Redis/masters on CPU ${plan.cpus.redis.join(',')}; instances on ${plan.cpus.service.join(',')}; load generators on ${plan.cpus.loader.join(',')} (taskset)`
      : 'unpinned: every process shares every core',
  });
  const gl = goals(rows, plan);
  const durationS = o.durationS ?? (o.quick ? 3 : 8);
  const md = [
    ...reportHead(NAME, args, env, gl),
    '## What ran',
    '',
    plan.needs,
    '',
    `k instances of the built service (production settings, logging at warn, rate limit on and raised far above the load), one load generator process per instance (autocannon, ${CONNECTIONS} connections, ${durationS} s after a ${o.quick ? 1 : 2} s warm-up), every request from a new user with its own JWT. ` +
      `Reserve: one product of 10,000,000 units, perUserLimit 1 (each reservation creates its order, its expiry entry and the buyer index). Grab: a rain sized not to run dry, each grab's credit included: the window of the per-operation figures ends when every grab is credited. ` +
      (o.floors
        ? "On one Redis each operation runs a second time against k floor servers (bare Fastify + one ioredis connection, no auth, no order: bench/seckill-floor-server.ts `/reserve` runs the reserve script alone, bench/red-envelopes-floor-server.ts `/grab` the grab script alone, whose grabs the idle instances credit), each on its instance's core with its own load generator. "
        : '') +
      "Redis CPU is each redis-server's user + system time from /proc over the load and what it left behind, divided by the requests answered; core use is the same CPU over the load alone, per second. " +
      "Commands are INFO commandstats deltas summed over the masters (commands inside scripts count under their own names; background work in the window included; their µs are not summed: a script's µs already include those of the commands it runs). " +
      'The projected ceiling is 1 / Redis CPU per operation: the operations per second one master would serve with its core full; for the cluster, the busiest master decides.',
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
        `- ${r.topology}, k = ${r.k}, ${OP_LABEL[r.op]}${r.target === 'floor' ? ', floor' : ''}: ${r.topCommands.map(([n, v]) => `${n} ${fmtNum(v, 2)}`).join(', ')}`,
    ),
    '',
    '## Capacity',
    '',
    `Sized from this run at ${CAPACITY_HEADROOM} of a core per master and per instance at the peak: masters = the operations/s × Redis CPU per operation (one Redis, k = 1) × the cluster's imbalance (its busiest master's share × its masters), ` +
      'one master when it fits; the hot product gets one shard, the rain one sub-pool, per master; instances = the operations/s × service CPU per operation. A sale counts reservations (listing is served from the page cache, about 2 µs of Redis per page). Replicas come on top (one per master).',
    '',
    capacityTable(rows),
    '',
    '## Reading it',
    '',
    plan.cpus
      ? "- Every master, instance and load generator ran on a core of its own: req/s grows with k until a master's core is full (core use near 1.0), and the projected ceiling says where that is."
      : `- On ${plan.cores} cores the masters, the instance(s) and the load generator(s) share the cores: req/s is bound by the cores, not by Redis, and a master's core use is what it got of a shared core. The figures that carry over to a larger machine are per operation: Redis CPU µs, commands, the busiest master's share and the projected ceilings.`,
    `- On a ${LARGE.cores}-core machine the same command (no options) runs k = ${planForLarge().ks.join(', ')} against one Redis and a ${planForLarge().masters}-master cluster, each party pinned; it shows whether one Redis passes ${fmtInt(LARGE.reserveRps)} reservations/s and ${fmtInt(LARGE.grabRps)} grabs/s and whether the cluster gives ${LARGE.clusterGain}× one master.`,
    '',
  ];
  return { md: md.join('\n'), gl, env };
}

// ---------------------------------------------------------------------------------------------
// Main

export async function main(args: string[]): Promise<void> {
  const o = parseOptions(args);
  const plan = planFor(availableParallelism(), o);
  console.log(`[bench] scale: ${plan.needs}`);
  const workDir = benchWorkDir('redis-pay-scale-');
  const dist = snapshotBuild(o.dist, join(workDir, 'build'));
  const rows: Row[] = [];

  const redis = await startBenchRedis();
  const one: Topology = {
    name: 'one Redis',
    urls: [redis.url],
    pids: [redis.process.pid],
    redisEnv: { REDIS_URL: redis.url },
    spread: 1,
    stop: () => redis.stop(),
  };
  try {
    rows.push(...(await onTopology(one, o, plan, dist, workDir)));
  } finally {
    await one.stop();
  }
  const cluster = await startBenchCluster({ masters: plan.masters, appendonly: false });
  const cl: Topology = { name: 'cluster', ...cluster, spread: plan.masters };
  try {
    rows.push(...(await onTopology(cl, o, plan, dist, workDir)));
  } finally {
    await cl.stop();
  }

  const standard = args.every((a) => a === '--quick');
  const outDir = standard ? RESULTS_DIR : join(tmpdir(), 'redis-pay-bench');
  const { md, gl, env } = report(args, rows, plan, o, redis.version);
  writeResult(NAME, md, outDir);
  writeJsonResult(NAME, benchJson({ bench: NAME, args, environment: env, goals: gl, dist: o.dist, ratios: {} }, { plan, rows }), outDir);
}
