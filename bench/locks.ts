/**
 * locks: the lock engine (LockService, src/engines/locks) against its peers redlock and redis-semaphore, side by side on
 * one redis-server; the rows are in bench/lib/locks-clients.ts, the method in docs/benchmarks.md ("locks").
 *   uncontended  acquire + release ops/s on names nobody else wants, 1 and 50 in flight, with the reference row fenced-floor;
 *   handoff      11 clients, each in its own process (bench/lib/locks-handoff.ts): release issued → next holder's acquire;
 *   scripts      Redis's execution time per acquire + release: the engine's scripts, with a piece cut out, and the peers'.
 * That holds never overlap and fencing tokens only increase is proved by test/e2e/locks-service.e2e-spec.ts ("50 contenders
 * on two instances never overlap…") and test/e2e/locks-cluster.e2e-spec.ts, not here.
 * Options: --quick, --only uncontended,handoff,scripts. Only the standard run writes bench/results/locks.{md,json}; others write to $TMPDIR/redis-pay-bench/.
 */
import { BUSY_MACHINE, busyMark, commandUs, cpuWindow, type CpuWindow, otherShare, redisCpuFromInfo, type RedisCpu } from './lib/engine-bench';
import Redis from 'ioredis';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { onCleanup } from './lib/cleanup';
import { ROOT } from './lib/full-stack';
import { allLibraries, FENCE_KEEP_MS, FENCED_ACQUIRE_LUA, LEASE_MS, type LockClient, type LockLibrary, OWNER_RELEASE_LUA, WAIT_MS } from './lib/locks-clients';
import { type HandoffRun, HandoffWorkers } from './lib/locks-handoff';
import { dist, type Dist, median, ms, runSchedule } from './lib/measure';
import { fmtInt, fmtNum, type GoalLine, markdownTable } from './lib/report';
import { type BenchContext, defineBench } from './lib/scenario';
import { loadScriptFile } from '../src/platform/scripts/script-loader';

const HANDOFF_P50_GOAL_MS = 2;
const MODES = ['serial', 'concurrent'] as const;
type Mode = (typeof MODES)[number];

function options({ quick }: BenchContext) {
  return {
    quick,
    uncontended: { rounds: quick ? 1 : 4, warmupMs: quick ? 200 : 300, measureMs: quick ? 500 : 1500, concurrency: 50, budgetS: quick ? 10 : 75 },
    scripts: { rounds: quick ? 2 : 10, batch: quick ? 300 : 2000 },
    handoff: { waiters: 10, count: quick ? 100 : 1000, singleCount: quick ? 30 : 300, rounds: quick ? 1 : 2, holdMs: 1, firstHoldMs: 50, capS: quick ? 5 : 12 },
  };
}
type Options = ReturnType<typeof options>;
/** Hand-offs not counted at the start of a run: two per client, so every client's long first hold and first wait are behind it. */
const warmupFor = (waiters: number) => 2 * (waiters + 1);
const inFlight = (o: Options, mode: Mode) => (mode === 'serial' ? 1 : o.uncontended.concurrency);

// ---------------------------------------------------------------------------------------------
// Uncontended acquire + release

type UncontendedRun = { lib: string; mode: Mode; attempts: number; ops: number; cpu: CpuWindow; commandUs: number };

/** Loops on one client, each acquire on a name never used before; counts what completes in the measured window. */
async function uncontendedRun(client: LockClient, lib: LockLibrary, mode: Mode, prefix: string, o: Options, admin: Redis, redisCpu: RedisCpu) {
  let [stop, ops] = [false, 0];
  const loop = async (k: number) => {
    for (let i = 0; !stop; i++, ops++) await (await client.acquire(`${prefix}:${k}:${i}`))();
  };
  const loops = Promise.all(Array.from({ length: inFlight(o, mode) }, (_, k) => loop(k)));
  loops.catch(() => (stop = true));
  await sleep(o.uncontended.warmupMs);
  await admin.config('RESETSTAT');
  const [end, ops0] = [await cpuWindow(redisCpu), ops];
  await sleep(o.uncontended.measureMs);
  const [cpu, done] = [await end(), ops - ops0];
  const us = await commandUs(admin, lib.commands);
  stop = true;
  await loops;
  return { ops: done, cpu, commandUs: us / done };
}

