/**
 * messages: the message center in the built service (`full`: node dist/main.js, LOG_LEVEL=info with stdout to /dev/null,
 * RATE_LIMIT_ENABLED=false) against its floor (bench/messages-floor-server.ts: bare Fastify running the build's own
 * MessagesService), on one redis-server. Each row starts fresh and runs two phases at 100 connections:
 *   write  POST /messages with a service token, a new outerBizId every request, over 10,000 accounts of the row's own;
 *   pull   GET /messages?after=<cursor>&limit=50 with a user JWT (the floor reads x-account-id) over 1,000 inboxes of 200
 *          messages written beforehand (POST /messages/batch), the cursor the 150th-newest, so every pull gets a page of 50.
 * Before its load each row's first pull must answer the bytes every other row answered. Rows interleave over --repeat
 * rounds (5); each shows its median round by req/s and the median server CPU µs per request. The server under test is
 * alone on the last CPU (taskset) unless --no-pin. That pulls page without gaps or repeats is a test
 * (test/e2e/messages.e2e-spec.ts, "pages with after=latestId until hasMore is false, seeing every later message once").
 * Options: --quick (1 round, 2 s + 1 s warm-up, 200 inboxes), --repeat N, --no-pin, --dist DIR; --compare
 * [--baseline FILE]: 3 rounds, then exit 1 when a phase's full / floor req/s is more than 10% below the committed
 * bench/results/messages.json.
 * Only the standard run (no options) writes bench/results/messages.{md,json}; others write to $TMPDIR/redis-pay-bench/.
 */
import { forEachLimit } from '../src/platform/core/for-each-limit';
import { BENCH_SERVICE_TOKEN, fullEnv, http, userToken } from './lib/full-stack';
import type { LoadRequest } from './lib/load';
import { fmtInt, fmtNum, type GoalLine, jsonNum, markdownTable } from './lib/report';
import { defineBench, jsonRatio, type Row } from './lib/scenario';

const GOAL = 0.7;
const [INBOX, PAGE, CURSOR_FROM_NEWEST, WRITE_ACCOUNTS] = [200, 50, 150, 10_000];
const ROWS = { floor: "floor: bare Fastify, the build's MessagesService", full: 'full: redis-pay, LOG_LEVEL=info (stdout → /dev/null), rate limit off' };
const PHASES = ['write', 'pull'] as const;
type Phase = (typeof PHASES)[number];
const WHAT: Record<Phase, string> = { write: 'Writes (POST /messages)', pull: `Pulls (GET /messages, ${PAGE} a page)` };
const WRITE_HEADERS = { 'content-type': 'application/json', 'x-service-token': BENCH_SERVICE_TOKEN };
/** Answers other than 201 (write) or 200 (pull), and errors. */
/** Answers other than the phase's success (every round counted), and socket errors. */
const bad = (r: Row | undefined, p: Phase) =>
  r ? r.errors + Object.entries(r.statuses).reduce((n, [code, count]) => n + (code === (p === 'write' ? '201' : '200') ? 0 : count), 0) : 0;
const cpuRatio = (f: Row | undefined, u: Row | undefined) => (f?.serverUs !== undefined && u?.serverUs !== undefined ? f.serverUs / u.serverUs : undefined);

/** A business system's message #n (a payment notice, ~250 bytes as stored); costs writes it too. */
export function message(accountId: string, n: number, createdAt: string) {
  const order = `ord-${String(n).padStart(10, '0')}`;
  const amount = (((n * 7919) % 100_000) / 100 + 1).toFixed(2);
  return {
    accountId,
    bizType: 'PAYMENT_SUCCESS',
    outerBizId: order,
    title: 'Payment successful',
    content: `¥${amount} paid to Coffee Corner (order ${order}). Tap to see the receipt.`,
    url: `redispay://orders/${order}`,
    needPush: true,
    createdAt,
  };
}

