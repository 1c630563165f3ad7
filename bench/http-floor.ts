/**
 * http-floor: how close the full service comes to the fastest possible Node
 * server for the same work (one Lua script per request), and where the rest goes.
 *
 *   floor         bench/floor-server.ts: bare Fastify 5 + ioredis, EVALSHA of the same touch script.
 *   nest-minimal  bench/nest-minimal-server.ts: the floor's work in a minimal NestJS 11 app on
 *                 @nestjs/platform-fastify (one controller, no guards/pipes/filters/logger).
 *                 nest-minimal vs floor = what Nest itself costs; full vs nest-minimal = our layers.
 *   full          the real service (`node dist/main.js`, NODE_ENV=production, info logs to
 *                 /dev/null, rate limit on but never triggered), POST /diagnostics/touch with
 *                 a valid HS256 JWT per connection (100 accounts).
 * plus rows that locate the cost:
 *   layer:    the full stack with logging and/or the rate limit turned off by its own settings;
 *   profiled: the full stack under `node --cpu-prof`, summarised as self time by package,
 *             layers and top functions. `--only floor-profiled,nest-minimal-profiled` profiles the others.
 * To measure a patch before it lands, build it in a scratch copy and add `--candidate <copy>/dist`.
 * Only the standard run (no options) writes bench/results/http-floor.md and http-floor.json (the same
 * figures, machine-readable); runs with options write both to $TMPDIR/redis-pay-bench/.
 *
 * Regression check: `npm run bench -- http-floor --compare` runs only floor and full (3 rounds, no
 * profile, ~1 min) and exits 1 when full / floor by req/s is more than 10% below the committed
 * bench/results/http-floor.json (`--baseline FILE` for another). It never overwrites the committed results.
 *
 * Every server runs in its own process; autocannon runs in this one. One
 * redis-server serves every row. Each row: fresh server, smoke request,
 * warm-up, then the measured run.
 *
 * The server under test runs alone on the last CPU (taskset), this process (autocannon) and
 * redis-server on the others: left to the scheduler on 2 shared vCPUs, the same server's CPU
 * per request swung by ±20% from one few-second window to the next, even on an idle machine;
 * pinned, by about ±5%. On top, the standard run makes 3 rounds with the rows interleaved and
 * reports each row's median round, so a drift hits every row alike.
 *
 * Options: --connections N (100)  --duration S (4; profiled rows at least 5)  --warmup S (3)
 *          --no-variants  --no-profile  --only floor,nest-minimal,full,...
 *          --keep-profile DIR   copy the .cpuprofile files there (open in Chrome DevTools)
 *          --dist DIR           run the full stack from another build (e.g. a scratch copy with a patch)
 *          --no-pin             leave CPU placement to the scheduler (server, autocannon and redis share every CPU)
 *          --repeat N (3)       N rounds, rows interleaved; each row reports its median run; profiled rows run once, last
 *          --candidate DIR      add a row: the full stack built from DIR (repeatable), to A/B a patch
 *          --retries N (2)      rerun a row when other jobs used > 20% of a core during it; keep the least disturbed
 *          --budget S (200)     a retry starts only if it and the rows still to run fit in S seconds of rows (keeps the default run short)
 *          --compare            floor and full only (unless --only), then check full / floor against the committed result (see above); --budget 120
 *          --baseline FILE      the results JSON --compare checks against (default bench/results/http-floor.json)
 */
import { rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { profileMarkdown, ProfileSummary, summariseProfileDir } from './lib/cpu-profile';
import { fullEnv, ROOT, SERVICE_LAYERS, spawnBareServer, spawnFullStack, userToken } from './lib/full-stack';
import { LoadRequest, runLoad } from './lib/load';
import { cpuShares, Measured, measuredLoad, median, medianBy, otherShare, runLine, runSchedule, serverUsPerRequest } from './lib/measure';
import { freePort, httpRequest } from './lib/net';
import { waitUntilServing } from './lib/proc';
import { redisWritesFromEnv } from './lib/bare-server';
import { BenchRedis, startBenchRedis } from './lib/redis-server';
import { attemptsNote, candidateRow, parseRowOptions, placementInfo, prepareRows, roundSchedule, selectTargets } from './lib/rows';
import { environmentInfo, fmtInt, fmtNum, GoalLine, markdownTable, reportHead, writeResult } from './lib/report';
import {
  BenchCheckFailed,
  benchJson,
  compareWithBaseline,
  comparisonGoalLines,
  Comparison,
  comparisonLines,
  enforceComparison,
  jsonNum,
  readBaseline,
  writeJsonResult,
} from './lib/results-json';

const NAME = 'http-floor';
const GOAL = 0.7;
/** --compare fails when full / floor (req/s) is more than this share below the committed ratio. */
const COMPARE_TOLERANCE = 0.1;
/** Share of one core used by other jobs above which a row is flagged as disturbed. */
const BUSY_MACHINE = 0.2;
/** Profiled rows measure at least this long (s). */
const PROFILE_MIN_S = 5;
const ACCOUNTS = 100;
const LABEL = 'bench';
const TTL_S = 3600;

/** A server started from a .ts file in bench/ (by tsx) rather than the service's build. */
type BareKind = 'floor' | 'nest-minimal';
const BARE_SERVERS: Record<BareKind, string> = { floor: 'floor-server.ts', 'nest-minimal': 'nest-minimal-server.ts' };

interface Target {
  id: string;
  label: string;
  kind: BareKind | 'full';
  /** Env overrides on top of the full stack's bench env. */
  env?: Record<string, string>;
  /** Run under `node --cpu-prof` (its req/s is not comparable). */
  profile?: boolean;
  /** Another build of the service (its dist/ dir) instead of --dist. */
  dist?: string;
  /** `on-demand` rows run only when named by --only. */
  group: 'main' | 'variant' | 'profile' | 'on-demand';
}

interface RowResult extends Measured {
  target: Target;
  /** Runs of this row made to get one that other jobs did not disturb (1 = first try). */
  attempts: number;
  profile?: ProfileSummary;
  smoke: string;
}

function parseArgs(args: string[]) {
  let variants = true;
  let compare = false;
  let baseline: string | undefined;
  const own = (a: string, value: () => string) => {
    if (a === '--no-variants') variants = false;
    else if (a === '--compare') compare = true;
    else if (a === '--baseline') baseline = value();
    else return false;
    return true;
  };
  // A comparison runs the rows that give the ratio, and keeps its retries short.
  const budgetS = args.includes('--compare') ? 120 : 200;
  const o = parseRowOptions(args, { duration: 4, warmup: 3, budgetS }, own, '--no-variants --compare --baseline file');
  if (baseline !== undefined && !compare) throw new Error('--baseline needs --compare');
  if (compare) {
    variants = false;
    o.profile = false;
  }
  return Object.assign(o, { variants, compare, baseline });
}

const TARGETS: Target[] = [
  { id: 'floor', kind: 'floor', group: 'main', label: 'floor: bare Fastify + ioredis, EVALSHA only' },
  { id: 'nest-minimal', kind: 'nest-minimal', group: 'main', label: 'nest-minimal: minimal NestJS 11 app on Fastify, same work as the floor' },
  { id: 'full', kind: 'full', group: 'main', label: 'full: redis-pay, LOG_LEVEL=info (stdout → /dev/null), rate limit on' },
  { id: 'full-silent', kind: 'full', group: 'variant', env: { LOG_LEVEL: 'silent' }, label: 'layer: full, LOG_LEVEL=silent' },
  { id: 'full-norl', kind: 'full', group: 'variant', env: { RATE_LIMIT_ENABLED: 'false' }, label: 'layer: full, RATE_LIMIT_ENABLED=false' },
  {
    id: 'full-silent-norl',
    kind: 'full',
    group: 'variant',
    env: { LOG_LEVEL: 'silent', RATE_LIMIT_ENABLED: 'false' },
    label: 'layer: full, LOG_LEVEL=silent + RATE_LIMIT_ENABLED=false',
  },
  { id: 'full-profiled', kind: 'full', group: 'profile', profile: true, label: 'profiled: full under node --cpu-prof (not comparable)' },
  {
    id: 'nest-minimal-profiled',
    kind: 'nest-minimal',
    group: 'on-demand',
    profile: true,
    label: 'profiled: nest-minimal under node --cpu-prof (not comparable)',
  },
  { id: 'floor-profiled', kind: 'floor', group: 'on-demand', profile: true, label: 'profiled: floor under node --cpu-prof (not comparable)' },
];

function tokens(n: number): { account: string; token: string }[] {
  return Array.from({ length: n }, (_, i) => {
    const account = `bench-${i}`;
    return { account, token: userToken(account) };
  });
}

async function runTarget(t: Target, redis: BenchRedis, o: ReturnType<typeof parseArgs>, workDir: string, dist: string, luaDir: string): Promise<RowResult> {
  const port = await freePort();
  const prefix = `b-${t.id}`;
  const accounts = tokens(ACCOUNTS);
  const url = `http://127.0.0.1:${port}/diagnostics/touch`;
  const profDir = join(workDir, `prof-${t.id}`);

  let requests: LoadRequest[];
  let proc;
  const spawn = { id: t.id, port, cpus: o.serverCpus, profileDir: t.profile ? profDir : undefined };
  if (t.kind !== 'full') {
    proc = spawnBareServer({
      ...spawn,
      id: t.kind,
      script: join(__dirname, BARE_SERVERS[t.kind]),
      env: { ...process.env, PORT: String(port), REDIS_URL: redis.url, KEY_PREFIX: prefix, LUA_DIR: luaDir, NODE_ENV: 'production' },
    });
    requests = accounts.map((a) => ({
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ account: a.account, label: LABEL, ttlSeconds: TTL_S }),
    }));
  } else {
    proc = spawnFullStack({ ...spawn, dist, workDir, env: fullEnv(port, redis.url, prefix, t.env) });
    requests = accounts.map((a) => ({
      headers: { 'content-type': 'application/json', authorization: `Bearer ${a.token}` },
      body: JSON.stringify({ label: LABEL, ttlSeconds: TTL_S }),
    }));
  }

  try {
    await waitUntilServing(proc, port, t.kind === 'full' ? `http://127.0.0.1:${port}/health/ready` : undefined, 60_000);

    // Smoke: one request must be a 200 with the expected shape.
    const first = requests[0];
    const ans = await httpRequest(url, { method: 'POST', headers: first.headers, body: first.body });
    let parsed: Record<string, unknown> = {};
    try {
      parsed = JSON.parse(ans.body) as Record<string, unknown>;
    } catch {
      /* checked below */
    }
    if (ans.status !== 200 || typeof parsed.count !== 'number' || typeof parsed.serverTimeMs !== 'number' || parsed.accountId !== accounts[0].account) {
      throw new Error(`${t.id}: smoke request failed: ${ans.status} ${ans.body.slice(0, 300)}\n${proc.tail()}`);
    }
    // The rate limit must really run (and never bite) where it is on.
    const rlOn = t.kind === 'full' && t.env?.RATE_LIMIT_ENABLED !== 'false';
    if (rlOn && ans.headers['x-ratelimit-limit'] !== '10000000') {
      throw new Error(`${t.id}: expected x-ratelimit-limit: 10000000, got ${String(ans.headers['x-ratelimit-limit'])}`);
    }
    if (!rlOn && ans.headers['x-ratelimit-limit'] !== undefined) throw new Error(`${t.id}: rate limit should be off`);

    console.error(`[bench] ${t.id}: warm-up ${o.warmup} s`);
    await runLoad({ url, connections: o.connections, durationS: o.warmup, requests, title: `${t.id} warm-up` });

    // A profile needs more samples than a throughput figure.
    const durationS = t.profile ? Math.max(o.duration, PROFILE_MIN_S) : o.duration;
    console.error(`[bench] ${t.id}: measuring ${durationS} s at ${o.connections} connections`);
    const m = await measuredLoad({ url, connections: o.connections, durationS, requests, title: t.id }, proc.pid, redis.process.pid);
    proc.assertAlive();
    const exit = await proc.stop(15_000);

    let profile: ProfileSummary | undefined;
    if (t.profile) {
      const keep = o.keepProfile ? { dir: o.keepProfile, name: `${t.id}.cpuprofile` } : undefined;
      profile = summariseProfileDir(profDir, [ROOT, dirname(dist)], SERVICE_LAYERS, [m.window], t.kind === 'full' ? 25 : 15, keep)?.[0];
      if (!profile) console.error(`[bench] ${t.id}: no profile (server exit: ${exit})`);
    }
    const result: RowResult = { ...m, target: t, attempts: 1, profile, smoke: ans.body };
    console.error(runLine(t.id, m));
    return result;
  } finally {
    await proc.stop(15_000);
    rmSync(profDir, { recursive: true, force: true });
  }
}