async function measureUncontended(o: Options, libs: LockLibrary[], admin: Redis, redisCpu: RedisCpu): Promise<UncontendedRun[]> {
  const clients = new Map<string, LockClient>();
  for (const lib of libs) clients.set(lib.id, await lib.connect());
  // Round by round, each mode with every library, the order rotated every round; a run other jobs disturbed is made again.
  const slots = Array.from({ length: o.uncontended.rounds }, (_, round) =>
    MODES.flatMap((mode) => libs.map((_, i) => ({ round, mode, lib: libs[(i + round) % libs.length] }))),
  );
  const label = (s: (typeof slots)[number][number]) => `${s.lib.id} ${inFlight(o, s.mode)} in flight`;
  try {
    const run = async (s: (typeof slots)[number][number]) => {
      await admin.flushall();
      const r = await uncontendedRun(clients.get(s.lib.id)!, s.lib, s.mode, `u${s.round}${s.mode[0]}`, o, admin, redisCpu);
      console.error(`[bench]   ${label(s)}: ${fmtInt(r.ops / r.cpu.wallS)} ops/s${busyMark(r.cpu)}`);
      return { lib: s.lib.id, mode: s.mode, attempts: 1, ...r };
    };
    const options = { busyShare: BUSY_MACHINE, retries: 2, budgetS: o.uncontended.budgetS };
    return (await runSchedule(slots.flat(), run, (r) => otherShare(r.cpu), options, label)).kept;
  } finally {
    for (const c of clients.values()) await c.close();
  }
}

/** `us`: per acquire + release, this process's CPU, redis-server's CPU, Redis command time (INFO commandstats). */
type UncontendedRow = { lib: string; mode: Mode; median: number; min: number; max: number; us: [number, number, number]; busy: boolean };

const summariseUncontended = (runs: UncontendedRun[], order: string[]): UncontendedRow[] =>
  order.flatMap((lib) =>
    MODES.flatMap((mode) => {
      const all = runs.filter((r) => r.lib === lib && r.mode === mode);
      // Runs other jobs still disturbed after their retries count only when the row has no other.
      const quiet = all.filter((r) => otherShare(r.cpu) <= BUSY_MACHINE);
      const rs = quiet.length ? quiet : all;
      const per = (f: (r: UncontendedRun) => number) => median(rs.map(f)) ?? NaN;
      const ops = rs.map((r) => r.ops / r.cpu.wallS);
      const us: UncontendedRow['us'] = [per((r) => (r.cpu.selfS * 1e6) / r.ops), per((r) => (r.cpu.redisS * 1e6) / r.ops), per((r) => r.commandUs)];
      return all.length ? [{ lib, mode, median: median(ops)!, min: Math.min(...ops), max: Math.max(...ops), us, busy: quiet.length < all.length }] : [];
    }),
  );

// ---------------------------------------------------------------------------------------------
// Hand-off

/** `requests`: commands all participants sent per hand-off, over whole runs (warm-up included). */
type HandoffRow = { lib: string; waiters: number; issued: Dist; returned: Dist; wait: Dist; requests: number; capped: boolean };

