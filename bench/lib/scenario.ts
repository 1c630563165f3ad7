/**
 * The one scenario harness: a bench is a load, its baseline and its report. `defineBench` parses the options
 * (`--quick`, `--only <sections>`, `--dist DIR` and the bench's own), snapshots the build, starts a redis-server,
 * hands the bench a context to start the built service and baseline servers and to measure rows on them, then
 * writes the report (title, environment, the Goals table, missed goals, the bench's sections) and its JSON
 * (goals, ratios, figures). Only the standard run (no options) writes bench/results; any other run writes to
 * $TMPDIR/redis-pay-bench/.
 */
import { mkdirSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { benchWorkDir } from './cleanup';
import { commandStats, statsDelta } from './command-stats';
import { ROOT, snapshotBuild, spawnBareServer } from './full-stack';
import type { LoadRequest } from './load';
import { measuredLoad } from './measure';
import { freePort } from './net';
import { type ManagedProcess, waitUntilServing } from './proc';
import { type BenchRedis, startBenchRedis } from './redis-server';
import { environmentInfo, fmtInt, fmtNum, type GoalLine, markdownTable, reportHead, RESULTS_DIR, statusText, writeResult } from './report';
import { benchJson, jsonNum, writeJsonResult } from './results-json';
import { type Service, startService, UNDER_LOAD_ENV } from './service-http';

/** A server under load: the built service or a baseline (floor) server. */
export interface Target {
  id: string;
  url: string;
  port: number;
  pid: number;
  proc: ManagedProcess;
  stop(): Promise<unknown>;
}

/** One measured load run: rate, latency, answers, and per request the Redis commands and CPU of each party. */
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
}

export interface BenchContext {
  name: string;
  args: string[];
  quick: boolean;
  /** No options: the run that writes bench/results. */
  standard: boolean;
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
  /** The built service on a free port (the bench's service env, then `env`; `redisEnv` default: the bench's Redis). */
  service(id: string, env?: Record<string, string>, redisEnv?: Record<string, string>): Promise<Target & Service>;
  /** A baseline server (`bench/<script>`, run by tsx) on a free port: `env`, then PORT and REDIS_URL (KEY_PREFIX, LUA_DIR, DIST by default). */
  floor(id: string, script: string, env?: Record<string, string>): Promise<Target>;
  /** One measured load on `on`: `durationS` (default: 8 s, 3 with --quick), 100 connections. Kept in `rows` unless `warmup`. */
  measure(
    scenario: string,
    on: Target,
    requests: LoadRequest[] | (() => LoadRequest),
    o?: { durationS?: number; warmup?: boolean; connections?: number },
  ): Promise<Row>;
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
  prefix: string;
  run(ctx: BenchContext): Promise<R>;
  goals(r: R, ctx: BenchContext): GoalLine[];
  /** The report's sections after the Goals table. */
  report(r: R, ctx: BenchContext): string[];
  ratios?(r: R, ctx: BenchContext): Record<string, number | null>;
  json?(r: R, ctx: BenchContext): Record<string, unknown>;
}

const CONNECTIONS = 100;

/** A bench module's `main`, for bench/run.ts. */
export function defineBench<R>(def: BenchDefinition<R>): { main(args: string[]): Promise<void> } {
  return { main: (args) => runBench(def, args) };
}

function parse(def: BenchDefinition<unknown>, args: string[]) {
  const known = def.sections ?? [];
  const opts: Record<string, string | true | undefined> = {};
  let quick = false;
  let only: string[] | undefined;
  let dist = join(ROOT, 'dist');
  const usage = () =>
    `known: --quick, --dist DIR${known.length ? `, --only ${known.join(',')}` : ''}${Object.keys(def.options ?? {})
      .map((k) => `, --${k}`)
      .join('')}`;
  for (let i = 0; i < args.length; i++) {
    const a = args[i];
    const kind = def.options?.[a.slice(2)];
    if (a === '--quick') quick = true;
    else if (a === '--dist') dist = resolve(args[++i] ?? 'dist');
    else if (a === '--only' && known.length) {
      only = (args[++i] ?? '').split(',').filter(Boolean);
      if (only.length === 0 || only.some((s) => !known.includes(s))) throw new Error(`--only takes a comma-separated list of ${known.join(', ')}`);
    } else if (a.startsWith('--') && kind) opts[a.slice(2)] = kind === 'flag' ? true : (args[++i] ?? '');
    else throw new Error(`unknown option ${a} (${usage()})`);
  }
  return { quick, sections: new Set(only ?? known), dist, opts };
}