function warnings(rows: RowResult[]): string[] {
  const out: string[] = [];
  for (const r of rows) {
    const l = r.load;
    if (l.non2xx > 0 || l.errors > 0 || l.timeouts > 0 || l.ok === 0) {
      out.push(
        `${r.target.id}: ${l.non2xx} non-2xx responses, ${l.errors} errors, ${l.timeouts} timeouts out of ${l.total} (status codes: ${JSON.stringify(l.statusCodes)})`,
      );
    }
  }
  return out;
}

/**
 * Each step of the waterfall adds one slice of the full stack to the row before it, so the
 * differences of server CPU per request add up to full − floor.
 */
const STEPS: { id: string; adds: string }[] = [
  { id: 'floor', adds: 'Fastify + ioredis + Node HTTP: the least any server can do' },
  { id: 'nest-minimal', adds: 'NestJS itself: router, execution context, param resolution, Fastify adapter' },
  { id: 'full-silent-norl', adds: 'our always-on layers: JWT auth guard, ValidationPipe, metrics, request id, raw body, exception filter, hooks' },
  { id: 'full-silent', adds: 'the leased rate limit (RateLimitGuard, headers, ~1% lease calls)' },
  { id: 'full', adds: 'the access log (pino, one JSON line per request to /dev/null)' },
];