async function measureHandoff(o: Options, libs: LockLibrary[], redisUrl: string, admin: Redis): Promise<HandoffRow[]> {
  const h = o.handoff;
  const workers = await HandoffWorkers.start(h.waiters + 1, redisUrl);
  const runs: { lib: string; waiters: number; run: HandoffRun }[] = [];
  try {
    await admin.flushall();
    for (const [waiters, total] of [
      [h.waiters, h.count],
      [1, h.singleCount],
    ]) {
      for (let round = 0; round < h.rounds; round++) {
        for (const lib of libs.map((_, i) => libs[(i + round) % libs.length])) {
          const settings = { ...h, warmup: warmupFor(waiters) };
          const run = await workers.run(runs.length, lib.id, waiters, `h${waiters}.${round}.${lib.id}`, Math.ceil(total / h.rounds), settings);
          runs.push({ lib: lib.id, waiters, run });
          const d = dist(run.fromIssued);
          console.error(`[bench] hand-off ${lib.id}, ${waiters} waiter(s): ${d.n} hand-offs, p50 ${ms(d.p50)} ms, p99 ${ms(d.p99)} ms`);
        }
      }
    }
  } finally {
    await workers.close();
  }
  return [h.waiters, 1].flatMap((waiters) =>
    libs.map((lib) => {
      const rs = runs.filter((r) => r.lib === lib.id && r.waiters === waiters).map((r) => r.run);
      const all = (f: (r: HandoffRun) => number[]) => dist(rs.flatMap(f));
      const requests = rs.reduce((s, r) => s + r.requests, 0) / rs.reduce((s, r) => s + r.all, 0);
      return {
        lib: lib.id,
        waiters,
        issued: all((r) => r.fromIssued),
        returned: all((r) => r.fromReturned),
        wait: all((r) => r.waits),
        requests,
        capped: rs.some((r) => r.capped),
      };
    }),
  );
}

// ---------------------------------------------------------------------------------------------
// What the semantics cost inside Redis

type ScriptCost = { label: string; us: number };

/**
 * One acquire + release of a lock nobody else wants, on one connection: the engine's scripts (lua/engines/locks) as shipped, the
 * same with a piece of the fast path cut out (not working locks: they price the piece), and the peers' commands; interleaved
 * batches, the order shuffled every round. Redis's own execution time (INFO commandstats: no network, no client).
 */
async function measureScripts(o: Options, admin: Redis): Promise<ScriptCost[]> {
  const luaDir = join(ROOT, 'lua');
  const [acquire, release] = ['acquire-2', 'release-1'].map((f) => loadScriptFile(luaDir, join(luaDir, 'engines', 'locks', `${f}.lua`)).source);
  const cut = (text: string, from: string, to: string) => {
    if (!text.includes(from)) throw new Error(`locks --only scripts: acquire-2.lua no longer contains ${JSON.stringify(from)}; update the variant`);
    return text.replace(from, to);
  };
  const noFence = cut(acquire, 'local token = nextFencingToken(fenceKey, fenceKeepMs, nowUs)', "local token = string.format('%.0f', nowUs)");
  const noClock = cut(noFence, 'local nowMs, nowUs = serverTimeMsAndUs()', 'local nowMs, nowUs = 1763000000000, 1763000000000000');
  const script = (lua: string) => {
    const sha = admin.script('LOAD', lua) as Promise<string>;
    return async (keys: string[], ...args: (string | number)[]) => admin.evalsha(await sha, keys.length, ...keys, ...args);
  };
  const [ownerRelease, fenced] = [script(OWNER_RELEASE_LUA), script(FENCED_ACQUIRE_LUA)];
  const setNx = script("return redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2])");
  const engine = (lua: string) => {
    const [a, r] = [script(lua), script(release)];
    return async (k: string, w: string) => (await a([`${k}h`, `${k}fence`], w, 'w', LEASE_MS, 0, FENCE_KEEP_MS, '0'), await r([`${k}h`], w, `${k}released`));
  };
  const variants: [string, (k: string, w: string) => Promise<unknown>, string[]?][] = [
    ['engine: acquire-2 + release-1 as shipped', engine(acquire)],
    ['engine without the fencing counter (token = Redis clock only)', engine(noFence)],
    ['engine without the fencing counter and without TIME (no lease end, no token)', engine(noClock)],
    [
      'a string key with the same fencing counter (fenced-floor)',
      async (k, w) => (await fenced([`${k}fs`, `${k}fence`], w, LEASE_MS, FENCE_KEEP_MS), await ownerRelease([`${k}fs`], w)),
    ],
    ['redlock: SET NX PX in a script; GET + DEL in a script', async (k, w) => (await setNx([`${k}rl`], w, LEASE_MS), await ownerRelease([`${k}rl`], w))],
    [
      'redis-semaphore: SET NX PX; GET + DEL in a script',
      async (k, w) => (await admin.set(`${k}rs`, w, 'PX', LEASE_MS, 'NX'), await ownerRelease([`${k}rs`], w)),
      ['evalsha', 'set'],
    ],
  ];
  const samples = variants.map((): number[] => []);
  for (let round = 0, n = 0; round < o.scripts.rounds; round++) {
    for (const v of [...variants.keys()].sort(() => Math.random() - 0.5)) {
      await admin.flushall();
      await admin.config('RESETSTAT');
      // A new lock name and an owner of the engine's length (instance:uuid) for every pair.
      for (let i = 0; i < o.scripts.batch; i++, n++)
        await variants[v][1](`bench-locks:locks:{s${n}}:`, `abcdef12:0b7c7a86-5c3e-4b39-9f0e-${String(n).padStart(12, '0')}`);
      samples[v].push((await commandUs(admin, variants[v][2] ?? ['evalsha'])) / o.scripts.batch);
    }
  }
  return variants.map(([label], v) => ({ label, us: median(samples[v]) ?? NaN }));
}