async function runBench<R>(def: BenchDefinition<R>, args: string[]): Promise<void> {
  const p = parse(def as BenchDefinition<unknown>, args);
  const standard = args.length === 0;
  const workDir = benchWorkDir(`rp-${def.name}-`);
  const dist = snapshotBuild(p.dist, join(workDir, 'build'));
  const redis = await startBenchRedis();
  const serviceEnv = { ...UNDER_LOAD_ENV, ...def.serviceEnv };
  const rows: Row[] = [];
  const outDir = standard ? RESULTS_DIR : join(tmpdir(), 'redis-pay-bench');
  mkdirSync(outDir, { recursive: true });
  const ctx: BenchContext = {
    name: def.name,
    args,
    quick: p.quick,
    standard,
    has: (s) => p.sections.has(s),
    opts: p.opts,
    dist,
    workDir,
    redis,
    outDir,
    rows,
    env: {},
    seconds: (s, q) => (p.quick ? q : s),
    async service(id, env = {}, redisEnv = { REDIS_URL: redis.url }) {
      const s = await startService(dist, workDir, id, def.prefix, { ...serviceEnv, ...env }, redisEnv);
      return { ...s, id, url: `http://127.0.0.1:${s.port}`, pid: s.proc.pid, stop: () => s.proc.stop() };
    },
    async floor(id, script, env = {}) {
      const port = await freePort();
      const proc = spawnBareServer({
        id,
        port,
        script: join(ROOT, 'bench', script),
        env: {
          ...process.env,
          NODE_ENV: 'production',
          KEY_PREFIX: def.prefix,
          LUA_DIR: join(dist, '..', 'lua'),
          DIST: dist,
          ...env,
          PORT: String(port),
          REDIS_URL: redis.url,
        },
      });
      await waitUntilServing(proc, port, undefined, 60_000);
      return { id, port, url: `http://127.0.0.1:${port}`, pid: proc.pid, proc, stop: () => proc.stop() };
    },
    async measure(scenario, on, requests, o = {}) {
      const before = await commandStats([redis.url]);
      const durationS = o.durationS ?? ctx.seconds(8, 3);
      const m = await measuredLoad(
        { url: on.url, connections: o.connections ?? CONNECTIONS, durationS, requests, title: `${scenario} ${on.id}` },
        on.pid,
        redis.process.pid,
      );
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
      console.log(`[bench] ${scenario} / ${on.id}: ${fmtInt(row.rps)} req/s, p99 ${row.p99} ms, ${fmtNum(row.commandsPerRequest, 2)} Redis commands/request`);
      if (!o.warmup) rows.push(row);
      return row;
    },
    row: (scenario, target) => rows.find((r) => r.scenario === scenario && r.target === target),
  };
  const result = await def.run(ctx);
  const goals = def.goals(result, ctx);
  const env = environmentInfo(redis.version, ctx.env);
  const missed = goals.filter((g) => g.met === false);
  const md = [
    ...reportHead(def.name, args, env, goals),
    ...(missed.length ? ['## Goals missed', '', ...missed.map((g) => `- **${g.goal}**: target ${g.target}, measured ${g.measured}.`), ''] : []),
    ...def.report(result, ctx),
  ];
  writeResult(def.name, md.join('\n'), outDir);
  const head = { bench: def.name, args, environment: env, goals, dist: p.dist, ratios: def.ratios?.(result, ctx) ?? {} };
  writeJsonResult(def.name, benchJson(head, { rows, ...def.json?.(result, ctx) }), outDir);
  await redis.stop();
}

// ---------------------------------------------------------------------------------------------
// Report pieces

/** A goal a test asserts (the bench no longer checks it): the row names the test. */
export const testedGoal = (goal: string, target: string, test: string): GoalLine => ({ goal, target, measured: `asserted by ${test}`, test });

/** `a / b` req/s of two rows, or undefined when either is missing. */
export const rpsRatio = (a: Row | undefined, b: Row | undefined) => (a && b ? a.rps / b.rps : undefined);

/** A goal on the req/s of `a` over `b`: at least `min` (or information without one). */
export function ratioGoal(goal: string, a: Row | undefined, b: Row | undefined, min?: number): GoalLine[] {
  const r = rpsRatio(a, b);
  if (r === undefined) return [];
  const measured = `${fmtNum(r, 2)} (${fmtInt(a!.rps)} / ${fmtInt(b!.rps)})`;
  return [min === undefined ? { goal, target: 'information', measured, info: true } : { goal, target: `≥ ${min}`, measured, met: r >= min }];
}

/** The ratio for the JSON (`--compare` and history). */
export const jsonRatio = (a: Row | undefined, b: Row | undefined) => jsonNum(rpsRatio(a, b));

/** The rows as one table: rate, latency, answers, Redis commands and CPU per request. */
export function rowsTable(rows: Row[]): string {
  const us = (v: number | undefined) => (v === undefined ? 'n/a' : fmtInt(v));
  return markdownTable(
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
    rows.map((r) => [
      r.scenario,
      r.target,
      fmtInt(r.rps),
      `${r.p50} / ${r.p99}`,
      statusText(r.statuses) + (r.errors ? `, errors ${r.errors}` : ''),
      fmtNum(r.commandsPerRequest, 2),
      us(r.serverUs),
      us(r.redisUs),
      r.otherShare === undefined ? 'n/a' : `${fmtNum(100 * r.otherShare, 0)}%`,
    ]),
  );
}

/** One line per row: its most called Redis commands per request. */
export const topCommands = (rows: Row[], n = 8) =>
  rows.map(
    (r) =>
      `- ${r.scenario}, ${r.target}: ${Object.entries(r.commands)
        .sort((a, b) => b[1] - a[1])
        .slice(0, n)
        .map(([k, v]) => `${k} ${fmtNum(v / Math.max(1, r.requests), 2)}`)
        .join(', ')}`,
  );
