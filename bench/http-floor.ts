/**
 * http-floor: how close the full service comes to the fastest possible Node server for the same work (one Lua script
 * per request, POST /diagnostics/touch), and where the rest goes.
 *
 *   floor         bench/floor-server.ts: bare Fastify 5 + ioredis, EVALSHA of the same touch script.
 *   nest-minimal  bench/nest-minimal-server.ts: the floor's work in a minimal NestJS 11 app on @nestjs/platform-fastify
 *                 (one controller, no guards/pipes/filters/logger). nest-minimal vs floor = what Nest itself costs;
 *                 full vs nest-minimal = our layers.
 *   full          the real service (`node dist/main.js`, NODE_ENV=production, info logs to /dev/null, rate limit on
 *                 but never triggered), a valid HS256 JWT per connection (100 accounts).
 *   layer rows    the full stack with logging and/or the rate limit turned off by its own settings (--no-variants: none).
 *
 * Every server runs in its own process, fresh per row, alone on the last CPU (taskset; --no-pin leaves it to the
 * scheduler); autocannon and the one redis-server on the others. Each row: smoke request, warm-up, measured run; the
 * rows interleave over --repeat rounds (3) and each shows its median round. BENCH_PROFILE_DIR=dir runs every server
 * under `node --cpu-prof` (open the profiles in Chrome DevTools); --dist DIR measures another build.
 *
 * Regression check: `npm run bench -- http-floor --compare` runs only floor and full (3 rounds) and exits 1 when full /
 * floor by req/s is more than 10% below the committed bench/results/http-floor.json (`--baseline FILE` for another).
 * Only the standard run (no options) writes bench/results/http-floor.{md,json}; others write to $TMPDIR/redis-pay-bench/.
 */
import { redisWritesFromEnv } from './lib/bare-server';
import { userToken } from './lib/full-stack';
import type { LoadRequest } from './lib/load';
import { httpRequest } from './lib/proc';
import { fmtInt, fmtNum, type GoalLine, jsonNum, markdownTable } from './lib/report';
import { type BenchContext, defineBench, jsonRatio, type Row, rowsTable, type Target } from './lib/scenario';

const GOAL = 0.7;
const ACCOUNTS = Array.from({ length: 100 }, (_, i) => `bench-${i}`);
const BODY = { label: 'bench', ttlSeconds: 3600 };

/** The rows: a baseline server (a script in bench/) or the full stack with `env` on top of the bench's. */
const TARGETS: { id: string; label: string; script?: string; env?: Record<string, string>; variant?: true }[] = [
  { id: 'floor', script: 'floor-server.ts', label: 'floor: bare Fastify + ioredis, EVALSHA only' },
  { id: 'nest-minimal', script: 'nest-minimal-server.ts', label: 'nest-minimal: minimal NestJS 11 app on Fastify, same work as the floor' },
  { id: 'full', label: 'full: redis-pay, LOG_LEVEL=info (stdout → /dev/null), rate limit on' },
  { id: 'full-silent', variant: true, env: { LOG_LEVEL: 'silent' }, label: 'layer: full, LOG_LEVEL=silent' },
  { id: 'full-norl', variant: true, env: { RATE_LIMIT_ENABLED: 'false' }, label: 'layer: full, RATE_LIMIT_ENABLED=false' },
  {
    id: 'full-silent-norl',
    variant: true,
    env: { LOG_LEVEL: 'silent', RATE_LIMIT_ENABLED: 'false' },
    label: 'layer: full, LOG_LEVEL=silent + RATE_LIMIT_ENABLED=false',
  },
];

/** Each step adds one slice of the full stack to the row before it, so the differences of server CPU per request add up to full − floor. */
const STEPS: [id: string, adds: string][] = [
  ['floor', 'Fastify + ioredis + Node HTTP: the least any server can do'],
  ['nest-minimal', 'NestJS itself: router, execution context, param resolution, Fastify adapter'],
  ['full-silent-norl', 'our always-on layers: JWT auth guard, ValidationPipe, metrics, request id, raw body, exception filter, hooks'],
  ['full-silent', 'the leased rate limit (RateLimitGuard, headers, ~1% lease calls)'],
  ['full', 'the access log (pino, one JSON line per request to /dev/null)'],
];