// ---------------------------------------------------------------------------------------------
// Report

function goals({ o, u, hs }: Result): GoalLine[] {
  const out: GoalLine[] = [];
  for (const mode of MODES) {
    const at = `1 client, ${inFlight(o, mode)} in flight`;
    const [e, floor] = ['engine', 'fenced-floor'].map((lib) => u.find((s) => s.lib === lib && s.mode === mode));
    const peers = u.filter((s) => s.mode === mode && !['engine', 'fenced-floor'].includes(s.lib));
    const vs = (x: UncontendedRow, withOps: boolean) =>
      peers.map((p) => `${fmtNum(x.median / p.median, 2)}× ${p.lib}${withOps ? ` (${fmtInt(p.median)})` : ''}`).join(', ');
    if (!e) continue;
    const target = '— (information: the price of fencing, reentrancy and read/write)';
    out.push({ goal: `uncontended acquire+release, ${at}`, target, measured: `${fmtInt(e.median)} ops/s; ${vs(e, true)}`, info: true });
    // What any lock that returns a fencing token can reach here: a ratio below 1 means no fenced lock, however lean, reaches that peer.
    const measured = floor && `fenced-floor ${fmtInt(floor.median)} ops/s: ${vs(floor, false)}; engine ÷ fenced-floor ${fmtNum(e.median / floor.median, 2)}`;
    if (measured) out.push({ goal: `bound: the cheapest fenced lock ÷ each peer (uncontended, ${at})`, target: '— (information)', measured, info: true });
  }
  for (const waiters of [o.handoff.waiters, 1]) {
    const e = hs.find((s) => s.lib === 'engine' && s.waiters === waiters);
    const peers = hs.filter((s) => s.lib !== 'engine' && s.waiters === waiters).map((p) => `${p.lib} ${ms(p.issued.p50)}`);
    if (e)
      out.push({
        goal: `hand-off, ${waiters} waiter${waiters > 1 ? 's' : ' (a polling waiter pays its whole retry interval)'}: release issued → next holder`,
        target: `engine p50 ≤ ${HANDOFF_P50_GOAL_MS} ms`,
        measured: `p50 ${ms(e.issued.p50)} ms, p99 ${ms(e.issued.p99)} ms (p50: ${peers.join(', ')})`,
        met: e.issued.p50 <= HANDOFF_P50_GOAL_MS,
      });
  }
  return out;
}

