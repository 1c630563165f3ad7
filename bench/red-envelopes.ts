/**
 * red-envelopes: the red-envelope module and the wallet in the built service (`node dist/main.js`) on the scenario
 * harness. Preload: 1,000,000 envelopes, POST to READY, and Redis bytes per envelope. Grab: the service (a new JWT user
 * per request) against its floor (bench/red-envelopes-floor-server.ts: the same grab script by EVALSHA on the same
 * keys) and the floor verifying each bearer token (floor+identity); then the restarted service's CPU per credit on the
 * backlog. The storm: 100,000 users tap twice at once against 50,000 envelopes; the time from the last grab to the
 * last credit, with one instance and with two, the crediting one killed -9 mid-run. That each envelope is credited
 * once to one user, with a crash or not, is asserted by the tests in TESTS; the storm reports the reconciliation.
 */
import Redis from 'ioredis';
import { ADMIN_JSON as ADMIN, bearerTokens, fullEnv, http, json } from './lib/full-stack';
import { forEachLimit } from '../src/platform/core/for-each-limit';
import { type LoadRequest } from './lib/load';
import { cpuSeconds } from './lib/proc';
import { usedMemory } from './lib/redis-memory';
import { fmtInt, fmtNum, type GoalLine, markdownTable, statusText } from './lib/report';
import { type BenchContext, defineBench, jsonRatio, ratioGoal, rowsTable, topCommands } from './lib/scenario';

const GOALS = { preloadS: 10, floorRatio: 0.7, lastCreditS: 2 };
const SPONSOR = 'bench_sponsor';
const TESTS =
  '`test/e2e/red-envelope-instances.e2e-spec.ts` ("each envelope once, nobody twice, balanced once credited") and ' +
  '`test/e2e/red-envelope-crediting.e2e-spec.ts` ("the crediting instance (dist/main.js) SIGKILLed mid-run: … each credited once")';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, Math.max(0, ms)));

interface Reconciliation {
  grabbed: { count: number };
  credited: { count: number };
  pending: { count: number };
  dead: { count: number };
  left: { count: number };
  balanced: boolean;
}

/** Funds the sponsor, creates a rain open for 3 hours and waits until it is loaded: the ms from POST to READY. Also used by costs and scale. */
export async function createRain(port: number, activityId: string, count: number, over: { subPools?: number } = {}): Promise<number> {
  const totalAmount = count * 100;
  const top = await http(port, 'POST', `/admin/wallets/merchant:${SPONSOR}/top-ups`, ADMIN, {
    amount: totalAmount,
    currency: 'CNY',
    reference: `bench-${activityId}`,
  });
  if (top.status >= 300) throw new Error(`top-up: ${top.status} ${top.body}`);
  const t0 = performance.now();
  const a = await http(port, 'POST', '/admin/red-envelopes/activities', ADMIN, {
    activityId,
    sponsorMerchantId: SPONSOR,
    title: `bench ${activityId}`,
    currency: 'CNY',
    totalAmount,
    count,
    startsAt: new Date(Date.now() - 1000).toISOString(),
    endsAt: new Date(Date.now() + 3 * 3600_000).toISOString(),
    ...over,
  });
  if (a.status !== 202) throw new Error(`create ${activityId}: ${a.status} ${a.body}`);
  for (;;) {
    const g = await http(port, 'GET', `/admin/red-envelopes/activities/${activityId}`, ADMIN);
    if (['READY', 'OPEN'].includes(json<{ state: string }>(g).state)) return performance.now() - t0;
    if (performance.now() - t0 > 120_000) throw new Error(`${activityId} not loaded after 120 s: ${g.body}`);
    await sleep(25);
  }
}

export async function reconciliation(port: number, id: string): Promise<Reconciliation> {
  const a = await http(port, 'GET', `/admin/red-envelopes/activities/${id}/reconciliation`, ADMIN);
  if (a.status !== 200) throw new Error(`reconciliation ${id}: ${a.status} ${a.body}`);
  return json<Reconciliation>(a);
}

