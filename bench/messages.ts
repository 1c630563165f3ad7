/**
 * messages: the message center in the built service (`full`: node dist/main.js, LOG_LEVEL=info with stdout to /dev/null,
 * RATE_LIMIT_ENABLED=false) against its floor (bench/messages-floor-server.ts: bare Fastify running the build's own
 * MessagesService), on one redis-server. Each row starts fresh and runs two phases at --connections (100):
 *   write  POST /messages with a service token, a new outerBizId every request, over 10,000 accounts of the row's own;
 *   pull   GET /messages?after=<cursor>&limit=50 with a user JWT (the floor reads x-account-id) over 1,000 inboxes of 200
 *          messages written beforehand (POST /messages/batch), the cursor the 150th-newest, so every pull gets a page of 50.
 * Before its load each row's first pull must answer the bytes every other row answered. Rows interleave over --repeat
 * rounds (5); each shows its median round by req/s and the median server CPU µs per request. The server under test is
 * alone on the last CPU (taskset) unless --no-pin. That pulls page without gaps or repeats is a test
 * (test/e2e/messages.e2e-spec.ts, "pages with after=latestId until hasMore is false, seeing every later message once").
 * Options: --quick (1 round, 2 s + 1 s warm-up, 200 inboxes), --connections N, --duration S (4), --warmup S (3),
 * --repeat N, --no-pin, --dist DIR; --compare [--baseline FILE]: floor and full, 3 rounds, then exit 1 when a phase's
 * full / floor req/s is more than 10% below the committed bench/results/messages.json.
 * Only the standard run (no options) writes bench/results/messages.{md,json}; others write to $TMPDIR/redis-pay-bench/.
 */
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { BENCH_SERVICE_TOKEN, fullEnv, spawnBareServer, spawnFullStack, userToken } from './lib/full-stack';
import { forEachLimit } from './lib/limit';
import { type LoadRequest, runLoad } from './lib/load';
import { type Measured, measuredLoad, median, medianBy, serverUsPerRequest } from './lib/measure';
import { freePort, httpRequest } from './lib/net';
import { waitUntilServing } from './lib/proc';
import { type BenchRedis, startBenchRedis } from './lib/redis-server';
import { environmentInfo, fmtInt, fmtNum, type GoalLine, markdownTable, reportHead, RESULTS_DIR, statusText, writeResult } from './lib/report';
import {
  benchJson,
  compareWithBaseline,
  comparisonGoalLines,
  comparisonLines,
  enforceComparison,
  jsonNum,
  readBaseline,
  writeJsonResult,
} from './lib/results-json';
import { parseRowOptions, placementInfo, prepareRows } from './lib/rows';

const NAME = 'messages';
const GOAL = 0.7;
const PREFIX = 'rpb';
const [INBOX, PAGE, CURSOR_FROM_NEWEST, WRITE_ACCOUNTS] = [200, 50, 150, 10_000];
const ROWS = [
  { id: 'floor', label: "floor: bare Fastify, the build's MessagesService" },
  { id: 'full', label: 'full: redis-pay, LOG_LEVEL=info (stdout → /dev/null), rate limit off' },
] as const;
type RowId = (typeof ROWS)[number]['id'];
const PHASES = ['write', 'pull'] as const;
type Phase = (typeof PHASES)[number];
const WHAT: Record<Phase, string> = { write: 'Writes (POST /messages)', pull: `Pulls (GET /messages, ${PAGE} a page)` };
const WRITE_HEADERS = { 'content-type': 'application/json', 'x-service-token': BENCH_SERVICE_TOKEN };

interface PhaseRun extends Measured {
  /** Redis time per script call (EVALSHA, the script's own commands included) and script calls per request. */
  scriptUs: number;
  scriptCalls: number;
}

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

async function scriptStats(redis: BenchRedis): Promise<{ calls: number; usec: number }> {
  const m = /^cmdstat_evalsha:calls=(\d+),usec=(\d+)/m.exec(String(await redis.command('INFO', 'commandstats')));
  return { calls: Number(m?.[1] ?? 0), usec: Number(m?.[2] ?? 0) };
}