const table = (headers: string[], rows: string[][]) => markdownTable(headers, rows, ['left', ...headers.slice(1).map(() => 'right' as const)]);

type Result = { o: Options; libs: LockLibrary[]; u: UncontendedRow[]; hs: HandoffRow[]; sc: ScriptCost[] };

function report({ o, libs, u, hs, sc }: Result): string[] {
  const md: string[] = [];
  const label = (id: string) => libs.find((l) => l.id === id)?.label ?? id;
  const [x, h, c] = [o.uncontended, o.handoff, o.uncontended.concurrency];
  if (u.length) {
    const row = (lib: string, mode: Mode) => u.find((s) => s.lib === lib && s.mode === mode);
    const ops = (r?: UncontendedRow) => (r ? `${fmtInt(r.median)} (${fmtInt(r.min)}–${fmtInt(r.max)})${r.busy ? ' ⚠' : ''}` : 'n/a');
    const ratio = (r: UncontendedRow | undefined, mode: Mode) => fmtNum((row('engine', mode)?.median ?? NaN) / (r?.median ?? NaN), 2);
    const us = (lib: string, k: number) => MODES.map((m) => fmtNum(row(lib, m)?.us[k], 1)).join(' / ');
    md.push('## Uncontended acquire + release', '');
    md.push(
      `Every acquire on a lock name never used before, then its release, awaited; "1 in flight": one loop, "${c} in flight": ${c} loops on one client. Each run ` +
        `${fmtNum(x.measureMs / 1000, 1)} s after ${x.warmupMs} ms of warm-up; ${x.rounds} rounds, the order rotated; median (min–max). ⚠: a run other jobs disturbed ` +
        `(more than ${BUSY_MACHINE * 100}% of a core) even after its retries. "Redis command time": what INFO commandstats says Redis spent executing what the client ` +
        'sent, which prices each lock\'s semantics inside Redis. The reference row is not a lock the service could use: it prices only "acquire returns a fencing token".',
      '',
    );
    const headers = ['library', '1 in flight: ops/s (min–max)', 'engine ÷ row', `${c} in flight: ops/s (min–max)`, 'engine ÷ row'];
    const cpu = [`client CPU µs/op (1 / ${c})`, `Redis CPU µs/op (1 / ${c})`, `Redis command time µs/op (1 / ${c})`];
    const rows = [...new Set(u.map((s) => s.lib))].map((lib) => [
      label(lib),
      ...MODES.flatMap((m) => [ops(row(lib, m)), ratio(row(lib, m), m)]),
      ...[0, 1, 2].map((k) => us(lib, k)),
    ]);
    md.push(table([...headers, ...cpu], rows), '');
  }
  if (hs.length) {
    const headers = 'library|hand-offs|p50 ms|p90 ms|p99 ms|max ms|p50 from release returned|acquire wait p50 / max ms|Redis commands per hand-off'.split('|');
    const rows = (waiters: number) =>
      hs
        .filter((s) => s.waiters === waiters)
        .map((s) => [
          label(s.lib),
          `${fmtInt(s.issued.n)}${s.capped ? ' (time cap)' : ''}`,
          ...[s.issued.p50, s.issued.p90, s.issued.p99, s.issued.max, s.returned.p50].map(ms),
          `${ms(s.wait.p50)} / ${ms(s.wait.max)}`,
          fmtNum(s.requests, 1),
        ]);
    md.push('## Hand-off', '');
    md.push(
      `${h.waiters + 1} clients contend for one lock, each in its own process; a holder holds ${h.holdMs} ms, releases, and asks again only once another client has ` +
        `the lock, so at every release the others are all waiting in acquire(). **Latency: from the release call being issued to the next holder's \`acquire()\` ` +
        `resolving** (CLOCK_MONOTONIC); "from release returned" starts when the releasing process saw its release resolve. The first ${warmupFor(h.waiters)} hand-offs ` +
        `of a run (${warmupFor(1)} with 1 waiter) are not counted; ${h.rounds} rounds per row, the order rotated; a run stops after ${h.capS} s (the slow polling rows).`,
      '',
      `### ${h.waiters} waiters`,
      '',
      table(headers, rows(h.waiters)),
      '',
      '### 1 waiter',
      '',
      'One holder and one waiter: a polling waiter is alone to notice the release, so it pays its retry interval.',
      '',
      table(headers, rows(1)),
      '',
    );
  }
  if (sc.length) {
    md.push('## What the semantics cost inside Redis', '');
    md.push(
      "One acquire + release of a lock nobody else wants, on one connection: the engine's scripts as shipped, the same with a piece of the fast path cut out " +
        "(not working locks: they price the piece), and the peers' commands. Redis's own execution time (INFO commandstats: no network, no client); " +
        `${o.scripts.rounds} rounds of ${fmtInt(o.scripts.batch)} pairs per variant, the order shuffled every round, median.`,
      '',
    );
    const rows = sc.map((r) => [r.label, fmtNum(r.us, 2), fmtNum(r.us / sc[0].us, 2)]);
    md.push(table(['variant', 'Redis µs per acquire + release', '÷ engine'], rows), '');
  }
  md.push(
    '## Settings',
    '',
    `- Every row: lease ${LEASE_MS} ms, an acquire waits up to ${WAIT_MS} ms, exclusive lock; its own ioredis connection(s) with the service's options.`,
  );
  md.push(...libs.map((l) => `- **${l.label}**: ${l.settings}.`));
  return md;
}