/** One row: a fresh server, a smoke request that must answer the touch JSON (and show the rate limit exactly where it is on), warm-up, measured run. */
async function measureTarget(ctx: BenchContext, t: (typeof TARGETS)[number]): Promise<void> {
  const on: Target = t.script ? await ctx.floor(t.id, t.script) : await ctx.service(t.id, t.env);
  const requests: LoadRequest[] = ACCOUNTS.map((account) => ({
    path: '/diagnostics/touch',
    headers: { 'content-type': 'application/json', ...(t.script ? {} : { authorization: `Bearer ${userToken(account)}` }) },
    body: JSON.stringify(t.script ? { account, ...BODY } : BODY),
  }));
  const a = await httpRequest(`${on.url}/diagnostics/touch`, { method: 'POST', ...requests[0] });
  const limit = a.headers['x-ratelimit-limit'];
  const body = (a.status === 200 ? JSON.parse(a.body) : {}) as Record<string, unknown>;
  if (typeof body.count !== 'number' || typeof body.serverTimeMs !== 'number' || body.accountId !== ACCOUNTS[0])
    throw new Error(`${t.id}: smoke request failed: ${a.status} ${a.body.slice(0, 300)}\n${on.proc.tail()}`);
  if (limit !== (!t.script && t.env?.RATE_LIMIT_ENABLED !== 'false' ? '10000000' : undefined)) throw new Error(`${t.id}: x-ratelimit-limit ${String(limit)}`);
  await ctx.measure('touch', on, requests, { durationS: ctx.seconds(3, 1), warmup: true });
  await ctx.measure('touch', on, requests, { durationS: ctx.seconds(4, 2) });
  await on.stop();
}

/** The "Where the time goes" section: ratios of the main rows and the per-request CPU waterfall. */
function whereTheTimeGoes(ctx: BenchContext): string[] {
  const row = (id: string) => ctx.row('touch', id);
  const [floor, nest, full] = [row('floor'), row('nest-minimal'), row('full')];
  if (!floor || !nest || !full) return [];
  const [fl, ne, fu] = [floor.serverUs, nest.serverUs, full.serverUs];
  const cpuCell = (a?: number, b?: number) => (a !== undefined && b !== undefined ? `${fmtNum(b / a, 2)} (${fmtNum(b, 0)} ÷ ${fmtNum(a, 0)} µs)` : 'n/a');
  const steps = STEPS.map(([id, adds]) => ({ id, adds, r: row(id) })).filter((s): s is { id: string; adds: string; r: Row } => s.r?.serverUs !== undefined);
  const out = [
    '## Where the time goes',
    '',
    markdownTable(
      ['Ratio', 'by req/s', 'by server CPU per request (inverse)'],
      [
        ['full / floor: the whole gap', fmtNum(full.rps / floor.rps, 2), cpuCell(fu, fl)],
        ["nest-minimal / floor: Nest's own cost", fmtNum(nest.rps / floor.rps, 2), cpuCell(ne, fl)],
        ['full / nest-minimal: our layers on top of Nest', fmtNum(full.rps / nest.rps, 2), cpuCell(fu, ne)],
      ],
      ['left', 'right', 'right'],
    ),
    '',
    'Server CPU per request, each row adding one slice to the row above (differences of a few µs are within the noise):',
    '',
    markdownTable(
      ['Row', 'req/s', 'server CPU µs/req', 'added µs/req', 'what the step adds'],
      steps.map((s, i) => {
        const d = i > 0 ? s.r.serverUs! - steps[i - 1].r.serverUs! : undefined;
        return [s.id, fmtInt(s.r.rps), fmtNum(s.r.serverUs, 0), d === undefined ? '' : `${d >= 0 ? '+' : ''}${fmtNum(d, 0)}`, s.adds];
      }),
      ['left', 'right', 'right', 'right', 'left'],
    ),
    '',
  ];
  if (fl !== undefined && ne !== undefined && fu !== undefined && fu > fl) {
    const gap = fu - fl;
    const [norl, silentNorl] = [row('full-norl')?.serverUs, row('full-silent-norl')?.serverUs];
    out.push(
      `Of the ${fmtNum(gap, 0)} µs of server CPU the full stack spends per request beyond the floor, ${fmtNum(ne - fl, 0)} µs (${fmtNum((100 * (ne - fl)) / gap, 0)}%) are NestJS itself and ` +
        `${fmtNum(fu - ne, 0)} µs (${fmtNum((100 * (fu - ne)) / gap, 0)}%) are our layers on top of it. Measured by CPU, the goal (${GOAL} × floor) means at most ~${fmtNum(fl / GOAL, 0)} µs per request.` +
        (norl !== undefined && silentNorl !== undefined
          ? ` Cross-check the other way round: the access log alone adds ${fmtNum(norl - silentNorl, 0)} µs (full-norl − full-silent-norl), the rate limit ${fmtNum(fu - norl, 0)} µs (full − full-norl).`
          : ''),
      '',
    );
  }
  return out;
}