/** The "Where the time goes" section: ratios of the main rows and the per-request CPU waterfall. */
function whereTheTimeGoes(rows: RowResult[], cpuPerReq: (r: RowResult) => number | undefined): string[] {
  const row = (id: string) => rows.find((r) => r.target.id === id);
  const floor = row('floor');
  const nest = row('nest-minimal');
  const full = row('full');
  if (!floor || !nest || !full) return [];
  const us = (r: RowResult | undefined) => (r ? cpuPerReq(r) : undefined);
  const [fl, ne, fu] = [us(floor), us(nest), us(full)];
  const out: string[] = ['## Where the time goes', ''];
  const cpuCell = (a: number | undefined, b: number | undefined) =>
    a !== undefined && b !== undefined ? `${fmtNum(b / a, 2)} (${fmtNum(b, 0)} ÷ ${fmtNum(a, 0)} µs)` : 'n/a';
  out.push(
    markdownTable(
      ['Ratio', 'by req/s', 'by server CPU per request (inverse)'],
      [
        ['full / floor: the whole gap', fmtNum(full.load.rps / floor.load.rps, 2), cpuCell(fu, fl)],
        ["nest-minimal / floor: Nest's own cost", fmtNum(nest.load.rps / floor.load.rps, 2), cpuCell(ne, fl)],
        ['full / nest-minimal: our layers on top of Nest', fmtNum(full.load.rps / nest.load.rps, 2), cpuCell(fu, ne)],
      ],
      ['left', 'right', 'right'],
    ),
  );
  out.push('');
  out.push('Server CPU per request, each row adding one slice to the row above (differences of a few µs are within the noise):');
  out.push('');
  const steps = STEPS.map((s) => ({ ...s, r: row(s.id) })).filter((s) => s.r && us(s.r) !== undefined);
  out.push(
    markdownTable(
      ['Row', 'req/s', 'server CPU µs/req', 'added µs/req', 'what the step adds'],
      steps.map((s, i) => {
        const prev = i > 0 ? us(steps[i - 1].r) : undefined;
        const mine = us(s.r)!;
        return [s.id, fmtInt(s.r!.load.rps), fmtNum(mine, 0), prev === undefined ? '' : `${mine >= prev ? '+' : ''}${fmtNum(mine - prev, 0)}`, s.adds];
      }),
      ['left', 'right', 'right', 'right', 'left'],
    ),
  );
  out.push('');
  if (fl !== undefined && ne !== undefined && fu !== undefined && fu > fl) {
    const gap = fu - fl;
    out.push(
      `Of the ${fmtNum(gap, 0)} µs of server CPU the full stack spends per request beyond the floor, ` +
        `${fmtNum(ne - fl, 0)} µs (${fmtNum((100 * (ne - fl)) / gap, 0)}%) are NestJS itself and ` +
        `${fmtNum(fu - ne, 0)} µs (${fmtNum((100 * (fu - ne)) / gap, 0)}%) are our layers on top of it. ` +
        `Measured by CPU, the goal (${GOAL} × floor) means at most ~${fmtNum(fl / GOAL, 0)} µs per request.`,
    );
    out.push('');
    const norl = us(row('full-norl'));
    const silentNorl = us(row('full-silent-norl'));
    if (norl !== undefined && silentNorl !== undefined) {
      out.push(
        `Cross-check the other way round: the access log alone adds ${fmtNum(norl - silentNorl, 0)} µs (full-norl − full-silent-norl), the rate limit ${fmtNum(fu - norl, 0)} µs (full − full-norl).`,
      );
    }
    out.push('');
  }
  return out;
}

