/**
 * messages: the message center (src/features/messages) against its floor, and Redis bytes per message.
 *
 *   floor   bench/messages-floor-server.ts: bare Fastify 5 + ioredis doing the service's own work
 *           (the build's MessagesService/MessagesStore, same scripts, keys, arguments and JSON),
 *           without Nest, validation, auth, logging or metrics.
 *   full    the real service (`node dist/main.js`, NODE_ENV=production, LOG_LEVEL=info with stdout
 *           to /dev/null as in http-floor, RATE_LIMIT_ENABLED=false).
 *   full-silent  (on demand: --only) the same with LOG_LEVEL=silent: what the access log costs.
 *
 * Each row starts its server fresh and runs two phases at --connections (100):
 *   write  POST /messages with a service token (the floor ignores it), every request a new
 *          outerBizId, spread over --write-accounts (10,000) accounts; every answer must be a 201.
 *          The write accounts' keys are deleted after the phase, so every row writes into the
 *          same (near-empty) inboxes.
 *   pull   GET /messages?after=<cursor>&limit=50 with a user JWT (the floor takes the account from
 *          x-account-id; both get both headers), over --pull-accounts (1,000) inboxes pre-filled
 *          with 200 messages each; the cursor is each inbox's 150th-newest msgId, so every pull
 *          returns a full page of 50 (hasMore true). Pulls only read: every row sees the same data.
 * Before the load each row proves it does the same work: the same write stores the same JSON
 * body (compared with the build's toStored), a repeat is a 200 duplicate, and the same pull
 * answers byte for byte what every other row answered.
 *
 * Memory: MEMORY USAGE … SAMPLES 0 of an account's five keys ÷ its messages, minus the JSON body
 * (the content as stored), for inboxes of 10, 200 (the pull inboxes) and 1,000 (the default cap).
 *
 * Method as in http-floor: one redis-server for every row; the server under test alone on the last
 * CPU (taskset), autocannon (this process) and redis-server on the others; rows interleaved in
 * --repeat (5) rounds, each row reporting its median round; profiled rows (node --cpu-prof) once at
 * the end, each phase summarised on its own window.
 *
 * Options: --connections N (100)  --duration S (4; profiled rows at least 5)  --warmup S (3)
 *          --repeat N (5)  --retries N (2)  --budget S (300)  --no-profile  --no-pin
 *          --only floor,full,full-silent,full-profiled,floor-profiled (candidates always run)   --dist DIR
 *          --keep-profile DIR   copy the .cpuprofile files there, with each phase's window (<name>.windows.json)
 *          --candidate DIR   add a row: the full stack built from DIR (repeatable), to A/B a patch
 *          --write-accounts N (10000)  --pull-accounts N (1000)
 *          --compare         floor and full only (unless --only), 3 rounds, no profile; then exit 1 when full / floor
 *                            (req/s) of the write or the pull phase is more than 10% below the committed
 *                            bench/results/messages.json   --baseline FILE: compare with another results file
 * Only the standard run (no options) writes bench/results/messages.md and messages.json (the same figures,
 * machine-readable); runs with options write both to $TMPDIR/redis-pay-bench/.
 */
import { rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import type { WriteMessageCommand } from '../src/features/messages/message.commands';
import type { ScriptRegistry } from '../src/platform/scripts/script-registry.service';
import { connectScriptRedis, redisWritesFromEnv, ScriptRedis } from './lib/bare-server';
import { onCleanup } from './lib/cleanup';
import { Layer, profileMarkdown, ProfileSummary, summariseProfileDir } from './lib/cpu-profile';
import { BENCH_SERVICE_TOKEN, fullEnv, requireFromBuild, ROOT, SERVICE_LAYERS, spawnBareServer, spawnFullStack, userToken } from './lib/full-stack';
import { forEachLimit } from './lib/limit';
import { LoadRequest, runLoad } from './lib/load';
import { cpuShares, Measured, measuredLoad, median, medianBy, otherShare, runLine, runSchedule, serverUsPerRequest } from './lib/measure';
import { freePort, httpRequest } from './lib/net';
import { ManagedProcess, waitUntilServing } from './lib/proc';
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

const NAME = 'messages';
const GOAL = 0.7;
/** --compare fails when a phase's full / floor (req/s) is more than this share below the committed ratio. */
const COMPARE_TOLERANCE = 0.1;
const BUSY_MACHINE = 0.2;
/** A run whose Redis time per script call exceeds the phase's median by this factor is flagged (see the report). */
const SLOW_MACHINE = 1.25;
const PROFILE_MIN_S = 5;
/** One key prefix for every server: the floor and the full stack read and write the same keys. */
const PREFIX = 'rpb';
const INBOX = 200;
const PAGE = 50;
/** The cursor: the 150th-newest msgId of a 200-message inbox, so a pull gets a full page of 50. */
const CURSOR_FROM_NEWEST = 150;
const MEMORY_SIZES = [10, INBOX, 1000];
/** Inboxes averaged for the 200-message memory figure. */
const MEMORY_SAMPLE = 20;
/** The server's env on top of fullEnv, for every row. */
const BASE_ENV = { RATE_LIMIT_ENABLED: 'false' };
const PHASES = ['write', 'pull'] as const;
type Phase = (typeof PHASES)[number];

interface Target {
  id: string;
  label: string;
  kind: 'floor' | 'full';
  env?: Record<string, string>;
  profile?: boolean;
  dist?: string;
  group: 'main' | 'variant' | 'profile' | 'on-demand';
}

const TARGETS: Target[] = [
  { id: 'floor', kind: 'floor', group: 'main', label: "floor: bare Fastify + ioredis, the service's scripts and JSON" },
  { id: 'full', kind: 'full', group: 'main', label: 'full: redis-pay, LOG_LEVEL=info (stdout → /dev/null), rate limit off' },
  { id: 'full-silent', kind: 'full', group: 'on-demand', env: { LOG_LEVEL: 'silent' }, label: 'layer: full, LOG_LEVEL=silent (no access log)' },
  { id: 'full-profiled', kind: 'full', group: 'profile', profile: true, label: 'profiled: full under node --cpu-prof (not comparable)' },
  { id: 'floor-profiled', kind: 'floor', group: 'profile', profile: true, label: 'profiled: floor under node --cpu-prof (not comparable)' },
];

/** Layers of the message center on top of the service's usual ones. */
const LAYERS: Layer[] = [
  ...SERVICE_LAYERS,
  { name: 'dist/features/messages (controllers, service, store: toStored, toDto, reply parsing)', match: (_f, w) => w.startsWith('dist/features/messages/') },
  { name: 'floor server (bench/messages-floor-server.ts)', match: (_f, w) => w.startsWith('bench/messages-floor-server') },
];

interface PhaseResult extends Measured {
  profile?: ProfileSummary;
  /** Redis time per script call (EVALSHA/EVAL, scripts' own commands included) and script calls per request, over the measured run. */
  redisUsPerCall?: number;
  callsPerRequest?: number;
}

/** Script calls and their total Redis time since the last CONFIG RESETSTAT. */
async function scriptStats(redis: BenchRedis): Promise<{ calls: number; usec: number }> {
  const info = String(await redis.command('INFO', 'commandstats'));
  let calls = 0;
  let usec = 0;
  for (const m of info.matchAll(/^cmdstat_(?:evalsha|eval):calls=(\d+),usec=(\d+)/gm)) {
    calls += Number(m[1]);
    usec += Number(m[2]);
  }
  return { calls, usec };
}

interface RowResult {
  target: Target;
  attempts: number;
  write: PhaseResult;
  pull: PhaseResult;
}

function parseArgs(args: string[]) {
  const own_ = { writeAccounts: 10_000, pullAccounts: 1_000, compare: false, baseline: undefined as string | undefined };
  const own = (a: string, value: () => string, num: () => number) => {
    if (a === '--write-accounts') own_.writeAccounts = Math.round(num());
    else if (a === '--pull-accounts') own_.pullAccounts = Math.round(num());
    else if (a === '--compare') own_.compare = true;
    else if (a === '--baseline') own_.baseline = value();
    else return false;
    return true;
  };
  // A comparison runs the two rows that give the ratios, fewer rounds, shorter retries.
  const compare = args.includes('--compare');
  const o = parseRowOptions(
    args,
    { duration: 4, warmup: 3, budgetS: compare ? 150 : 300, repeat: compare ? 3 : 5 },
    own,
    '--write-accounts N --pull-accounts N --compare --baseline file',
  );
  if (own_.baseline !== undefined && !own_.compare) throw new Error('--baseline needs --compare');
  if (own_.compare) o.profile = false;
  return Object.assign(o, own_);
}
type Options = ReturnType<typeof parseArgs>;

// ---------------------------------------------------------------------------------------------
// The messages

const BIZ = [
  { bizType: 'PAYMENT_SUCCESS', title: 'Payment successful', verb: 'paid to Coffee Corner' },
  { bizType: 'WITHDRAWAL_SUCCESS', title: 'Withdrawal completed', verb: 'withdrawn to your bank card ending 4242' },
  { bizType: 'REFUND_SUCCESS', title: 'Refund received', verb: 'refunded by Coffee Corner' },
];

/** A business system's message #n (a payment, withdrawal or refund notice, ~250 bytes as stored). */
export function message(accountId: string, n: number, createdAt: string): WriteMessageCommand {
  const b = BIZ[n % BIZ.length];
  const order = `ord-${String(n).padStart(10, '0')}`;
  const amount = (((n * 7919) % 100_000) / 100 + 1).toFixed(2);
  return {
    accountId,
    bizType: b.bizType,
    outerBizId: order,
    title: b.title,
    content: `¥${amount} ${b.verb} (order ${order}). Tap to see the receipt.`,
    url: `redispay://orders/${order}`,
    needPush: true,
    createdAt,
  };
}

const writeAccount = (i: number) => `w-${i}`;
const pullAccount = (i: number) => `p-${i}`;
/** Every write of the whole run gets the next number: no outerBizId is ever written twice. */
let writeSeq = 0;
/** Each smoke check writes into an account of its own. */
let smokeSeq = 0;

// ---------------------------------------------------------------------------------------------
// Redis from this process: the service's store over the bench connection, for pre-filling and checks

interface BenchStore {
  scripts: ScriptRedis;
  store: InstanceType<typeof import('../src/features/messages/messages.store').MessagesStore>;
  toStored: typeof import('../src/features/messages/messages.service').toStored;
  keysOf(accountId: string): string[];
}

async function benchStore(dist: string, redis: BenchRedis): Promise<BenchStore> {
  const { loadConfig } = requireFromBuild<typeof import('../src/platform/config/load-config')>(dist, 'platform/config/load-config');
  const { KeyBuilder } = requireFromBuild<typeof import('../src/platform/redis/key-builder')>(dist, 'platform/redis/key-builder');
  const { inboxKeys } = requireFromBuild<typeof import('../src/features/messages/message.keys')>(dist, 'features/messages/message.keys');
  const { MessagesStore } = requireFromBuild<typeof import('../src/features/messages/messages.store')>(dist, 'features/messages/messages.store');
  const { messagesConfig } = requireFromBuild<typeof import('../src/features/messages/messages.config')>(dist, 'features/messages/messages.config');
  const { toStored } = requireFromBuild<typeof import('../src/features/messages/messages.service')>(dist, 'features/messages/messages.service');
  // The port is never listened on here (the store needs the key prefix and the retention), but the config requires one.
  const config = loadConfig(fullEnv(3000, redis.url, PREFIX, BASE_ENV));
  // Auto-pipelining on: this connection only fills and inspects, many calls in flight.
  const scripts = await connectScriptRedis(redis.url, { maxRetriesPerRequest: 1 }, join(dist, '..', 'lua'), 'autopipeline');
  onCleanup(
    'bench redis connection',
    () => void scripts.redis.disconnect(),
    () => scripts.redis.disconnect(),
  );
  const keys = new KeyBuilder(config);
  return {
    scripts,
    store: new MessagesStore(scripts as unknown as ScriptRegistry, keys, messagesConfig.of(config)),
    toStored,
    keysOf: (accountId) => inboxKeys(keys, accountId),
  };
}

/** Writes `count` messages into `accountId`'s inbox through the service's store; returns the msgIds, oldest first. */
async function fillInbox(b: BenchStore, accountId: string, count: number): Promise<string[]> {
  const ids: string[] = [];
  const t0 = Date.parse('2026-11-01T00:00:00Z');
  for (let k = 0; k < count; k++) {
    const n = writeSeq++;
    const r = await b.store.write(accountId, b.toStored(message(accountId, n, new Date(t0 + k * 60_000).toISOString())));
    if (r.outcome !== 1) throw new Error(`pre-fill of ${accountId}: write ${n} was not new (outcome ${r.outcome})`);
    ids.push(r.msgId);
  }
  return ids;
}

/** Deletes every key of the write accounts (between rows, while no server runs load). */
async function clearWriteAccounts(b: BenchStore, accounts: number): Promise<void> {
  for (let from = 0; from < accounts; from += 1000) {
    const keys = Array.from({ length: Math.min(1000, accounts - from) }, (_, i) => b.keysOf(writeAccount(from + i))).flat();
    await b.scripts.redis.del(...keys);
  }
}

// ---------------------------------------------------------------------------------------------
// Memory

interface MemoryRow {
  size: number;
  accounts: number;
  /** Per message, averaged over the accounts: bytes of each key (by part) and in all. */
  perKey: { part: string; bytes: number; encoding: string }[];
  total: number;
  body: number;
}

const PARTS = ['inbox', 'bodies', 'idem', 'read', 'meta'];

async function measureMemory(b: BenchStore, accounts: string[], size: number): Promise<MemoryRow> {
  const r = b.scripts.redis;
  const perKey = PARTS.map((part) => ({ part, bytes: 0, encoding: '' }));
  let total = 0;
  let body = 0;
  for (const a of accounts) {
    const keys = b.keysOf(a);
    const n = await r.zcard(keys[0]);
    if (n !== size) throw new Error(`memory: ${a} holds ${n} messages, expected ${size}`);
    // The five parts above; the expiry and withdrawn zsets stay empty here (no message has a ttl, none is withdrawn).
    for (const [i, key] of keys.slice(0, PARTS.length).entries()) {
      const bytes = Number((await r.call('MEMORY', 'USAGE', key, 'SAMPLES', '0')) ?? 0);
      perKey[i].bytes += bytes / n / accounts.length;
      perKey[i].encoding = bytes > 0 ? String(await r.call('OBJECT', 'ENCODING', key)) : '(no key)';
      total += bytes / n / accounts.length;
    }
    const bodies = await r.hvals(keys[1]);
    body += bodies.reduce((s, v) => s + Buffer.byteLength(v), 0) / n / accounts.length;
  }
  return { size, accounts: accounts.length, perKey, total, body };
}

// ---------------------------------------------------------------------------------------------
// One row: a fresh server, smoke checks, the write phase, the pull phase

interface RunContext {
  o: Options;
  redis: BenchRedis;
  bench: BenchStore;
  workDir: string;
  /** The main build's snapshot (the floor always runs it). */
  mainDist: string;
  builds: Map<string, string>;
  /** The next pull request: every request the next pull inbox, with its token and cursor. */
  pullRequest: () => LoadRequest;
  cursor0: { account: string; cursor: string; token: string };
  /** What the first row answered to the smoke pull; every other row must answer the same bytes. */
  smokePull?: string;
}

function startServer(t: Target, ctx: RunContext, port: number, profileDir: string | undefined): ManagedProcess {
  const dist = t.kind === 'floor' ? ctx.mainDist : ctx.builds.get(t.dist ?? ctx.o.dist)!;
  const env = fullEnv(port, ctx.redis.url, PREFIX, { ...BASE_ENV, ...t.env });
  const spawn = { id: t.id, port, cpus: ctx.o.serverCpus, profileDir };
  if (t.kind === 'floor') return spawnBareServer({ ...spawn, script: join(__dirname, 'messages-floor-server.ts'), env: { ...env, DIST: dist } });
  return spawnFullStack({ ...spawn, dist, workDir: ctx.workDir, env });
}

const writeHeaders = { 'content-type': 'application/json', 'x-service-token': BENCH_SERVICE_TOKEN };

/** Proves the server does the service's work: a write stores toStored's JSON, a repeat is a duplicate, a pull answers what every row answers. */
async function smoke(t: Target, ctx: RunContext, base: string): Promise<void> {
  const fail = (what: string, status: number, body: string) => {
    throw new Error(`${t.id}: smoke ${what} failed: ${status} ${body.slice(0, 400)}`);
  };
  const dto = message(`smoke-${smokeSeq++}`, 0, '2026-11-22T08:30:00.000Z');
  const w1 = await httpRequest(`${base}/messages`, { method: 'POST', headers: writeHeaders, body: JSON.stringify(dto) });
  const r1 = JSON.parse(w1.body) as { msgId?: string; duplicate?: boolean };
  if (w1.status !== 201 || r1.duplicate !== false || !r1.msgId) fail('write', w1.status, w1.body);
  const w2 = await httpRequest(`${base}/messages`, { method: 'POST', headers: writeHeaders, body: JSON.stringify(dto) });
  const r2 = JSON.parse(w2.body) as { msgId?: string; duplicate?: boolean };
  if (w2.status !== 200 || r2.duplicate !== true || r2.msgId !== r1.msgId) fail('duplicate write', w2.status, w2.body);
  const stored = await ctx.bench.scripts.redis.hget(ctx.bench.keysOf(dto.accountId)[1], r1.msgId!);
  const expected = JSON.stringify(ctx.bench.toStored(dto));
  if (stored !== expected) throw new Error(`${t.id}: stored body differs from the service's toStored:\n  stored   ${stored}\n  expected ${expected}`);

  const c = ctx.cursor0;
  const p = await httpRequest(`${base}/messages?after=${c.cursor}&limit=${PAGE}`, {
    headers: { authorization: `Bearer ${c.token}`, 'x-account-id': c.account },
  });
  const page = JSON.parse(p.body) as { messages?: { msgId: string }[]; hasMore?: boolean; unread?: number };
  if (p.status !== 200 || page.messages?.length !== PAGE || page.hasMore !== true || page.unread !== INBOX) fail('pull', p.status, p.body);
  if (page.messages![0].msgId <= c.cursor) fail('pull (order)', p.status, p.body);
  ctx.smokePull ??= p.body;
  if (p.body !== ctx.smokePull)
    throw new Error(`${t.id}: the pull answered other bytes than the first row did:\n  ${p.body.slice(0, 300)}\n  ${ctx.smokePull.slice(0, 300)}`);
}

function writeRequests(o: Options): () => LoadRequest {
  return () => {
    const n = writeSeq++;
    const account = writeAccount((n * 7919) % o.writeAccounts);
    return { headers: writeHeaders, body: JSON.stringify(message(account, n, new Date().toISOString())) };
  };
}

async function runTarget(t: Target, ctx: RunContext, n: number): Promise<RowResult> {
  const { o } = ctx;
  const port = await freePort();
  const base = `http://127.0.0.1:${port}`;
  const profDir = join(ctx.workDir, `prof-${t.id}-${n}`);
  const proc = startServer(t, ctx, port, t.profile ? profDir : undefined);
  try {
    await waitUntilServing(proc, port, t.kind === 'full' ? `${base}/health/ready` : undefined, 60_000);
    await smoke(t, ctx, base);
    const durationS = t.profile ? Math.max(o.duration, PROFILE_MIN_S) : o.duration;
    const phase = async (p: Phase): Promise<PhaseResult> => {
      const load = {
        url: `${base}/messages`,
        connections: o.connections,
        requests: p === 'write' ? writeRequests(o) : ctx.pullRequest,
        method: p === 'write' ? 'POST' : 'GET',
      };
      console.error(`[bench] ${t.id} ${p}: warm-up ${o.warmup} s, then ${durationS} s measured`);
      await runLoad({ ...load, durationS: o.warmup, title: `${t.id} ${p} warm-up` });
      await ctx.redis.command('CONFIG', 'RESETSTAT');
      const m: PhaseResult = await measuredLoad({ ...load, durationS, title: `${t.id} ${p}` }, proc.pid, ctx.redis.process.pid);
      const st = await scriptStats(ctx.redis);
      if (st.calls > 0) m.redisUsPerCall = st.usec / st.calls;
      if (m.load.total > 0) m.callsPerRequest = st.calls / m.load.total;
      console.error(`${runLine(`${t.id} ${p}`, m)}, redis ${fmtNum(m.redisUsPerCall, 0)} µs/script call`);
      proc.assertAlive();
      return m;
    };
    const write = await phase('write');
    await clearWriteAccounts(ctx.bench, o.writeAccounts);
    const pull = await phase('pull');
    const exit = await proc.stop(15_000);
    if (t.profile) {
      const dist = t.kind === 'floor' ? ctx.mainDist : ctx.builds.get(t.dist ?? o.dist)!;
      const keep = o.keepProfile ? { dir: o.keepProfile, name: `${NAME}-${t.id}.cpuprofile` } : undefined;
      const profiles = summariseProfileDir(profDir, [ROOT, dirname(dist)], LAYERS, [write.window, pull.window], 25, keep);
      // The phases' windows in profile time, for looking at the kept profile later.
      if (keep) writeFileSync(join(keep.dir, `${NAME}-${t.id}.windows.json`), JSON.stringify({ write: write.window, pull: pull.window }));
      if (!profiles) console.error(`[bench] ${t.id}: no profile (server exit: ${exit})`);
      [write.profile, pull.profile] = profiles ?? [];
    }
    return { target: t, attempts: 1, write, pull };
  } finally {
    await proc.stop(15_000);
    rmSync(profDir, { recursive: true, force: true });
  }
}

// ---------------------------------------------------------------------------------------------
// Report

/** A phase's non-2xx, errors, and answers other than the one expected (201 for writes, 200 for pulls). */
function warnings(all: RowResult[]): string[] {
  const out: string[] = [];
  for (const r of all) {
    for (const p of PHASES) {
      const l = r[p].load;
      const want = p === 'write' ? '201' : '200';
      const other = Object.entries(l.statusCodes).filter(([code]) => code !== want);
      if (l.errors > 0 || l.timeouts > 0 || l.ok === 0 || other.length > 0) {
        out.push(
          `${r.target.id} ${p}: ${l.errors} errors, ${l.timeouts} timeouts out of ${l.total}; status codes ${JSON.stringify(l.statusCodes)} (want only ${want})`,
        );
      }
    }
  }
  return out;
}

function phaseTable(p: Phase, targets: Target[], runs: Map<string, RowResult[]>, repeat: number) {
  const row = (id: string) => {
    const mine = runs.get(id) ?? [];
    return mine.length ? medianBy(mine, (r) => r[p].load.rps)[p] : undefined;
  };
  const cpu = (id: string) => median((runs.get(id) ?? []).map((r) => serverUsPerRequest(r[p])));
  const floor = row('floor');
  const table = markdownTable(
    [
      'Row',
      'req/s (mean)',
      'p50 ms',
      'p99 ms',
      'errors / other status',
      '× floor req/s',
      'server CPU µs/req',
      'Redis µs/script call (calls/req)',
      'CPU % server / redis / autocannon / other jobs',
      ...(repeat > 1 ? ['req/s of each round'] : []),
    ],
    targets.map((t) => {
      const mine = runs.get(t.id)!;
      const m = row(t.id)!;
      const want = p === 'write' ? '201' : '200';
      const bad = mine.reduce((s, x) => s + x[p].load.errors + x[p].load.total - (x[p].load.statusCodes[want] ?? 0), 0);
      return [
        t.label + (bad > 0 ? ' ⚠' : '') + attemptsNote(mine),
        fmtInt(m.load.rps),
        fmtNum(m.load.p50, 0),
        fmtNum(m.load.p99, 0),
        fmtInt(bad),
        floor ? fmtNum(m.load.rps / floor.load.rps, 2) : 'n/a',
        fmtNum(cpu(t.id), 0),
        `${fmtNum(median(mine.map((x) => x[p].redisUsPerCall)), 0)} (${fmtNum(m.callsPerRequest, 2)})`,
        cpuShares(m),
        ...(repeat > 1 ? [t.group === 'profile' ? '' : mine.map((x) => fmtInt(x[p].load.rps)).join(' / ')] : []),
      ];
    }),
    ['left', 'right', 'right', 'right', 'right', 'right', 'right', 'right', 'right', 'left'],
  );
  return { table, floor, full: row('full'), cpu };
}

/** Per-layer µs/request of the two profiles side by side, for one phase. */
function layerComparison(p: Phase, floor: RowResult | undefined, full: RowResult | undefined): string[] {
  const f = floor?.[p];
  const u = full?.[p];
  if (!f?.profile || !u?.profile) return [];
  const per = (m: PhaseResult, name: string) => (m.profile!.layers.find((l) => l.name === name)?.us ?? 0) / m.load.total;
  const busy = (m: PhaseResult) => m.profile!.busyUs / m.load.total;
  const rows = LAYERS.map((l) => l.name)
    .map((name) => ({ name, fl: per(f, name), fu: per(u, name) }))
    .filter((x) => x.fl >= 0.5 || x.fu >= 0.5)
    .sort((a, b) => b.fu - b.fl - (a.fu - a.fl));
  return [
    `**${p}: main-thread CPU per request under the profiler** (floor ${fmtNum(busy(f), 0)} µs, full ${fmtNum(busy(u), 0)} µs; inclusive layers overlap, so columns do not add up):`,
    '',
    markdownTable(
      ['Layer', 'floor µs/req', 'full µs/req', 'full − floor'],
      [
        ['(all busy time)', fmtNum(busy(f), 1), fmtNum(busy(u), 1), fmtNum(busy(u) - busy(f), 1)],
        ...rows.map((x) => [x.name, fmtNum(x.fl, 1), fmtNum(x.fu, 1), fmtNum(x.fu - x.fl, 1)]),
      ],
      ['left', 'right', 'right', 'right'],
    ),
    '',
  ];
}

function memoryMarkdown(rows: MemoryRow[]): string[] {
  return [
    markdownTable(
      ['Inbox', 'bytes / message (5 keys)', 'JSON body bytes / message', 'beyond the body', ...PARTS.map((p) => `${p} B/msg (encoding)`)],
      rows.map((m) => [
        `${fmtInt(m.size)} messages${m.accounts > 1 ? ` (mean of ${m.accounts} accounts)` : ''}`,
        fmtNum(m.total, 0),
        fmtNum(m.body, 0),
        `**${fmtNum(m.total - m.body, 0)}**`,
        ...m.perKey.map((k) => `${fmtNum(k.bytes, 1)} (${k.encoding})`),
      ]),
      ['left', 'right', 'right', 'right', 'right', 'right', 'right', 'right', 'right'],
    ),
  ];
}

// ---------------------------------------------------------------------------------------------

export async function main(args: string[]): Promise<void> {
  const o = parseArgs(args);
  const targets = selectTargets(TARGETS, o, (t) => !o.compare || t.id === 'floor' || t.id === 'full', candidateRow);
  if (o.compare && !(targets.some((t) => t.id === 'floor') && targets.some((t) => t.id === 'full'))) throw new Error('--compare needs the floor and full rows');
  // Read the baseline first: a missing or foreign one fails before the pre-fill and the load.
  const baseline = o.compare ? readBaseline(NAME, o.baseline) : undefined;
  const { workDir, builds, split } = prepareRows(o);
  const mainDist = builds.get(o.dist)!;
  const redis = await startBenchRedis();
  const bench = await benchStore(mainDist, redis);

  // Pre-fill: the pull inboxes and the memory-only inboxes, through the service's own store.
  const fill0 = performance.now();
  const cursors: string[] = new Array<string>(o.pullAccounts);
  await forEachLimit(o.pullAccounts, 200, async (i) => {
    const ids = await fillInbox(bench, pullAccount(i), INBOX);
    cursors[i] = ids[INBOX - CURSOR_FROM_NEWEST];
  });
  for (const size of MEMORY_SIZES.filter((s) => s !== INBOX)) await fillInbox(bench, `mem-${size}`, size);
  console.error(`[bench] pre-filled ${fmtInt(o.pullAccounts)} inboxes of ${INBOX} messages in ${fmtNum((performance.now() - fill0) / 1000, 1)} s`);
  const memory: MemoryRow[] = [];
  for (const size of MEMORY_SIZES) {
    const accounts = size === INBOX ? Array.from({ length: Math.min(MEMORY_SAMPLE, o.pullAccounts) }, (_, i) => pullAccount(i)) : [`mem-${size}`];
    memory.push(await measureMemory(bench, accounts, size));
  }

  const pulls: LoadRequest[] = cursors.map((cursor, i) => ({
    path: `/messages?after=${cursor}&limit=${PAGE}`,
    headers: { authorization: `Bearer ${userToken(pullAccount(i))}`, 'x-account-id': pullAccount(i) },
  }));
  let nextPull = 0;
  const ctx: RunContext = {
    o,
    redis,
    bench,
    workDir,
    mainDist,
    builds,
    pullRequest: () => pulls[nextPull++ % pulls.length],
    cursor0: { account: pullAccount(0), cursor: cursors[0], token: userToken(pullAccount(0)) },
  };

  const env = environmentInfo(redis.version, {
    autocannon: `9 (in the bench process), ${o.connections} connections, per phase ${o.warmup} s warm-up + ${o.duration} s measured (profiled: ${Math.max(o.duration, PROFILE_MIN_S)} s)`,
    ...placementInfo(o, split),
    "Floor's Redis writes": `${redisWritesFromEnv()} (BASELINE_REDIS_WRITES; coalesce = as the service's command connection)`,
  });
  const { schedule, announce } = roundSchedule(targets, o.repeat);
  console.error(`[bench] redis ${redis.version} at ${redis.url}; ${schedule.length} runs (${o.repeat} rounds) of ~${2 * (o.warmup + o.duration) + 3} s each`);
  const { kept, everyAttempt, retriesSkipped, wallS } = await runSchedule(
    schedule,
    (t, n, attempt) => {
      announce(n, attempt);
      return runTarget(t, ctx, n);
    },
    (r) => Math.max(otherShare(r.write), otherShare(r.pull)),
    { busyShare: BUSY_MACHINE, retries: o.retries, budgetS: o.budgetS },
    (t) => t.id,
  );
  await redis.stop();

  const runs = new Map<string, RowResult[]>(targets.map((t) => [t.id, kept.filter((r) => r.target.id === t.id)]));
  const tables = Object.fromEntries(PHASES.map((p) => [p, phaseTable(p, targets, runs, o.repeat)])) as Record<Phase, ReturnType<typeof phaseTable>>;
  const ratio = (p: Phase) => {
    const t = tables[p];
    return t.floor && t.full ? t.full.load.rps / t.floor.load.rps : undefined;
  };
  const cpuRatio = (p: Phase) => {
    const f = tables[p].cpu('floor');
    const u = tables[p].cpu('full');
    return f !== undefined && u !== undefined ? f / u : undefined;
  };
  const verdict = (r: number | undefined) => (r === undefined ? 'n/a' : r >= GOAL ? 'met' : '**not met**');
  const warns = warnings(everyAttempt);
  const profiled = (kind: Target['kind']) => kept.find((r) => r.target.profile && r.target.kind === kind);
  const isDisturbed = (r: RowResult) => Math.max(otherShare(r.write), otherShare(r.pull)) > BUSY_MACHINE;
  const disturbedRuns = { disturbed: kept.filter(isDisturbed).length, of: kept.length };
  const comparison = baseline
    ? compareWithBaseline(
        baseline,
        PHASES.map((p) => ({ key: `${p}FullOverFloorRps`, label: `${p}: full / floor req/s`, measured: ratio(p) })),
        COMPARE_TOLERANCE,
      )
    : undefined;
  const goals = goalLines(tables, ratio, cpuRatio, comparison);

  const md: string[] = [];
  md.push(...reportHead(NAME, args, env, goals));
  md.push(
    `Load: **write** = POST /messages (service token), a new outerBizId every request, spread over ${fmtInt(o.writeAccounts)} accounts, ` +
      `~${fmtInt(JSON.stringify(message(writeAccount(0), 0, new Date().toISOString())).length)} B JSON bodies; ` +
      `**pull** = GET /messages?after=<cursor>&limit=${PAGE} (user JWT), over ${fmtInt(o.pullAccounts)} inboxes of ${INBOX} messages, the cursor the ${CURSOR_FROM_NEWEST}th-newest msgId, ` +
      `so every pull returns ${PAGE} messages (~${fmtInt(ctx.smokePull?.length ?? 0)} B of JSON). ` +
      `Both servers use the same key prefix, env (RATE_LIMIT_ENABLED=false) and Redis. Each server in its own process, fresh per row, one write phase then one pull phase. ` +
      'Latency percentiles have 1 ms resolution (autocannon). CPU columns come from /proc over the measured run: 100% = one core.' +
      (o.repeat > 1
        ? ` ${o.repeat} rounds, rows interleaved, profiled rows once at the end; each row shows its median round by req/s (req/s, latency, CPU %), ` +
          'the median over rounds of server CPU µs/req, and bad answers summed over rounds.'
        : ''),
    '',
  );
  md.push(`## Full against floor (goal: full ≥ ${GOAL} × floor)`, '');
  md.push(
    markdownTable(
      ['Phase', 'floor req/s', 'full req/s', 'full / floor (req/s)', 'by server CPU per request (floor µs ÷ full µs)', 'goal'],
      PHASES.map((p) => [
        p,
        fmtInt(tables[p].floor?.load.rps ?? NaN),
        fmtInt(tables[p].full?.load.rps ?? NaN),
        `**${fmtNum(ratio(p), 2)}**`,
        cpuRatio(p) === undefined ? 'n/a' : `${fmtNum(cpuRatio(p), 2)} (${fmtNum(tables[p].cpu('floor'), 0)} ÷ ${fmtNum(tables[p].cpu('full'), 0)})`,
        verdict(ratio(p)),
      ]),
      ['left', 'right', 'right', 'right', 'right', 'left'],
    ),
    '',
  );
  if (comparison) md.push('## Comparison with the committed result', '', ...comparisonLines(comparison).map((l) => `- ${l}`), '');
  md.push('## Write: POST /messages', '', tables.write.table, '');
  md.push(`## Pull: GET /messages?after=…&limit=${PAGE}`, '', tables.pull.table, '');
  md.push('## Redis bytes per stored message', '');
  md.push(
    '`MEMORY USAGE <key> SAMPLES 0` of the five keys of an account (inbox zset, bodies hash, idempotency hash, read set, meta hash) ÷ its messages; ' +
      '"beyond the body" subtracts the stored JSON body (the content as stored, with its `k` idempotency field). Nothing read yet, so the read set does not exist.',
    '',
  );
  md.push(...memoryMarkdown(memory), '');
  if (warns.length) {
    md.push('> ⚠ **Some requests failed or were not the expected answer; the figures of those rows are not valid:**');
    for (const w of warns) md.push(`> - ${w}`);
    md.push('');
  }
  const disturbed = kept.filter(isDisturbed).map((r) => r.target.id);
  if (disturbed.length) {
    md.push(
      `> ⚠ Other jobs used more than ${BUSY_MACHINE * 100}% of a core, even after retries, during runs of: ${[...new Set(disturbed)].join(', ')}. Compare with care.`,
      '',
    );
  }
  // The same scripts on the same data cost Redis the same everywhere, so a run whose Redis time per call is well above the
  // phase's median ran on a slower machine (the host's other tenants do not show up as "other jobs").
  const slow = PHASES.flatMap((p) => {
    const typical = median(kept.filter((r) => r.target.group !== 'profile').map((r) => r[p].redisUsPerCall));
    return typical === undefined
      ? []
      : kept
          .filter((r) => (r[p].redisUsPerCall ?? 0) > SLOW_MACHINE * typical)
          .map((r) => `${r.target.id} ${p} (${fmtNum(r[p].redisUsPerCall, 0)} vs ${fmtNum(typical, 0)} µs)`);
  });
  if (slow.length) {
    md.push(
      `> ⚠ Redis needed over ${fmtNum(100 * (SLOW_MACHINE - 1), 0)}% more time per script call than the phase's median during: ${slow.join(', ')}. ` +
        'The scripts and data are the same in every row, so the machine itself was slower then (other tenants of the host); those runs are slower across the board.',
      '',
    );
  }
  if (profiled('full') || profiled('floor')) {
    md.push('## Where the time goes', '');
    for (const p of PHASES) md.push(...layerComparison(p, profiled('floor'), profiled('full')));
    for (const r of [profiled('full'), profiled('floor')]) {
      if (!r) continue;
      for (const p of PHASES) {
        if (!r[p].profile) continue;
        md.push(`### CPU profile: ${r.target.id}, ${p}`, '');
        md.push(`From \`node --cpu-prof\` (row "${r.target.label}"); only samples of the measured ${p} phase count.`, '');
        md.push(profileMarkdown(r[p].profile!, r[p].load.total), '');
      }
    }
  }
  md.push('## Notes', '');
  for (const p of PHASES) {
    const f = tables[p].floor;
    const busy = f?.serverCpuS !== undefined ? f.serverCpuS / f.wallS : undefined;
    if (f && busy !== undefined && busy < 0.9) {
      md.push(
        `- ${p}: the floor's server used only ${fmtNum(100 * busy, 0)}% of its CPU, so its req/s is capped elsewhere: by Redis ` +
          `(${fmtNum(median((runs.get('floor') ?? []).map((r) => r[p].redisUsPerCall)), 0)} µs per script call) ` +
          'and the load generator, which share the other CPU, and the hand-offs between them. The req/s ratio then understates what the full stack costs on the server; ' +
          'the ratio by server CPU per request (goal table) does not.',
      );
    }
  }
  md.push(
    "- The floor runs the service's own compiled code for the work itself (MessagesService.write/pull, MessagesStore, toStored, toDto, the broadcast feed) " +
      "on a connection with the service's ioredis options, so the gap is what Nest, the ValidationPipe (class-validator, class-transformer), the auth guard, " +
      "metrics, the request id, the raw body and the access log add; each row's smoke check proves the same stored JSON and the same pull bytes.",
    '- The pull also reads the latest broadcast sequence once a second (the broadcast feed), in both servers; no broadcasts exist in this run.',
    '- Writes go into inboxes emptied before every row (a few messages each by the end of a phase); see the memory table for what an inbox costs as it grows.',
    split
      ? `- Each server under test has CPU ${split.server} to itself, so req/s is what one core of this server does; autocannon and redis-server share CPU ${split.rest}. ` +
          'The machine is shared and noisy all the same: compare rows of one run.'
      : '- Not pinned: autocannon, the server and redis-server compete for the CPUs; compare rows of one run.',
    `- The rows took ${fmtNum(wallS, 0)} s of wall time in all (${everyAttempt.length} runs)${retriesSkipped ? `; ${retriesSkipped} retries skipped for the --budget` : ''}.`,
  );
  // Only the standard run (no options) replaces the checked-in result; runs with options (--compare among them) go to the temp dir.
  const outDir = args.length > 0 ? join(tmpdir(), 'redis-pay-bench') : undefined;
  writeResult(NAME, md.join('\n'), outDir);
  const phaseJson = (p: Phase, t: Target) => {
    const mine = runs.get(t.id) ?? [];
    if (!mine.length) return null;
    const m = medianBy(mine, (r) => r[p].load.rps)[p];
    const floor = tables[p].floor;
    const want = p === 'write' ? '201' : '200';
    return {
      rps: jsonNum(m.load.rps, 0),
      p50Ms: m.load.p50,
      p99Ms: m.load.p99,
      overFloorRps: floor ? jsonNum(m.load.rps / floor.load.rps) : null,
      serverUsPerRequest: jsonNum(tables[p].cpu(t.id), 1),
      redisUsPerRequest: jsonNum(
        median(mine.map((x) => (x[p].redisCpuS !== undefined && x[p].load.total > 0 ? (x[p].redisCpuS * 1e6) / x[p].load.total : undefined))),
        1,
      ),
      redisUsPerScriptCall: jsonNum(median(mine.map((x) => x[p].redisUsPerCall)), 1),
      scriptCallsPerRequest: jsonNum(m.callsPerRequest),
      badAnswers: mine.reduce((s, x) => s + x[p].load.errors + x[p].load.total - (x[p].load.statusCodes[want] ?? 0), 0),
      rounds: mine.map((x) => ({
        rps: jsonNum(x[p].load.rps, 0),
        serverUsPerRequest: jsonNum(serverUsPerRequest(x[p]), 1),
        otherShare: jsonNum(otherShare(x[p])),
        attempts: x.attempts,
      })),
      ...(m.profile ? { profileBusyUsPerRequest: jsonNum(m.profile.busyUs / m.load.total, 1) } : {}),
    };
  };
  const json = benchJson(
    {
      bench: NAME,
      args,
      dist: o.dist,
      environment: env,
      goals,
      disturbedRuns,
      ratios: Object.fromEntries(
        PHASES.flatMap((p) => [
          [`${p}FullOverFloorRps`, jsonNum(ratio(p))],
          [`${p}FullOverFloorCpu`, jsonNum(cpuRatio(p))],
        ]),
      ),
    },
    {
      rows: targets.map((t) => ({
        id: t.id,
        label: t.label,
        group: t.group,
        ...(t.dist ? { dist: t.dist } : {}),
        write: phaseJson('write', t),
        pull: phaseJson('pull', t),
      })),
      memory: memory.map((m) => ({
        inboxMessages: m.size,
        accounts: m.accounts,
        bytesPerMessage: jsonNum(m.total, 1),
        bodyBytesPerMessage: jsonNum(m.body, 1),
        perKey: m.perKey.map((k) => ({ ...k, bytes: jsonNum(k.bytes, 1) })),
      })),
      ...(comparison ? { comparison: { baseline: comparison.baselinePath, tolerance: COMPARE_TOLERANCE, ok: comparison.ok } } : {}),
    },
  );
  writeJsonResult(NAME, json, outDir);

  for (const p of PHASES) {
    const r = ratio(p);
    if (r !== undefined) console.log(`[bench] ${p}: full/floor req/s ratio ${fmtNum(r, 2)} (goal >= ${GOAL})${r < GOAL ? ' — BELOW GOAL' : ''}`);
  }
  if (warns.length) {
    const bar = '!'.repeat(78);
    console.error(
      `\n${bar}\n!! WARNING: failed or unexpected answers during the benchmark; results are NOT valid\n${warns.map((w) => `!!   ${w}`).join('\n')}\n${bar}\n`,
    );
  }
  if (comparison) {
    if (warns.length) throw new BenchCheckFailed(`${NAME}: requests failed during the comparison run, so it proves nothing:\n  ${warns.join('\n  ')}`);
    enforceComparison(NAME, comparison, disturbedRuns);
  }
}

/** The report's goals table: each phase's goal, its CPU view, and with --compare the regression checks. */
function goalLines(
  tables: Record<Phase, ReturnType<typeof phaseTable>>,
  ratio: (p: Phase) => number | undefined,
  cpuRatio: (p: Phase) => number | undefined,
  comparison: Comparison | undefined,
): GoalLine[] {
  const what: Record<Phase, string> = { write: 'Writes (POST /messages)', pull: `Pulls (GET /messages, ${PAGE} a page)` };
  const goals: GoalLine[] = PHASES.flatMap((p): GoalLine[] => {
    const t = tables[p];
    const r = ratio(p);
    const c = cpuRatio(p);
    return [
      {
        goal: `${what[p]}: full / floor req/s`,
        target: `≥ ${GOAL}`,
        measured: r !== undefined && t.floor && t.full ? `${fmtNum(r, 2)} (${fmtInt(t.full.load.rps)} vs ${fmtInt(t.floor.load.rps)} req/s)` : 'not measured',
        met: r === undefined ? undefined : r >= GOAL,
      },
      {
        goal: `${what[p]}: the same by server CPU per request (floor µs ÷ full µs)`,
        target: `≥ ${GOAL}`,
        measured: c === undefined ? 'not measured' : `${fmtNum(c, 2)} (${fmtNum(t.cpu('floor'), 0)} ÷ ${fmtNum(t.cpu('full'), 0)} µs)`,
        info: true,
      },
    ];
  });
  return [...goals, ...comparisonGoalLines(comparison)];
}