export const { main } = defineBench<Result>({
  name: 'locks',
  sections: ['uncontended', 'handoff', 'scripts'],
  prefix: 'bench-locks',
  async run(ctx) {
    const o = options(ctx);
    const admin = new Redis(ctx.redis.url, { maxRetriesPerRequest: 1 });
    const unregister = onCleanup(
      'locks bench admin connection',
      () => admin.disconnect(),
      () => admin.disconnect(),
    );
    const { libs, fencedFloor } = allLibraries(ctx.redis.url);
    const version = (name: string) => (JSON.parse(readFileSync(join(ROOT, 'node_modules', name, 'package.json'), 'utf8')) as { version: string }).version;
    Object.assign(ctx.env, {
      ...Object.fromEntries(['redlock', 'redis-semaphore', 'ioredis', '@nestjs/core'].map((p) => [p, version(p)])),
      'Engine under test':
        'LockService (src/engines/locks), one Nest application context per client (config, metrics, Redis, scripts, the lock module; no HTTP)',
      Placement: 'uncontended: the client in this process; hand-off: one process per client; redis-server on loopback; nothing pinned',
      Mode: ctx.quick ? 'quick (short smoke run)' : 'full',
    });
    // redlock-10ms differs from redlock only in its retry, which an uncontended acquire never uses; fenced-floor cannot wait (no hand-off).
    const uncontended = [...libs.filter((l) => l.id !== 'redlock-10ms'), fencedFloor];
    const u = ctx.has('uncontended') ? await measureUncontended(o, uncontended, admin, redisCpuFromInfo(admin)) : [];
    const hs = ctx.has('handoff') ? await measureHandoff(o, libs, ctx.redis.url, admin) : [];
    const sc = ctx.has('scripts') ? await measureScripts(o, admin) : [];
    admin.disconnect();
    unregister();
    return {
      o,
      libs: [...libs, fencedFloor],
      u: summariseUncontended(
        u,
        uncontended.map((l) => l.id),
      ),
      hs,
      sc,
    };
  },
  goals: (r) => goals(r),
  report: (r) => report(r),
});
