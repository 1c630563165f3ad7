/**
 * The one scenario harness: a bench is a load, its baseline and its report. `defineBench` parses the options
 * (`--quick`, `--only <sections>`, `--dist DIR`; `--no-pin`, `--repeat N` and `--compare [--baseline FILE]` where the
 * bench pins, repeats or compares; the bench's own), snapshots the build, starts a redis-server, hands the bench a
 * context to start the built service and baseline servers and to measure rows on them, then writes the report (title,
 * environment, Goals, missed goals, the comparison, the bench's sections) and its JSON (goals, ratios, rows). Only the
 * standard run (no options) writes bench/results; any other run writes to $TMPDIR/redis-pay-bench/.
 */
import { existsSync, mkdirSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { benchWorkDir } from './cleanup';
import { commandStats, statsDelta } from './command-stats';
import { fullEnv, ROOT, snapshotBuild, spawnBareServer, spawnFullStack, UNDER_LOAD_ENV } from './full-stack';
import type { LoadRequest } from './load';
import { measuredLoad, median, medianBy } from './measure';
import { cpuSplit, freePort, type ManagedProcess, pinProcess, waitUntilServing } from './proc';
import { type BenchRedis, startBenchRedis } from './redis-server';
import * as report from './report';
import { fmtInt, fmtNum, type GoalLine, jsonNum, markdownTable, RESULTS_DIR } from './report';

/** A server under load: the built service or a baseline (floor) server. */
export interface Target {
  id: string;
  url: string;
  port: number;
  pid: number;
  proc: ManagedProcess;
  stop(): Promise<unknown>;
}

/** One measured load run: rate, latency, answers, and per request the Redis commands and the CPU µs of each party. */
export interface Row {
  scenario: string;
  target: string;
  rps: number;
  p50: number;
  p99: number;
  requests: number;
  statuses: Record<string, number>;
  errors: number;
  wallS: number;
  /** Calls per command over the run (INFO commandstats, every client, inside scripts included). */
  commands: Record<string, number>;
  commandsPerRequest: number;
  serverUs?: number;
  redisUs?: number;
  loadUs: number;
  /** Share of a core other jobs on the machine used during the run. */
  otherShare?: number;
  /** After `ctx.rounds`: req/s of each round. */
  rounds?: number[];
}

export interface BenchContext {
  name: string;
  args: string[];
  quick: boolean;
  /** No options: the run that writes bench/results. */
  standard: boolean;
  /** --compare: the ratios are checked against the committed results (BenchDefinition.compare). */
  compare: boolean;
  has(section: string): boolean;
  /** The bench's own options (`--name value`, or `true` for a flag). */
  opts: Record<string, string | true | undefined>;
  /** A snapshot of the build under test (its dist dir; lua/ beside it). */
  dist: string;
  workDir: string;
  redis: BenchRedis;
  /** Where the report goes (bench/results for the standard run). */
  outDir: string;
  /** `standard` seconds, or `quick` ones with --quick. */
  seconds(standard: number, quick: number): number;
  /** The built service on a free port, ready (the bench's service env, then `env`; `redisEnv` default: the bench's Redis). */
  service(id: string, env?: Record<string, string>, redisEnv?: Record<string, string>): Promise<Target>;
  /** A baseline server (`bench/<script>`, run by tsx) on a free port: `env`, then PORT and REDIS_URL (KEY_PREFIX, LUA_DIR, DIST by default). */
  floor(id: string, script: string, env?: Record<string, string>): Promise<Target>;
  /** One measured load on `on`: `durationS` (default: 8 s, 3 with --quick), 100 connections. Kept in `rows` unless `warmup`. */
  measure(
    scenario: string,
    on: Target,
    requests: LoadRequest[] | (() => LoadRequest),
    o?: { durationS?: number; warmup?: boolean; connections?: number },
  ): Promise<Row>;
  /**
   * --repeat rounds (BenchDefinition.repeat, at most 3 with --compare, 1 with --quick) of `run`, so a drift or a burst of noise hits every row
   * alike; then each scenario and target is one row: its median round by req/s, CPU the median over rounds, answers summed.
   */
  rounds(run: (round: number) => Promise<void>): Promise<void>;
  rows: Row[];
  row(scenario: string, target: string): Row | undefined;
  /** Extra environment lines for the report. */
  env: Record<string, string | number>;
}

export interface BenchDefinition<R> {
  name: string;
  /** Sections `--only` picks from (all by default). */
  sections?: readonly string[];
  /** The bench's own options: `flag` (no value) or `value`. */
  options?: Record<string, 'flag' | 'value'>;
  /** The service's env in every run, on top of the bench defaults (UNDER_LOAD_ENV). */
  serviceEnv?: Record<string, string>;
  /** The server under test alone on the last CPU, this process and redis-server on the others (`--no-pin`: unpinned). */
  pin?: boolean;
  /** Rounds of `ctx.rounds` (--repeat N). */
  repeat?: number;
  /** `--compare`: each ratio (key → label) at most `tolerance` (0.1) below the committed JSON's, else the run fails. */
  compare?: { ratios: Record<string, string>; tolerance?: number };
  prefix: string;
  run(ctx: BenchContext): Promise<R>;
  goals(r: R, ctx: BenchContext): GoalLine[];
  /** The report's sections after the Goals table. */
  report(r: R, ctx: BenchContext): string[];
  ratios?(r: R, ctx: BenchContext): Record<string, number | null>;
  json?(r: R, ctx: BenchContext): Record<string, unknown>;
}

/** A bench module's `main`, for bench/run.ts. */
export const defineBench = <R>(def: BenchDefinition<R>) => ({ main: (args: string[]) => runBench(def, args) });

function parse(def: BenchDefinition<unknown>, args: string[]) {
  const known = def.sections ?? [];
  const own: Record<string, 'flag' | 'value'> = { ...def.options };
  if (def.pin) own['no-pin'] = 'flag';
  if (def.repeat) own.repeat = 'value';
  if (def.compare) Object.assign(own, { compare: 'flag', baseline: 'value' });
  const opts: Record<string, string | true | undefined> = {};
  let [quick, only, dist] = [false, undefined as string[] | undefined, join(ROOT, 'dist')];
  for (let i = 0; i < args.length; i++) {
    const [a, kind] = [args[i], own[args[i].slice(2)]];
    if (a === '--quick') quick = true;
    else if (a === '--dist') dist = resolve(args[++i] ?? 'dist');
    else if (a === '--only' && known.length) {
      only = (args[++i] ?? '').split(',').filter(Boolean);
      if (only.length === 0 || only.some((s) => !known.includes(s))) throw new Error(`--only takes a comma-separated list of ${known.join(', ')}`);
    } else if (a.startsWith('--') && kind) opts[a.slice(2)] = kind === 'flag' ? true : (args[++i] ?? '');
    else throw new Error(`unknown option ${a} (known: --quick --dist${known.length ? ' --only' : ''} ${Object.keys(own).join(' --')})`);
  }
  if (opts.baseline && !opts.compare) throw new Error('--baseline needs --compare');
  return { quick, sections: new Set(only ?? known), dist, opts };
}

/** The committed `<name>.json` (or `file`) a --compare checks against: read first, so a missing one fails before any load. */
function readBaseline(name: string, file = join(RESULTS_DIR, `${name}.json`)) {
  const data = (existsSync(file) ? JSON.parse(readFileSync(file, 'utf8')) : {}) as { bench?: string; schema?: number; ratios?: Record<string, number | null> };
  if (data.bench !== name || data.schema !== report.RESULTS_SCHEMA || !data.ratios)
    throw new report.BenchCheckFailed(
      `--compare: ${file} is missing or not a ${name} results file (run the standard bench on a quiet machine and commit its results).`,
    );
  return { file, ratios: data.ratios, commit: (data as { build?: { commit?: string } }).build?.commit?.slice(0, 7) ?? 'unknown build' };
}

async function runBench<R>(def: BenchDefinition<R>, args: string[]): Promise<void> {
  const p = parse(def as BenchDefinition<unknown>, args);
  const baseline = p.opts.compare ? readBaseline(def.name, p.opts.baseline as string | undefined) : undefined;
  const workDir = benchWorkDir(`rp-${def.name}-`);
  const dist = snapshotBuild(p.dist, join(workDir, 'build'));
  const split = def.pin && !p.opts['no-pin'] ? cpuSplit() : undefined;
  // This process (autocannon) and what it starts from now on (redis-server) on the other CPUs.
  if (split) pinProcess(split.rest);
  const redis = await startBenchRedis();
  const outDir = args.length === 0 ? RESULTS_DIR : join(tmpdir(), 'redis-pay-bench');
  mkdirSync(outDir, { recursive: true });
  let rows: Row[] = [];
  /** Starts a server on a free port; resolves once it answers (2xx on `ready` when given). */
  const start = async (id: string, spawn: (port: number) => ManagedProcess, ready?: string): Promise<Target> => {
    const port = await freePort();
    const proc = spawn(port);
    await waitUntilServing(proc, port, ready && `http://127.0.0.1:${port}${ready}`, 60_000);
    return { id, port, url: `http://127.0.0.1:${port}`, pid: proc.pid, proc, stop: () => proc.stop(15_000) };
  };
  const ctx: BenchContext = {
    name: def.name,
    args,
    quick: p.quick,
    standard: args.length === 0,
    compare: baseline !== undefined,
    has: (s) => p.sections.has(s),
    opts: p.opts,
    dist,
    workDir,
    redis,
    outDir,
    get rows() {
      return rows;
    },
    env: def.pin
      ? {
          'CPU placement': split
            ? `server under test alone on CPU ${split.server}; autocannon (this process) and redis-server on CPU ${split.rest} (taskset)`
            : 'not pinned: server, autocannon and redis-server share every CPU',
        }
      : {},
    seconds: (s, q) => (p.quick ? q : s),
    service(id, env = {}, redisEnv = { REDIS_URL: redis.url }) {
      const dir = join(workDir, `run-${id}`);
      mkdirSync(dir, { recursive: true });
      return start(
        id,
        (port) => {
          // REDIS_CLUSTER_NODES instead of a REDIS_URL: no REDIS_URL at all.
          const e = { ...fullEnv(port, '', def.prefix, { ...UNDER_LOAD_ENV, ...def.serviceEnv, ...env }), ...redisEnv };
          if (!e.REDIS_URL) delete e.REDIS_URL;
          return spawnFullStack({ id, port, dist, workDir: dir, env: e, cpus: split?.server });
        },
        '/health/ready',
      );
    },
    floor(id, script, env = {}) {
      const base = { NODE_ENV: 'production', KEY_PREFIX: def.prefix, LUA_DIR: join(dist, '..', 'lua'), DIST: dist };
      return start(id, (port) =>
        spawnBareServer({
          id,
          port,
          cpus: split?.server,
          script: join(ROOT, 'bench', script),
          env: { ...process.env, ...base, ...env, PORT: String(port), REDIS_URL: redis.url },
        }),
      );
    },
    async measure(scenario, on, requests, o = {}) {
      const before = await commandStats([redis.url]);
      const load = { url: on.url, connections: o.connections ?? 100, durationS: o.durationS ?? ctx.seconds(8, 3), requests, title: `${scenario} ${on.id}` };
      const m = await measuredLoad(load, on.pid, redis.process.pid);
      on.proc.assertAlive();
      const commands = Object.fromEntries(Object.entries(statsDelta(before, await commandStats([redis.url]))).map(([k, v]) => [k, v.calls]));
      const n = Math.max(1, m.load.total);
      const us = (s: number | undefined) => (s === undefined ? undefined : (1e6 * s) / n);
      const row: Row = {
        scenario,
        target: on.id,
        rps: m.load.total / m.load.durationS,
        p50: m.load.p50,
        p99: m.load.p99,
        requests: m.load.total,
        statuses: m.load.statusCodes,
        errors: m.load.errors,
        wallS: m.wallS,
        commands,
        commandsPerRequest: Object.values(commands).reduce((s, x) => s + x, 0) / n,
        serverUs: us(m.serverCpuS),
        redisUs: us(m.redisCpuS),
        loadUs: us(m.loadCpuS)!,
        otherShare: m.otherCpuS === undefined ? undefined : m.otherCpuS / m.wallS,
      };
      console.log(
        `[bench] ${scenario} / ${on.id}: ${fmtInt(row.rps)} req/s, p99 ${row.p99} ms, ${fmtNum(row.serverUs, 0)} µs server CPU/request, ${report.statusText(row.statuses)}`,
      );
      if (!o.warmup) rows.push(row);
      return row;
    },
    async rounds(run) {
      const [n, kept, all] = [p.quick ? 1 : Number(p.opts.repeat ?? Math.min(baseline ? 3 : Infinity, def.repeat ?? 1)), rows, [] as Row[]];
      for (let round = 0; round < n; round++) {
        if (n > 1) console.error(`[bench] round ${round + 1}/${n}`);
        rows = [];
        await run(round);
        all.push(...rows);
      }
      rows = kept;
      for (const k of new Set(all.map((r) => `${r.scenario}\n${r.target}`))) {
        const mine = all.filter((r) => `${r.scenario}\n${r.target}` === k);
        const statuses: Record<string, number> = {};
        for (const [c, x] of mine.flatMap((r) => Object.entries(r.statuses))) statuses[c] = (statuses[c] ?? 0) + x;
        const [serverUs, redisUs] = [median(mine.map((r) => r.serverUs)), median(mine.map((r) => r.redisUs))];
        rows.push({
          ...medianBy(mine, (r) => r.rps),
          statuses,
          errors: mine.reduce((s, r) => s + r.errors, 0),
          serverUs,
          redisUs,
          rounds: mine.map((r) => r.rps),
        });
      }
      ctx.env.Rounds = `${n}, rows interleaved; each row is its median round by req/s, CPU µs/request the median over the rounds, answers summed`;
    },
    row: (scenario, target) => rows.find((r) => r.scenario === scenario && r.target === target),
  };
  const result = await def.run(ctx);
  const ratios = def.ratios?.(result, ctx) ?? {};
  const tolerance = def.compare?.tolerance ?? 0.1;
  const checks = Object.entries(baseline ? def.compare!.ratios : {}).map(([key, label]) => {
    const [committed, measured] = [baseline!.ratios[key] ?? undefined, ratios[key] ?? undefined];
    const least = committed === undefined ? undefined : committed * (1 - tolerance);
    const ok = least !== undefined && measured !== undefined && measured >= least;
    const line = `${ok ? 'ok  ' : 'FAIL'} ${label}: ${fmtNum(measured, 3)} against ${fmtNum(committed, 3)} committed (${baseline!.commit}); the least allowed is ${fmtNum(least, 3)}`;
    return {
      ok,
      line,
      goal: {
        goal: `No regression (--compare): ${label} against the committed result`,
        target: `≥ ${fmtNum(least, 3)}`,
        measured: fmtNum(measured, 3),
        met: ok,
      },
    };
  });
  const goals = [...def.goals(result, ctx), ...checks.map((c) => c.goal)];
  const env = report.environmentInfo(redis.version, ctx.env);
  const missed = goals.filter((g) => g.met === false);
  const md = [
    ...report.reportHead(def.name, args, env, goals),
    ...(missed.length ? ['## Goals missed', '', ...missed.map((g) => `- **${g.goal}**: target ${g.target}, measured ${g.measured}.`), ''] : []),
    ...(checks.length ? ['## Comparison with the committed result', '', ...checks.map((c) => `- ${c.line}`), ''] : []),
    ...def.report(result, ctx),
  ];
  report.writeResult(def.name, md.join('\n'), outDir);
  report.writeJsonResult(def.name, p.dist, { args, environment: env, goals, ratios, rows, ...def.json?.(result, ctx) }, outDir);
  await redis.stop();
  if (checks.some((c) => !c.ok))
    throw new report.BenchCheckFailed(
      `${def.name}: regression against ${baseline!.file} (−${fmtNum(100 * tolerance, 0)}% allowed):\n  ${checks.map((c) => c.line).join('\n  ')}\n` +
        'Run it again on a quiet machine before blaming the code; if the drop is intended, run the standard bench on a quiet machine and commit the new results.',
    );
}

/** A goal a test asserts (the bench no longer checks it): the row names the test. */
export const testedGoal = (goal: string, target: string, test: string): GoalLine => ({ goal, target, measured: `asserted by ${test}`, test });

/** `a / b` req/s of two rows, or undefined when either is missing. */
export const rpsRatio = (a: Row | undefined, b: Row | undefined) => (a && b ? a.rps / b.rps : undefined);

/** A goal on the req/s of `a` over `b`: at least `min` (or information without one). */
export function ratioGoal(goal: string, a: Row | undefined, b: Row | undefined, min?: number): GoalLine[] {
  const r = rpsRatio(a, b);
  const measured = `${fmtNum(r, 2)} (${fmtInt(a?.rps ?? NaN)} / ${fmtInt(b?.rps ?? NaN)})`;
  return r === undefined
    ? []
    : [min === undefined ? { goal, target: 'information', measured, info: true } : { goal, target: `≥ ${min}`, measured, met: r >= min }];
}

/** The ratio for the JSON (`--compare` and history). */
export const jsonRatio = (a: Row | undefined, b: Row | undefined) => jsonNum(rpsRatio(a, b));

/** The rows as one table: rate, latency, answers, Redis commands and CPU per request (and each round's req/s after `ctx.rounds`). */
export function rowsTable(rows: Row[]): string {
  const us = (v: number | undefined) => (v === undefined ? 'n/a' : fmtInt(v));
  const rounds = rows.some((r) => r.rounds);
  return markdownTable(
    `Scenario|Target|req/s|p50 / p99 (ms)|Answers|Redis commands/request|Server CPU µs/request|Redis CPU µs/request|Other CPU on the machine${rounds ? '|req/s of each round' : ''}`.split(
      '|',
    ),
    rows.map((r) => [
      r.scenario,
      r.target,
      fmtInt(r.rps),
      `${r.p50} / ${r.p99}`,
      report.statusText(r.statuses) + (r.errors ? `, errors ${r.errors}` : ''),
      fmtNum(r.commandsPerRequest, 2),
      us(r.serverUs),
      us(r.redisUs),
      r.otherShare === undefined ? 'n/a' : `${fmtNum(100 * r.otherShare, 0)}%`,
      ...(rounds ? [(r.rounds ?? []).map(fmtInt).join(' / ')] : []),
    ]),
  );
}

/** One line per row: its most called Redis commands per request. */
export const topCommands = (rows: Row[], n = 8) =>
  rows.map((r) => {
    const top = Object.entries(r.commands).sort((a, b) => b[1] - a[1]);
    return `- ${r.scenario}, ${r.target}: ${top
      .slice(0, n)
      .map(([k, v]) => `${k} ${fmtNum(v / Math.max(1, r.requests), 2)}`)
      .join(', ')}`;
  });