/** Waits until no grab of these rains waits for its credit. */
export async function creditedAll(port: number, ids: string[], timeoutMs: number): Promise<void> {
  for (const t0 = Date.now(); Date.now() - t0 < timeoutMs; await sleep(100)) {
    const r = await Promise.all(ids.map((id) => reconciliation(port, id)));
    if (r.every((x) => x.pending.count === 0)) return;
  }
  throw new Error(`crediting of ${ids.join(', ')} did not catch up within ${timeoutMs} ms`);
}

// ---- Grab against the floor

/** The service's JWT_* settings (and what its config loader needs besides), for the floor that verifies tokens. */
function identityEnv(redisUrl: string): Record<string, string> {
  const { PORT: _port, ...env } = fullEnv(0, redisUrl, 'rpre') as Record<string, string>;
  return { ...env, FLOOR_IDENTITY: 'jwt' };
}

async function grabVsFloor(ctx: BenchContext) {
  const id = `g${Date.now().toString(36)}`;
  // Enough for every run never to run dry (an empty pool answers NONE_LEFT, a cheaper path).
  let svc = await ctx.service('service');
  await createRain(svc.port, id, ctx.seconds(500_000, 250_000));
  const each = (prefix: string, n: number, path: string) => {
    const tokens = bearerTokens(Array.from({ length: n }, (_, i) => `${prefix}-${i}`));
    let k = 0;
    return (): LoadRequest => ({ method: 'POST', path, headers: { authorization: tokens[k++ % tokens.length] } });
  };
  const measure = async (on: Parameters<BenchContext['measure']>[1], req: () => LoadRequest) => {
    await ctx.measure('grab', on, req, { durationS: 1, warmup: true });
    await ctx.measure('grab', on, req, { durationS: ctx.seconds(6, 3) });
  };
  await measure(svc, each('gu', ctx.seconds(100_000, 40_000), `/red-envelopes/activities/${id}/grab`));
  await creditedAll(svc.port, [id], 60_000);
  await svc.stop(); // it would credit the floors' grabs in the background
  let f = 0;
  const floor = await ctx.floor('floor', 'red-envelopes-floor-server.ts');
  await measure(floor, () => ({ method: 'POST', path: `/grab/${id}`, headers: { 'content-type': 'application/json' }, body: `{"account":"fu-${f++}"}` }));
  await floor.stop();
  const identity = await ctx.floor('floor+identity', 'red-envelopes-floor-server.ts', identityEnv(ctx.redis.url));
  await measure(identity, each('fi', ctx.seconds(250_000, 100_000), `/grab/${id}`));
  await identity.stop();
  // The restarted service credits the backlog (the floors' grabs), no grabs meanwhile: its CPU per credit.
  svc = await ctx.service('service-2');
  const [t0, cpu0, before] = [performance.now(), cpuSeconds(svc.pid), await reconciliation(svc.port, id)];
  await creditedAll(svc.port, [id], 180_000);
  const [cpu1, rec] = [cpuSeconds(svc.pid), await reconciliation(svc.port, id)];
  const credited = rec.credited.count - before.credited.count;
  const usPerCredit = cpu0 !== undefined && cpu1 !== undefined ? ((cpu1 - cpu0) * 1e6) / credited : NaN;
  return { svc, rec, crediting: { credited, creditedS: (performance.now() - t0) / 1000, usPerCredit } };
}

// ---- 3. The storm

interface Storm {
  label: string;
  seconds: number;
  statuses: Record<string, number>;
  grabbed: number;
  lagMs: number;
  rec: Reconciliation;
  exactlyOnce: boolean;
}