export async function main(args: string[]): Promise<void> {
  const own = { quick: false, compare: false, baseline: undefined as string | undefined };
  const o = parseRowOptions(args, { duration: 4, warmup: 3, budgetS: 300, repeat: 5 }, (a, value) => {
    if (a === '--quick') Object.assign(own, { quick: true });
    else if (a === '--compare') own.compare = true;
    else if (a === '--baseline') own.baseline = value();
    else return false;
    return true;
  });
  if (own.quick) Object.assign(o, { duration: 2, warmup: 1, repeat: 1 });
  if (own.compare && !args.includes('--repeat')) o.repeat = 3;
  const pullAccounts = own.quick ? 200 : 1000;
  const baseline = own.compare ? readBaseline(NAME, own.baseline) : undefined;
  const { workDir, builds, split } = prepareRows(o);
  const dist = builds.get(o.dist)!;
  const redis = await startBenchRedis();
  const env = fullEnv(0, redis.url, PREFIX, { RATE_LIMIT_ENABLED: 'false' });
  let seq = pullAccounts * INBOX;

  const start = async (id: RowId) => {
    const port = await freePort();
    const e = { ...env, PORT: String(port) };
    const proc =
      id === 'floor'
        ? spawnBareServer({ id, port, cpus: o.serverCpus, script: join(__dirname, 'messages-floor-server.ts'), env: { ...e, DIST: dist } })
        : spawnFullStack({ id, port, cpus: o.serverCpus, dist, workDir, env: e });
    await waitUntilServing(proc, port, id === 'full' ? `http://127.0.0.1:${port}/health/ready` : undefined, 60_000);
    return { port, proc };
  };

  // The pull inboxes, written through the service (batches of 200), their cursors from the answers.
  const cursors: string[] = [];
  {
    const { port, proc } = await start('full');
    await forEachLimit(pullAccounts, 8, async (i) => {
      const t0 = Date.parse('2026-11-01T00:00:00Z');
      const messages = Array.from({ length: INBOX }, (_, k) => message(`p-${i}`, i * INBOX + k, new Date(t0 + k * 60_000).toISOString()));
      // Sent again on a 503 (a loaded machine): the same messages, so a retry answers the first write's msgIds.
      for (let attempt = 1; ; attempt++) {
        const a = await httpRequest(`http://127.0.0.1:${port}/messages/batch`, { method: 'POST', headers: WRITE_HEADERS, body: JSON.stringify({ messages }) });
        const ids = a.status === 200 ? (JSON.parse(a.body) as { results: { status: number; msgId: string }[] }).results : [];
        if (a.status === 200 && ids.every((r) => r.status === 201 || r.status === 200)) {
          cursors[i] = ids[INBOX - CURSOR_FROM_NEWEST].msgId;
          break;
        }
        if (a.status !== 503 || attempt === 5) throw new Error(`pre-fill p-${i}: ${a.status} ${a.body.slice(0, 300)}`);
      }
    });
    await proc.stop();
  }
  const pulls: LoadRequest[] = cursors.map((c, i) => ({
    path: `/messages?after=${c}&limit=${PAGE}`,
    headers: { authorization: `Bearer ${userToken(`p-${i}`)}`, 'x-account-id': `p-${i}` },
  }));

  let firstPull: string | undefined;
  const runs: { id: RowId; round: number; write: PhaseRun; pull: PhaseRun }[] = [];
  for (let round = 0; round < o.repeat; round++)
    for (const { id } of ROWS) {
      const { port, proc } = await start(id);
      try {
        const base = `http://127.0.0.1:${port}`;
        const p = await httpRequest(`${base}${pulls[0].path}`, { headers: pulls[0].headers });
        firstPull ??= p.body;
        if (p.status !== 200 || p.body !== firstPull)
          throw new Error(`${id}: the first pull answered other bytes than the first row's: ${p.status} ${p.body.slice(0, 300)}`);
        let next = 0;
        const requests: Record<Phase, () => LoadRequest> = {
          write: () => {
            const n = seq++;
            return {
              method: 'POST',
              headers: WRITE_HEADERS,
              body: JSON.stringify(message(`w${round}${id}-${(n * 7919) % WRITE_ACCOUNTS}`, n, new Date().toISOString())),
            };
          },
          pull: () => ({ method: 'GET', ...pulls[next++ % pulls.length] }),
        };
        const phase = async (ph: Phase): Promise<PhaseRun> => {
          const load = { url: `${base}/messages`, connections: o.connections, requests: requests[ph] };
          await runLoad({ ...load, durationS: o.warmup });
          await redis.command('CONFIG', 'RESETSTAT');
          const m = await measuredLoad({ ...load, durationS: o.duration }, proc.pid, redis.process.pid);
          const s = await scriptStats(redis);
          console.error(
            `[bench] round ${round + 1} ${id} ${ph}: ${fmtInt(m.load.rps)} req/s, ${fmtNum(serverUsPerRequest(m), 0)} µs/req, ${statusText(m.load.statusCodes)}`,
          );
          return { ...m, scriptUs: s.usec / s.calls, scriptCalls: s.calls / m.load.total };
        };
        runs.push({ id, round, write: await phase('write'), pull: await phase('pull') });
      } finally {
        await proc.stop(15_000);
      }
    }
  await redis.stop();

  const mine = (id: RowId) => runs.filter((r) => r.id === id);
  const typical = (id: RowId, p: Phase) => (mine(id).length ? medianBy(mine(id), (r) => r[p].load.rps)[p] : undefined);
  const cpu = (id: RowId, p: Phase) => median(mine(id).map((r) => serverUsPerRequest(r[p])));
  const ratio = (p: Phase) => ((f, u) => (f && u ? u.load.rps / f.load.rps : undefined))(typical('floor', p), typical('full', p));
  const cpuRatio = (p: Phase) => ((f, u) => (f !== undefined && u !== undefined ? f / u : undefined))(cpu('floor', p), cpu('full', p));
  const bad = (p: Phase) =>
    runs.map((r) => r[p].load.errors + r[p].load.total - (r[p].load.statusCodes[p === 'write' ? '201' : '200'] ?? 0)).reduce((a, b) => a + b, 0);
  const comparison = baseline
    ? compareWithBaseline(
        baseline,
        PHASES.map((p) => ({ key: `${p}FullOverFloorRps`, label: `${p}: full / floor req/s`, measured: ratio(p) })),
        0.1,
      )
    : undefined;
  const goals: GoalLine[] = [
    ...PHASES.flatMap((p): GoalLine[] => [
      {
        goal: `${WHAT[p]}: full / floor req/s`,
        target: `≥ ${GOAL}`,
        measured:
          ratio(p) === undefined
            ? 'not measured'
            : `${fmtNum(ratio(p), 2)} (${fmtInt(typical('full', p)!.load.rps)} vs ${fmtInt(typical('floor', p)!.load.rps)} req/s)`,
        met: ratio(p) === undefined ? undefined : ratio(p)! >= GOAL && bad(p) === 0,
      },
      {
        goal: `${WHAT[p]}: the same by server CPU per request (floor µs ÷ full µs)`,
        target: `≥ ${GOAL}`,
        measured: cpuRatio(p) === undefined ? 'not measured' : `${fmtNum(cpuRatio(p), 2)} (${fmtNum(cpu('floor', p), 0)} ÷ ${fmtNum(cpu('full', p), 0)} µs)`,
        info: true,
      },
    ]),
    ...comparisonGoalLines(comparison),
  ];

  const environment = environmentInfo(redis.version, {
    autocannon: `${o.connections} connections, per phase ${o.warmup} s warm-up + ${o.duration} s measured, ${o.repeat} round(s)`,
    ...placementInfo(o, split),
  });
  const md = reportHead(NAME, args, environment, goals);
  md.push(
    `Load: **write** = POST /messages (service token), a new outerBizId every request, over ${fmtInt(WRITE_ACCOUNTS)} accounts new to each row; **pull** = GET /messages?after=<cursor>&limit=${PAGE} (user JWT) over ${fmtInt(pullAccounts)} inboxes of ${INBOX}, every pull a page of ${PAGE} (~${fmtInt(firstPull?.length ?? 0)} B of JSON). ` +
      "The floor runs the build's own MessagesService (store, scripts, JSON) behind bare Fastify: the gap is what Nest, validation, auth, metrics, the request id and the access log add. " +
      'Each row shows its median round by req/s and the median server CPU µs per request over the rounds; bad answers are summed over the rounds. CPU from /proc over the measured run.',
    '',
  );
  if (comparison) md.push('## Comparison with the committed result', '', ...comparisonLines(comparison).map((l) => `- ${l}`), '');
  for (const p of PHASES)
    md.push(
      `## ${p === 'write' ? 'Write: POST /messages' : `Pull: GET /messages?after=…&limit=${PAGE}`}`,
      '',
      markdownTable(
        ['Row', 'req/s', 'p50 ms', 'p99 ms', '× floor req/s', 'server CPU µs/req', 'Redis µs/script call (calls/req)', 'bad answers', 'req/s of each round'],
        ROWS.filter((r) => typical(r.id, p)).map((r) => {
          const m = typical(r.id, p)!;
          return [
            r.label,
            fmtInt(m.load.rps),
            m.load.p50,
            m.load.p99,
            fmtNum(m.load.rps / (typical('floor', p)?.load.rps ?? NaN), 2),
            fmtNum(cpu(r.id, p), 0),
            `${fmtNum(m.scriptUs, 0)} (${fmtNum(m.scriptCalls, 2)})`,
            fmtInt(mine(r.id).reduce((s, x) => s + x[p].load.errors + x[p].load.total - (x[p].load.statusCodes[p === 'write' ? '201' : '200'] ?? 0), 0)),
            mine(r.id)
              .map((x) => fmtInt(x[p].load.rps))
              .join(' / '),
          ];
        }),
        ['left', 'right', 'right', 'right', 'right', 'right', 'right', 'right', 'left'],
      ),
      '',
    );
  const outDir = args.length === 0 ? RESULTS_DIR : join(tmpdir(), 'redis-pay-bench');
  writeResult(NAME, md.join('\n'), outDir);
  const ratios = Object.fromEntries(
    PHASES.flatMap((p) => [
      [`${p}FullOverFloorRps`, jsonNum(ratio(p))],
      [`${p}FullOverFloorCpu`, jsonNum(cpuRatio(p))],
    ]),
  );
  writeJsonResult(NAME, benchJson({ bench: NAME, args, dist: o.dist, environment, goals, ratios }, {}), outDir);
  if (comparison) enforceComparison(NAME, comparison, { disturbed: 0, of: runs.length });
}