const cpuRatio = (ctx: BenchContext) =>
  ((f, u) => (f !== undefined && u !== undefined ? f / u : undefined))(ctx.row('touch', 'floor')?.serverUs, ctx.row('touch', 'full')?.serverUs);

export const { main } = defineBench({
  name: 'http-floor',
  prefix: 'b-touch',
  pin: true,
  repeat: 3,
  options: { 'no-variants': 'flag' },
  serviceEnv: { LOG_LEVEL: 'info' },
  compare: { ratios: { fullOverFloorRps: 'full / floor req/s' } },
  async run(ctx) {
    const targets = TARGETS.filter((t) => (ctx.compare ? t.id === 'floor' || t.id === 'full' : !(t.variant && ctx.opts['no-variants'])));
    Object.assign(ctx.env, {
      autocannon: `9 (in the bench process), 100 connections, ${ctx.seconds(3, 1)} s warm-up + ${ctx.seconds(4, 2)} s measured per row`,
      "Baseline servers' Redis writes": `${redisWritesFromEnv()} (BASELINE_REDIS_WRITES; coalesce = as the service's command connection)`,
    });
    await ctx.rounds(async () => {
      for (const t of targets) await measureTarget(ctx, t);
    });
  },
  goals: (_r, ctx): GoalLine[] => {
    const [floor, full, cpu] = [ctx.row('touch', 'floor'), ctx.row('touch', 'full'), cpuRatio(ctx)];
    const ratio = floor && full ? full.rps / floor.rps : undefined;
    return [
      {
        goal: 'Full service within reach of the fastest server for the same work (POST /diagnostics/touch, full / floor req/s)',
        target: `≥ ${GOAL}`,
        measured: ratio !== undefined ? `${fmtNum(ratio, 2)} (${fmtInt(full!.rps)} vs ${fmtInt(floor!.rps)} req/s)` : 'not measured',
        met: ratio === undefined ? undefined : ratio >= GOAL && full!.errors + floor!.errors === 0,
      },
      {
        goal: 'The same by server CPU per request (floor µs ÷ full µs)',
        target: `≥ ${GOAL}`,
        measured: cpu !== undefined ? `${fmtNum(cpu, 2)} (${fmtNum(floor?.serverUs, 0)} ÷ ${fmtNum(full?.serverUs, 0)} µs)` : 'not measured',
        info: true,
      },
    ];
  },
  report: (_r, ctx) => [
    'Load: POST /diagnostics/touch, 100 accounts (one per connection; a JWT each for the full stack, the account in the body for the baselines), ' +
      'one redis-server (no persistence) for every row. Latency percentiles have 1 ms resolution (autocannon). CPU from /proc over the measured run. ' +
      'Rows: ' +
      TARGETS.filter((t) => ctx.row('touch', t.id))
        .map((t) => `\`${t.id}\` = ${t.label}`)
        .join('; ') +
      '.',
    '',
    '## Results',
    '',
    rowsTable(ctx.rows),
    '',
    ...whereTheTimeGoes(ctx),
    '## Notes',
    '',
    '- The difference between two rows that differ by one setting is the cost of that layer (within the noise). "Server CPU µs/request" depends less on the load generator and on other jobs than req/s does.',
    '- The floor and nest-minimal do strictly less work per request than the full stack: no auth, no validation, no logging, no metrics, no request id, no raw body. ' +
      'With the rate limit on, the full stack also leases rate-limit tokens from Redis (one extra script call per account and window, about 1% of requests here).',
    '- The machine is shared and noisy (see the other-CPU column): compare rows of one run.',
  ],
  ratios: (_r, ctx) => ({ fullOverFloorRps: jsonRatio(ctx.row('touch', 'full'), ctx.row('touch', 'floor')), fullOverFloorCpu: jsonNum(cpuRatio(ctx)) }),
});