export async function main(args: string[]): Promise<void> {
  const o = parseArgs(args);
  const targets = selectTargets(TARGETS, o, (t) => (o.compare ? t.id === 'floor' || t.id === 'full' : o.variants || t.group !== 'variant'), candidateRow);
  if (o.compare && !(targets.some((t) => t.id === 'floor') && targets.some((t) => t.id === 'full'))) throw new Error('--compare needs the floor and full rows');
  // Read the baseline first: a missing or foreign one fails before a minute of load.
  const baseline = o.compare ? readBaseline(NAME, o.baseline) : undefined;
  // Every build (and the floor's Lua) from its snapshot; the server alone on one CPU.
  const { workDir, builds, split } = prepareRows(o);
  const luaDir = join(builds.get(o.dist)!, '..', 'lua');
  const redis = await startBenchRedis();
  const env = environmentInfo(redis.version, {
    autocannon: `9 (in the bench process), ${o.connections} connections, ${o.warmup} s warm-up + ${o.duration} s measured per row (profiled: ${Math.max(o.duration, PROFILE_MIN_S)} s)`,
    ...placementInfo(o, split),
    "Baseline servers' Redis writes": `${redisWritesFromEnv()} (BASELINE_REDIS_WRITES; coalesce = as the service's command connection)`,
  });
  const { schedule, announce } = roundSchedule(targets, o.repeat);
  console.error(`[bench] redis ${redis.version} at ${redis.url}; ${schedule.length} runs (${o.repeat} rounds) of ~${o.warmup + o.duration} s each`);

  const {
    kept,
    everyAttempt,
    retriesSkipped,
    wallS: rowsWallS,
  } = await runSchedule(
    schedule,
    (t, n, attempt) => {
      announce(n, attempt);
      return runTarget(t, redis, o, workDir, builds.get(t.dist ?? o.dist)!, luaDir);
    },
    (r) => otherShare(r),
    { busyShare: BUSY_MACHINE, retries: o.retries, budgetS: o.budgetS },
    (t) => t.id,
  );
  const runs = new Map<string, RowResult[]>(targets.map((t) => [t.id, kept.filter((r) => r.target.id === t.id)]));
  await redis.stop();
  const rows: RowResult[] = targets.map((t) => medianBy(runs.get(t.id)!, (r) => r.load.rps));

  const floor = rows.find((r) => r.target.id === 'floor');
  const full = rows.find((r) => r.target.id === 'full');
  /** Server CPU µs per request of a row: the median over its rounds (taken on its own, not from the median req/s round). */
  const cpuPerReq = (r: RowResult) => median(runs.get(r.target.id)!.map(serverUsPerRequest));
  /** redis-server CPU µs per request of a row, the median over its rounds: the touch script's own time plus Redis's I/O for it. */
  const redisPerReq = (r: RowResult) =>
    median(runs.get(r.target.id)!.map((x) => (x.redisCpuS !== undefined && x.load.total > 0 ? (x.redisCpuS * 1e6) / x.load.total : undefined)));
  const ratio = floor && full ? full.load.rps / floor.load.rps : undefined;
  const fl = floor && cpuPerReq(floor);
  const fu = full && cpuPerReq(full);
  const cpuRatio = fl !== undefined && fu !== undefined ? fl / fu : undefined;

  const table = markdownTable(
    [
      'Row',
      'req/s (mean)',
      'p50 ms',
      'p99 ms',
      'non-2xx',
      'errors',
      '× floor req/s',
      'server CPU µs/req',
      'redis CPU µs/req',
      'CPU % server / redis / autocannon / other jobs',
      ...(o.repeat > 1 ? ['req/s of each round'] : []),
    ],
    rows.map((r) => {
      const mine = runs.get(r.target.id)!;
      const warn = mine.some((x) => x.load.non2xx > 0 || x.load.errors > 0) ? ' ⚠' : '';
      return [
        r.target.label + warn + attemptsNote(mine),
        fmtInt(r.load.rps),
        fmtNum(r.load.p50, 0),
        fmtNum(r.load.p99, 0),
        fmtInt(mine.reduce((n, x) => n + x.load.non2xx, 0)),
        fmtInt(mine.reduce((n, x) => n + x.load.errors, 0)),
        floor ? fmtNum(r.load.rps / floor.load.rps, 2) : 'n/a',
        fmtNum(cpuPerReq(r), 0),
        fmtNum(redisPerReq(r), 1),
        cpuShares(r),
        ...(o.repeat > 1 ? [mine.map((x) => fmtInt(x.load.rps)).join(' / ')] : []),
      ];
    }),
    ['left', 'right', 'right', 'right', 'right', 'right', 'right', 'right', 'right', 'right', 'left'],
  );

  // Failed requests invalidate a row even in an attempt that was not kept.
  const warns = warnings(everyAttempt);
  const disturbed = targets
    .map((t) => ({ id: t.id, all: runs.get(t.id)!.length, bad: runs.get(t.id)!.filter((r) => otherShare(r) > BUSY_MACHINE).length }))
    .filter((d) => d.bad > 0);
  const disturbedRuns = { disturbed: kept.filter((r) => otherShare(r) > BUSY_MACHINE).length, of: kept.length };
  const comparison = baseline
    ? compareWithBaseline(baseline, [{ key: 'fullOverFloorRps', label: 'full / floor req/s', measured: ratio }], COMPARE_TOLERANCE)
    : undefined;
  const goals = goalLines(ratio, floor, full, fl, fu, comparison);

  const md: string[] = [];
  md.push(...reportHead(NAME, args, env, goals));
  md.push(
    `Load: POST /diagnostics/touch, ${ACCOUNTS} accounts (one per connection; a JWT each for the full stack, the account in the body for the floor), ` +
      'one redis-server (no persistence) for every row, each server in its own process, fresh per row. ' +
      'Latency percentiles have 1 ms resolution (autocannon). CPU columns come from /proc over the measured run: 100% = one core.' +
      (o.repeat > 1
        ? ` ${o.repeat} rounds, rows interleaved, profiled rows once at the end; each row shows its median round by req/s (req/s, latency, CPU %), ` +
          'the median over rounds of server CPU µs/req, and non-2xx and errors summed over rounds.'
        : ''),
  );
  md.push('');
  md.push('## Results');
  md.push('');
  md.push(table);
  md.push('');
  if (ratio !== undefined) {
    md.push(
      `**full / floor = ${fmtNum(ratio, 2)}** by req/s (goal ≥ ${GOAL}: ${ratio >= GOAL ? 'met' : '**not met**'})` +
        (cpuRatio !== undefined ? `; by server CPU per request ${fmtNum(cpuRatio, 2)} (floor µs/req ÷ full µs/req).` : '.'),
    );
    md.push('');
  }
  if (comparison) {
    md.push('## Comparison with the committed result', '');
    md.push(...comparisonLines(comparison).map((l) => `- ${l}`), '');
  }
  md.push(...whereTheTimeGoes(rows, cpuPerReq));
  if (disturbed.length) {
    md.push(
      `> ⚠ Other jobs used more than ${BUSY_MACHINE * 100}% of a core, even after retries, during: ` +
        `${disturbed.map((d) => (d.all > 1 ? `${d.id} (${d.bad} of ${d.all} rounds)` : d.id)).join(', ')}. ` +
        'Such runs are slower than on a quiet machine; a row disturbed in most of its rounds needs a rerun before conclusions are drawn from it.',
    );
    md.push('');
  }
  if (warns.length) {
    md.push('> ⚠ **Some requests failed; the figures of those rows are not valid:**');
    for (const w of warns) md.push(`> - ${w}`);
    md.push('');
  }
  for (const prof of rows.filter((r) => r.profile)) {
    md.push(`## CPU profile: ${prof.target.id}`);
    md.push('');
    md.push(`From \`node --cpu-prof\` (row "${prof.target.label}"); only samples of the measured run count.`);
    md.push('');
    md.push(profileMarkdown(prof.profile!, prof.load.total));
    md.push('');
  }
  md.push('## Notes');
  md.push('');
  md.push(
    "- Rows: `floor` and `full` answer the question; `nest-minimal` (bench/nest-minimal-server.ts) does the floor's work inside a minimal NestJS app " +
      "(one controller, `@Body()`, no guards, pipes, filters, interceptors or logger), so it splits the gap into Nest's share and ours; " +
      '`layer:` rows turn one layer of the real service off through its own settings; ' +
      '`candidate` rows (with `--candidate DIR`) run another build; `profiled:` rows run under `node --cpu-prof`, so their req/s is not comparable.',
  );
  md.push('- The difference between two rows that differ by one setting is the cost of that layer (within the noise: see the CPU column).');
  md.push(
    '- CPU column: share of one core used during the measured run by the server process, redis-server, the load generator (this process) and everything else on the machine. ' +
      '"server CPU µs/req" is server CPU time ÷ requests: it depends less on the load generator and on other jobs than req/s does.',
  );
  md.push(
    split
      ? `- Each server under test has CPU ${split.server} to itself (it cannot use more than 100% of a core, GC threads included), ` +
          `so req/s is what one core of this server does; autocannon and redis-server share CPU ${split.rest}. ` +
          'The machine is shared and noisy all the same: compare rows of one run.'
      : '- The machine has few, shared cores: autocannon, the server and redis-server compete for them, so req/s is capped by the machine, not only by the server, ' +
          'and noisy; compare rows of one run.',
  );
  md.push(
    '- The floor and nest-minimal do strictly less work per request than the full stack: no auth, no validation, no logging, no metrics, no request id, ' +
      'no raw body. With the rate limit on, the full stack also leases rate-limit tokens from Redis (one extra script call per account and window, ' +
      'about 1% of requests here); every other request makes the one touch call, as the floor does.',
  );
  if (retriesSkipped > 0) {
    md.push(`- ${retriesSkipped} retr${retriesSkipped === 1 ? 'y was' : 'ies were'} skipped to keep the run within --budget ${o.budgetS} s of rows.`);
  }
  md.push(`- The rows took ${fmtNum(rowsWallS, 0)} s of wall time in all (${everyAttempt.length} runs).`);
  // Only the standard run (no options) replaces the checked-in result; runs with options (--compare among them) go to the temp dir.
  const outDir = args.length > 0 ? join(tmpdir(), 'redis-pay-bench') : undefined;
  writeResult(NAME, md.join('\n'), outDir);
  const json = benchJson(
    {
      bench: NAME,
      args,
      dist: o.dist,
      environment: env,
      goals,
      disturbedRuns,
      ratios: { fullOverFloorRps: jsonNum(ratio), fullOverFloorCpu: jsonNum(cpuRatio) },
    },
    {
      rows: rows.map((r) => {
        const mine = runs.get(r.target.id)!;
        return {
          id: r.target.id,
          label: r.target.label,
          group: r.target.group,
          ...(r.target.dist ? { dist: r.target.dist } : {}),
          rps: jsonNum(r.load.rps, 0),
          p50Ms: r.load.p50,
          p99Ms: r.load.p99,
          overFloorRps: floor ? jsonNum(r.load.rps / floor.load.rps) : null,
          serverUsPerRequest: jsonNum(cpuPerReq(r), 1),
          redisUsPerRequest: jsonNum(redisPerReq(r), 1),
          cpuShare: {
            server: jsonNum(r.serverCpuS !== undefined ? r.serverCpuS / r.wallS : undefined),
            redis: jsonNum(r.redisCpuS !== undefined ? r.redisCpuS / r.wallS : undefined),
            autocannon: jsonNum(r.loadCpuS / r.wallS),
            other: jsonNum(r.otherCpuS !== undefined ? r.otherCpuS / r.wallS : undefined),
          },
          non2xx: mine.reduce((n, x) => n + x.load.non2xx, 0),
          errors: mine.reduce((n, x) => n + x.load.errors, 0),
          rounds: mine.map((x) => ({
            rps: jsonNum(x.load.rps, 0),
            serverUsPerRequest: jsonNum(serverUsPerRequest(x), 1),
            otherShare: jsonNum(otherShare(x)),
            attempts: x.attempts,
          })),
          ...(r.profile
            ? {
                profileLayersUsPerRequest: Object.fromEntries(r.profile.layers.map((l) => [l.name, jsonNum(l.us / r.load.total, 1)])),
                profileBusyUsPerRequest: jsonNum(r.profile.busyUs / r.load.total, 1),
              }
            : {}),
        };
      }),
      ...(comparison ? { comparison: { baseline: comparison.baselinePath, tolerance: COMPARE_TOLERANCE, ok: comparison.ok } } : {}),
    },
  );
  writeJsonResult(NAME, json, outDir);

  if (ratio !== undefined) console.log(`[bench] full/floor req/s ratio: ${fmtNum(ratio, 2)} (goal >= ${GOAL})${ratio < GOAL ? ' — BELOW GOAL' : ''}`);
  if (warns.length) {
    const bar = '!'.repeat(78);
    console.error(
      `\n${bar}\n!! WARNING: non-2xx responses or errors during the benchmark; results are NOT valid\n${warns.map((w) => `!!   ${w}`).join('\n')}\n${bar}\n`,
    );
  }
  if (comparison) {
    if (warns.length) throw new BenchCheckFailed(`${NAME}: requests failed during the comparison run, so it proves nothing:\n  ${warns.join('\n  ')}`);
    enforceComparison(NAME, comparison, disturbedRuns);
  }
}