async function storm(label: string, port: number, users: number, opts: { createOn?: number; killAt?: () => void } = {}): Promise<Storm> {
  const envelopes = users / 2;
  const id = `st${Date.now().toString(36)}`;
  await createRain(opts.createOn ?? port, id, envelopes);
  const tokens = bearerTokens(Array.from({ length: users }, (_, i) => `${id}-u${i}`));
  const statuses: Record<string, number> = {};
  const winners = new Set<number>();
  let [grabbed, lastGrabAt, creditedAt, twice] = [0, 0, 0, 0];
  const poller = (async () => {
    while (!creditedAt) {
      await sleep(50);
      const r = await reconciliation(port, id).catch(() => undefined);
      if (r && r.credited.count === envelopes && r.pending.count === 0) creditedAt = performance.now();
    }
  })();
  const t0 = performance.now();
  await forEachLimit(users, 100, async (u) => {
    await Promise.all(
      [0, 1].map(async () => {
        const a = await http(port, 'POST', `/red-envelopes/activities/${id}/grab`, { authorization: tokens[u] }).catch(() => ({ status: 0, body: '' }));
        const status = a.status === 200 ? json<{ status: string }>(a).status : `HTTP ${a.status}`;
        statuses[status] = (statuses[status] ?? 0) + 1;
        if (status !== 'GRABBED') return;
        if (winners.has(u)) twice++;
        winners.add(u);
        lastGrabAt = performance.now();
        if (++grabbed === Math.floor(envelopes / 2)) opts.killAt?.();
      }),
    );
  });
  const seconds = (performance.now() - t0) / 1000;
  const deadline = performance.now() + 60_000;
  while (!creditedAt && performance.now() < deadline) await sleep(50);
  const lagMs = creditedAt ? creditedAt - lastGrabAt : NaN;
  creditedAt ||= -1;
  await poller;
  const rec = await reconciliation(port, id);
  const exactlyOnce = grabbed === envelopes && twice === 0 && rec.grabbed.count === envelopes && rec.credited.count === envelopes && rec.dead.count === 0;
  console.log(
    `[bench] storm (${label}): ${fmtNum(seconds, 1)} s, ${statusText(statuses)}, last credit ${fmtInt(lagMs)} ms after the last grab, exactly once ${exactlyOnce}`,
  );
  return { label, seconds, statuses, grabbed, lagMs, rec, exactlyOnce };
}