export const { main } = defineBench({
  name: 'messages',
  prefix: 'rpb',
  pin: true,
  repeat: 5,
  compare: { ratios: { writeFullOverFloorRps: 'write: full / floor req/s', pullFullOverFloorRps: 'pull: full / floor req/s' } },
  serviceEnv: { LOG_LEVEL: 'info', RATE_LIMIT_ENABLED: 'false' },
  async run(ctx) {
    const pullAccounts = ctx.quick ? 200 : 1000;
    const [warmupS, durationS] = [ctx.seconds(3, 1), ctx.seconds(4, 2)];
    // The pull inboxes, written through the service (batches of 200), their cursors from the answers.
    const cursors: string[] = [];
    const filler = await ctx.service('pre-fill');
    await forEachLimit(pullAccounts, 8, async (i) => {
      const t0 = Date.parse('2026-11-01T00:00:00Z');
      const messages = Array.from({ length: INBOX }, (_, k) => message(`p-${i}`, i * INBOX + k, new Date(t0 + k * 60_000).toISOString()));
      // Sent again on a 503 (a loaded machine): the same messages, so a retry answers the first write's msgIds.
      for (let attempt = 1; ; attempt++) {
        const a = await http(filler.port, 'POST', '/messages/batch', WRITE_HEADERS, { messages });
        const ids = a.status === 200 ? (JSON.parse(a.body) as { results: { status: number; msgId: string }[] }).results : [];
        if (a.status === 200 && ids.every((r) => r.status === 201 || r.status === 200)) {
          cursors[i] = ids[INBOX - CURSOR_FROM_NEWEST].msgId;
          break;
        }
        if (a.status !== 503 || attempt === 5) throw new Error(`pre-fill p-${i}: ${a.status} ${a.body.slice(0, 300)}`);
      }
    });
    await filler.stop();
    const pulls: LoadRequest[] = cursors.map((c, i) => ({
      method: 'GET',
      path: `/messages?after=${c}&limit=${PAGE}`,
      headers: { authorization: `Bearer ${userToken(`p-${i}`)}`, 'x-account-id': `p-${i}` },
    }));
    const floorEnv = fullEnv(0, ctx.redis.url, 'rpb', { RATE_LIMIT_ENABLED: 'false' }) as Record<string, string>;
    let [firstPull, seq] = [undefined as string | undefined, pullAccounts * INBOX];
    await ctx.rounds(async (round) => {
      for (const id of ['floor', 'full'] as const) {
        // The floor gets the service's env: the build's config loader reads it.
        const t = id === 'floor' ? await ctx.floor(id, 'messages-floor-server.ts', floorEnv) : await ctx.service(id);
        const p = await http(t.port, 'GET', pulls[0].path!, pulls[0].headers);
        firstPull ??= p.body;
        if (p.status !== 200 || p.body !== firstPull)
          throw new Error(`${id}: the first pull answered other bytes than the first row's: ${p.status} ${p.body.slice(0, 300)}`);
        let next = 0;
        const requests: Record<Phase, () => LoadRequest> = {
          write: () => {
            const n = seq++;
            const body = message(`w${round}${id}-${(n * 7919) % WRITE_ACCOUNTS}`, n, new Date().toISOString());
            return { method: 'POST', path: '/messages', headers: WRITE_HEADERS, body: JSON.stringify(body) };
          },
          pull: () => pulls[next++ % pulls.length],
        };
        for (const ph of PHASES) {
          await ctx.measure(ph, t, requests[ph], { durationS: warmupS, warmup: true });
          await ctx.measure(ph, t, requests[ph], { durationS });
        }
        await t.stop();
      }
    });
    Object.assign(ctx.env, { autocannon: `100 connections, per phase ${warmupS} s warm-up + ${durationS} s measured` });
    return { pullAccounts, pullBytes: firstPull?.length ?? 0 };
  },
  goals: (_r, ctx) =>
    PHASES.flatMap((p): GoalLine[] => {
      const [f, u] = [ctx.row(p, 'floor'), ctx.row(p, 'full')];
      const [ratio, cpu] = [f && u ? u.rps / f.rps : undefined, cpuRatio(f, u)];
      return [
        {
          goal: `${WHAT[p]}: full / floor req/s`,
          target: `≥ ${GOAL}`,
          measured: ratio === undefined ? 'not measured' : `${fmtNum(ratio, 2)} (${fmtInt(u!.rps)} vs ${fmtInt(f!.rps)} req/s)`,
          met: ratio === undefined ? undefined : ratio >= GOAL && bad(f, p) + bad(u, p) === 0,
        },
        {
          goal: `${WHAT[p]}: the same by server CPU per request (floor µs ÷ full µs)`,
          target: `≥ ${GOAL}`,
          measured: cpu === undefined ? 'not measured' : `${fmtNum(cpu, 2)} (${fmtNum(f!.serverUs, 0)} ÷ ${fmtNum(u!.serverUs, 0)} µs)`,
          info: true,
        },
      ];
    }),
  report: (r, ctx) => [
    `Load: **write** = POST /messages (service token), a new outerBizId every request, over ${fmtInt(WRITE_ACCOUNTS)} accounts new to each row; **pull** = GET /messages?after=<cursor>&limit=${PAGE} (user JWT) over ${fmtInt(r.pullAccounts)} inboxes of ${INBOX}, every pull a page of ${PAGE} (~${fmtInt(r.pullBytes)} B of JSON). ` +
      "The floor runs the build's own MessagesService (store, scripts, JSON) behind bare Fastify: the gap is what Nest, validation, auth, metrics, the request id and the access log add. CPU from /proc over the measured run.",
    '',
    ...PHASES.flatMap((p) => [
      `## ${p === 'write' ? 'Write: POST /messages' : `Pull: GET /messages?after=…&limit=${PAGE}`}`,
      '',
      markdownTable(
        ['Row', 'req/s', 'p50 / p99 ms', '× floor req/s', 'server CPU µs/req', 'Redis CPU µs/req', 'Redis commands/req', 'bad answers', 'req/s of each round'],
        (['floor', 'full'] as const).flatMap((id) => {
          const m = ctx.row(p, id);
          if (!m) return [];
          const vsFloor = m.rps / (ctx.row(p, 'floor')?.rps ?? NaN);
          return [
            [
              ROWS[id],
              fmtInt(m.rps),
              `${m.p50} / ${m.p99}`,
              fmtNum(vsFloor, 2),
              fmtNum(m.serverUs, 0),
              fmtNum(m.redisUs, 0),
              fmtNum(m.commandsPerRequest, 2),
              fmtInt(bad(m, p)),
              (m.rounds ?? []).map(fmtInt).join(' / '),
            ],
          ];
        }),
        ['left', 'right', 'right', 'right', 'right', 'right', 'right', 'right', 'left'],
      ),
      '',
    ]),
  ],
  ratios: (_r, ctx) =>
    Object.fromEntries(
      PHASES.flatMap((p) => [
        [`${p}FullOverFloorRps`, jsonRatio(ctx.row(p, 'full'), ctx.row(p, 'floor'))],
        [`${p}FullOverFloorCpu`, jsonNum(cpuRatio(ctx.row(p, 'floor'), ctx.row(p, 'full')))],
      ]),
    ),
});