/** The report's goals table: the goal itself, the CPU view of it, and with --compare the regression check. */
function goalLines(
  ratio: number | undefined,
  floor: RowResult | undefined,
  full: RowResult | undefined,
  floorUs: number | undefined,
  fullUs: number | undefined,
  comparison: Comparison | undefined,
): GoalLine[] {
  const goals: GoalLine[] = [
    {
      goal: 'Full service within reach of the fastest server for the same work (POST /diagnostics/touch, full / floor req/s)',
      target: `≥ ${GOAL}`,
      measured: ratio !== undefined && floor && full ? `${fmtNum(ratio, 2)} (${fmtInt(full.load.rps)} vs ${fmtInt(floor.load.rps)} req/s)` : 'not measured',
      met: ratio === undefined ? undefined : ratio >= GOAL,
    },
    {
      goal: 'The same by server CPU per request (floor µs ÷ full µs)',
      target: `≥ ${GOAL}`,
      measured:
        floorUs !== undefined && fullUs !== undefined ? `${fmtNum(floorUs / fullUs, 2)} (${fmtNum(floorUs, 0)} ÷ ${fmtNum(fullUs, 0)} µs)` : 'not measured',
      info: true,
    },
  ];
  return [...goals, ...comparisonGoalLines(comparison)];
}