export const { main } = defineBench({
  name: 'red-envelopes',
  prefix: 'rpre',
  sections: ['preload', 'grab', 'storm'],
  serviceEnv: { RED_ENVELOPE_MAX_COUNT: '1000000', RED_ENVELOPE_CREDIT_RETRY_MS: '500' },
  async run(ctx) {
    ctx.env.service = 'node dist/main.js, NODE_ENV=production, LOG_LEVEL=warn, RED_ENVELOPE_CREDIT_RETRY_MS=500';
    let pre: { count: number; ms: number; bytes: number } | undefined;
    if (ctx.has('preload')) {
      const [svc, r, count] = [await ctx.service('preload'), new Redis(ctx.redis.url), ctx.seconds(1_000_000, 200_000)];
      const before = await usedMemory(r);
      const ms = await createRain(svc.port, `pre${Date.now().toString(36)}`, count);
      await sleep(200);
      pre = { count, ms, bytes: ((await usedMemory(r)) - before) / count };
      r.disconnect();
      await svc.stop();
    }
    const grab = ctx.has('grab') ? await grabVsFloor(ctx) : undefined;
    let storms: Storm[] | undefined;
    if (ctx.has('storm')) {
      const svc = grab?.svc ?? (await ctx.service('service'));
      const users = ctx.seconds(100_000, 20_000);
      const one = await storm('one instance', svc.port, users);
      // The second instance creates (so loads and credits) the rain; the grabs go to the first; the second is killed -9 halfway.
      const second = await ctx.service('crediting-2');
      storms = [
        one,
        await storm('two instances, the second killed -9 mid-run', svc.port, users, { createOn: second.port, killAt: () => second.proc.child.kill('SIGKILL') }),
      ];
    }
    await grab?.svc.stop();
    return { pre, grab, storms };
  },
  goals({ pre, grab, storms }, ctx): GoalLine[] {
    const worstLag = storms ? Math.max(...storms.map((s) => s.lagMs)) : undefined;
    return [
      {
        goal: `Preload ${fmtInt(pre?.count ?? 1_000_000)} envelopes (POST to READY)`,
        target: `≤ ${GOALS.preloadS} s`,
        measured: pre ? `${fmtNum(pre.ms / 1000, 2)} s (${fmtNum(pre.bytes, 1)} B of Redis per envelope)` : 'n/a',
        met: pre ? pre.ms / 1000 <= GOALS.preloadS : undefined,
      },
      ...ratioGoal('Grab: service / floor req/s', ctx.row('grab', 'service'), ctx.row('grab', 'floor'), GOALS.floorRatio),
      {
        goal: 'Balanced after every run (reconciliation); in the storms every envelope grabbed once, nobody twice, every credit landed',
        target: 'every run',
        measured:
          [
            ...(grab
              ? [`grab runs: balanced ${grab.rec.balanced} (${fmtInt(grab.rec.credited.count)} credited, ${fmtInt(grab.rec.pending.count)} pending)`]
              : []),
            ...(storms ?? []).map((s) => `storm, ${s.label}: balanced ${s.rec.balanced}, exactly once ${s.exactlyOnce}`),
          ].join('; ') + `; each wallet credited once, with crashes: asserted by ${TESTS}`,
        met: grab || storms ? (grab?.rec.balanced ?? true) && (storms ?? []).every((s) => s.rec.balanced && s.exactlyOnce) : undefined,
      },
      {
        goal: 'Crediting keeps up: last credit after the last grab',
        target: `≤ ${GOALS.lastCreditS} s`,
        measured: storms ? storms.map((s) => `${s.label}: ${fmtNum(s.lagMs / 1000, 2)} s`).join('; ') : 'n/a',
        met: worstLag !== undefined ? worstLag <= GOALS.lastCreditS * 1000 : undefined,
      },
    ];
  },
  report({ pre, grab, storms }, ctx) {
    const md: string[] = [];
    if (pre)
      md.push(
        '## Preload',
        '',
        `One rain of ${fmtInt(pre.count)} envelopes created by POST /admin/red-envelopes/activities (the sponsor debited, the split computed, each sub-pool staged and armed by RENAME), polled every 25 ms until READY: **${fmtNum(pre.ms / 1000, 2)} s**; Redis memory grew by ${fmtNum(pre.bytes, 1)} bytes per envelope.`,
        '',
      );
    if (grab)
      md.push(
        '## Grab against the floor',
        '',
        "A new user on every request, one sub-pool that does not run dry. The floor is bare Fastify + ioredis running the same grab script by EVALSHA on the same keys, with no auth, validation, rate limit, logging, metrics or crediting; floor+identity verifies each bearer token with the service's JwtVerifier. The service was stopped during the floor runs; its Redis commands include the crediting of grabs in the same window.",
        '',
        rowsTable(ctx.rows.filter((r) => r.scenario === 'grab')),
        '',
        ...topCommands(ctx.rows.filter((r) => r.scenario === 'grab')),
        '',
        `The restarted service credited the backlog (the floors' grabs) in ${fmtNum(grab.crediting.creditedS, 1)} s: ${fmtInt(grab.crediting.credited)} envelopes, ${fmtInt(grab.crediting.usPerCredit)} µs of service CPU per credit (crediting must keep up with grabbing, so on two cores it is paid in the grab window); balanced: ${grab.rec.balanced ? 'yes' : 'NO'}.`,
        '',
      );
    if (storms)
      md.push(
        '## The storm',
        '',
        'Every user taps twice at once, 100 users in flight, through the service; the reconciliation is polled during the run, and "last credit" is the first poll that saw every envelope credited minus the time of the last GRABBED answer. In the second run the second instance created (so loads and credits) the rain, the grabs go to the first, and the second is killed with SIGKILL once half the envelopes are grabbed; the first takes its pending credits over after RED_ENVELOPE_CREDIT_RETRY_MS (500 ms).',
        '',
        markdownTable(
          ['Run', 'Seconds', 'Answers', 'Grabbed / credited / pending / dead', 'Balanced', 'Exactly once', 'Last credit after last grab'],
          storms.map((s) => [
            s.label,
            fmtNum(s.seconds, 1),
            statusText(s.statuses),
            [s.rec.grabbed, s.rec.credited, s.rec.pending, s.rec.dead].map((c) => fmtInt(c.count)).join(' / '),
            s.rec.balanced ? 'yes' : 'NO',
            s.exactlyOnce ? 'yes' : 'NO',
            `${fmtNum(s.lagMs / 1000, 2)} s`,
          ]),
        ),
        '',
      );
    return md;
  },
  ratios: (_r, ctx) => ({ grabServiceOverFloor: jsonRatio(ctx.row('grab', 'service'), ctx.row('grab', 'floor')) }),
});
