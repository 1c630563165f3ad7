/**
 * locks: the lock engine (src/engines/locks, LockService) against redlock and redis-semaphore (devDependencies),
 * all in one run against one redis-server on loopback (no RDB, no AOF).
 *
 * Rows (bench/lib/locks-clients.ts): the engine from a snapshot of the build, one Nest application
 * context (config, metrics, Redis, scripts, the lock module; no HTTP) per client; redlock 5 with one
 * Redis node at its default retry (200 ± 100 ms) and, for the hand-off only, a what-if at 10 ± 5 ms;
 * redis-semaphore's Mutex at its default retry (10 ms); for the uncontended section only, a reference
 * row (fenced-floor: the cheapest lock that returns a fencing token, not a working engine) that
 * bounds any fenced lock's throughput there. Every row: lease 10 s, acquire waits up to 10 s, and
 * every client has its own ioredis connection(s) with the service's connection options.
 *
 * Measures:
 *   1. uncontended acquire+release ops/s: a new lock name for every acquire, no two calls on one
 *      name; one client doing them one after the other (1 in flight) and the same client running
 *      50 such loops at once; interleaved rounds (library order rotated), median per row;
 *   2. hand-off latency (bench/lib/locks-handoff.ts): 11 clients, each in its own process, contend
 *      for one lock, so at every release 10 of them are waiting in acquire(). The holder holds
 *      ~1 ms, releases, and asks again only once another client has the lock. Latency = from the
 *      release call being issued to the next holder's acquire() resolving (CLOCK_MONOTONIC, shared
 *      by the processes); also with 1 waiter, where a polling client pays its retry interval alone;
 *   3. what the engine's semantics cost inside Redis (bench/lib/locks-script-cost.ts): Redis's own
 *      execution time for one acquire + release, the engine's scripts as shipped, with one piece
 *      taken out, and the peers' commands.
 *
 * Options: --quick            short smoke run (fewer rounds and hand-offs)
 *          --only a,b         sections: uncontended, handoff, scripts
 *          --dist DIR         run the engine from another build (e.g. a scratch work tree with a patch)
 * Only the standard run (no options) writes bench/results/locks.md and locks.json (goals and environment);
 * runs with options write both to $TMPDIR/redis-pay-bench/.
 */
import Redis from 'ioredis';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseSectionArgs } from './lib/args';
import { benchWorkDir, onCleanup } from './lib/cleanup';
import { assertBuilt, snapshotBuild } from './lib/full-stack';
import { allLibraries, LEASE_MS, LockClient, LockLibrary, packageVersions, WAIT_MS } from './lib/locks-clients';
import { HandoffRun, HandoffSettings, HandoffWorkers } from './lib/locks-handoff';
import { commandTime, CpuWindow, cpuBetween, otherShare, RedisCpu, redisCpuFromInfo, snapshot } from './lib/locks-measure';
import { setTimeout as sleep } from 'node:timers/promises';
import { Dist, dist, median, ms, runSchedule } from './lib/measure';
import { measureScriptCost, ScriptCostRow } from './lib/locks-script-cost';
import { startBenchRedis } from './lib/redis-server';
import { Align, environmentInfo, fmtInt, fmtNum, markdownTable, reportHead, RESULTS_DIR, writeResult } from './lib/report';
import { benchJson, writeJsonResult } from './lib/results-json';

const NAME = 'locks';
const GOALS = { handoffP50Ms: 2 };
/** Share of one core used by other jobs above which a run is flagged (and an uncontended run made again). */
const BUSY_MACHINE = 0.2;
/** Extra runs of an uncontended slot that other jobs disturbed, within the section's time budget. */
const UNCONTENDED_RETRIES = 2;

type Section = 'uncontended' | 'handoff' | 'scripts';
const SECTIONS: Section[] = ['uncontended', 'handoff', 'scripts'];

interface Options {
  quick: boolean;
  sections: Set<Section>;
  uncontended: { rounds: number; warmupMs: number; measureMs: number; concurrency: number; budgetS: number };
  handoff: Omit<HandoffSettings, 'warmup'> & {
    /** Clients waiting at every release (the holder is one more). */
    waiters: number;
    /** Measured hand-offs per row with `waiters` waiters, split over `rounds`. */
    count: number;
    /** The same with a single waiter (each run still stops at capS). */
    singleCount: number;
    rounds: number;
  };
  scripts: { rounds: number; batch: number };
  /** The build the engine runs from (its dist/ dir; lua/ beside it). */
  dist: string;
}

function parseArgs(args: string[]): Options {
  const { quick, sections, dist } = parseSectionArgs(args, SECTIONS);
  return {
    quick,
    dist,
    sections,
    uncontended: quick
      ? { rounds: 1, warmupMs: 200, measureMs: 500, concurrency: 50, budgetS: 10 }
      : { rounds: 4, warmupMs: 300, measureMs: 1500, concurrency: 50, budgetS: 75 },
    handoff: {
      waiters: 10,
      count: quick ? 100 : 1000,
      singleCount: quick ? 30 : 300,
      rounds: quick ? 1 : 2,
      holdMs: 1,
      firstHoldMs: 50,
      capS: quick ? 5 : 12,
    },
    scripts: quick ? { rounds: 2, batch: 300 } : { rounds: 10, batch: 2000 },
  };
}

// ---------------------------------------------------------------------------------------------
// 1. Uncontended acquire + release

type Mode = 'serial' | 'concurrent';

interface UncontendedRun {
  lib: string;
  mode: Mode;
  round: number;
  /** Runs made of this slot (see runSchedule: a run other jobs disturbed is made again). */
  attempts: number;
  ops: number;
  opsPerS: number;
  cpu: CpuWindow;
  /** Redis's execution time of the commands the client sent (scripts whole), µs per acquire + release (INFO commandstats). */
  commandUsPerOp: number;
}

/** `concurrency` loops on one client, each acquire on a name never used before; counts what completes in the measured window. */
async function uncontendedRun(
  client: LockClient,
  commands: readonly string[],
  concurrency: number,
  o: Options['uncontended'],
  namePrefix: string,
  admin: Redis,
  redisCpu: RedisCpu,
): Promise<Omit<UncontendedRun, 'lib' | 'mode' | 'round' | 'attempts'>> {
  let stop = false;
  let ops = 0;
  const loops = Promise.all(
    Array.from({ length: concurrency }, async (_, k) => {
      for (let i = 0; !stop; i++) {
        const release = await client.acquire(`${namePrefix}:${k}:${i}`);
        await release();
        ops++;
      }
    }),
  );
  // Stop every loop at the first error (it is rethrown below).
  loops.catch(() => (stop = true));
  await sleep(o.warmupMs);
  await admin.config('RESETSTAT');
  const a = await snapshot(redisCpu);
  const ops0 = ops;
  await sleep(o.measureMs);
  const b = await snapshot(redisCpu);
  const done = ops - ops0;
  const executed = await commandTime(admin, commands);
  stop = true;
  await loops;
  const cpu = cpuBetween(a, b);
  return { ops: done, opsPerS: done / cpu.wallS, cpu, commandUsPerOp: executed.usec / done };
}

async function measureUncontended(o: Options, libs: LockLibrary[], admin: Redis, redisCpu: RedisCpu): Promise<UncontendedRun[]> {
  const u = o.uncontended;
  const clients = new Map<string, LockClient>();
  for (const lib of libs) clients.set(lib.id, await lib.connect());
  // Round by round, each mode with every library; the order rotates every round so no library always runs first (or right after another).
  const schedule = Array.from({ length: u.rounds }, (_, round) =>
    (['serial', 'concurrent'] as const).flatMap((mode) => libs.map((_, i) => ({ round, mode, lib: libs[(i + round) % libs.length] }))),
  ).flat();
  const slotLabel = (x: (typeof schedule)[number]) => `${x.lib.id} ${x.mode === 'serial' ? '1 in flight' : `${u.concurrency} in flight`}`;
  try {
    const { kept } = await runSchedule(
      schedule,
      async (slot, n, attempt) => {
        if (attempt === 1 && n % (2 * libs.length) === 0) console.error(`[bench] uncontended: round ${slot.round + 1}/${u.rounds}`);
        await admin.flushall();
        const r = await uncontendedRun(
          clients.get(slot.lib.id)!,
          slot.lib.commands,
          slot.mode === 'serial' ? 1 : u.concurrency,
          u,
          `u${slot.round}${slot.mode[0]}`,
          admin,
          redisCpu,
        );
        const busy = otherShare(r.cpu) > BUSY_MACHINE ? ` ⚠ other jobs used ${fmtNum(100 * otherShare(r.cpu), 0)}% of a core` : '';
        console.error(`[bench]   ${slotLabel(slot)}: ${fmtInt(r.opsPerS)} ops/s${busy}`);
        return { lib: slot.lib.id, mode: slot.mode, round: slot.round, attempts: 1, ...r };
      },
      (r) => otherShare(r.cpu),
      { busyShare: BUSY_MACHINE, retries: UNCONTENDED_RETRIES, budgetS: u.budgetS },
      slotLabel,
    );
    return kept;
  } finally {
    for (const c of clients.values()) await c.close();
  }
}

// ---------------------------------------------------------------------------------------------
// 2. Hand-off

interface HandoffRow {
  lib: string;
  waiters: number;
  runs: HandoffRun[];
}

/** Hand-offs not counted at the start of a run: two per client, so every client's long first hold and its first wait are behind it. */
const warmupFor = (waiters: number) => 2 * (waiters + 1);

async function measureHandoff(o: Options, libs: LockLibrary[], build: string, redisUrl: string, admin: Redis, redisCpu: RedisCpu): Promise<HandoffRow[]> {
  const h = o.handoff;
  const t0 = performance.now();
  const workers = await HandoffWorkers.start(h.waiters + 1, build, redisUrl);
  const unregister = onCleanup(
    'locks hand-off workers',
    () => workers.close(),
    () => undefined,
  );
  console.error(`[bench] hand-off: ${h.waiters + 1} client processes ready in ${fmtNum((performance.now() - t0) / 1000, 1)} s`);
  const rows: HandoffRow[] = [];
  try {
    await admin.flushall();
    for (const [waiters, total] of [
      [h.waiters, h.count],
      [1, h.singleCount],
    ] as const) {
      const perRound = Math.ceil(total / h.rounds);
      for (let round = 0; round < h.rounds; round++) {
        console.error(`[bench] hand-off, ${waiters} waiter${waiters > 1 ? 's' : ''}: round ${round + 1}/${h.rounds}`);
        const order = libs.map((_, i) => libs[(i + round) % libs.length]);
        for (const lib of order) {
          const run = await workers.run(lib.id, waiters, `h${waiters}.${round}.${lib.id}`, perRound, { ...h, warmup: warmupFor(waiters) }, redisCpu);
          let row = rows.find((x) => x.lib === lib.id && x.waiters === waiters);
          if (!row) rows.push((row = { lib: lib.id, waiters, runs: [] }));
          row.runs.push(run);
          const d = dist(run.fromIssued);
          console.error(
            `[bench]   ${lib.id}: ${run.handoffs} hand-offs${run.capped ? ` (stopped at ${h.capS} s)` : ''}, p50 ${ms(d.p50)} ms, p99 ${ms(d.p99)} ms, ` +
              `${fmtNum(run.requests / run.windowHandoffs, 1)} Redis commands per hand-off` +
              (run.overlaps ? `, ${run.overlaps} OVERLAPS` : '') +
              (run.failures ? `, ${run.failures} failed acquires (${run.firstFailure})` : ''),
          );
        }
      }
    }
  } finally {
    await workers.close();
    unregister();
  }
  return rows;
}

// ---------------------------------------------------------------------------------------------
// Report

const LIB_ORDER = ['engine', 'redlock', 'redis-semaphore', 'fenced-floor', 'redlock-10ms'];
/** The uncontended reference row: it bounds the goal (information), it is not a peer to beat. */
const FLOOR = 'fenced-floor';

interface UncontendedSummary {
  lib: string;
  mode: Mode;
  median: number;
  min: number;
  max: number;
  clientUs: number;
  redisUs: number;
  commandUs: number;
  /** Runs other jobs disturbed even after retries (left out of the median when the row has others). */
  busyRuns: number;
  /** Runs the median is over, and runs made in all (retries included). */
  runs: number;
  attempts: number;
}

function summariseUncontended(runs: UncontendedRun[]): UncontendedSummary[] {
  const out: UncontendedSummary[] = [];
  for (const lib of LIB_ORDER) {
    for (const mode of ['serial', 'concurrent'] as const) {
      const all = runs.filter((r) => r.lib === lib && r.mode === mode);
      if (!all.length) continue;
      // Runs still disturbed after their retries count only when the row has no other.
      const quiet = all.filter((r) => otherShare(r.cpu) <= BUSY_MACHINE);
      const rs = quiet.length ? quiet : all;
      const per = (f: (r: UncontendedRun) => number | undefined) => median(rs.map(f)) ?? NaN;
      out.push({
        lib,
        mode,
        median: per((r) => r.opsPerS),
        min: Math.min(...rs.map((r) => r.opsPerS)),
        max: Math.max(...rs.map((r) => r.opsPerS)),
        clientUs: per((r) => (r.cpu.selfS * 1e6) / r.ops),
        redisUs: per((r) => (r.cpu.redisS === undefined ? undefined : (r.cpu.redisS * 1e6) / r.ops)),
        commandUs: per((r) => r.commandUsPerOp),
        busyRuns: all.length - quiet.length,
        runs: rs.length,
        attempts: all.reduce((n, r) => n + r.attempts, 0),
      });
    }
  }
  return out;
}

interface HandoffSummary {
  lib: string;
  waiters: number;
  issued: Dist;
  returned: Dist;
  wait: Dist;
  handoffs: number;
  requestsPer: number;
  redisUsPer: number;
  clientUsPer: number;
  /** Runs during which other jobs (not Redis, the benchmark or its client processes) used more than BUSY_MACHINE of a core. */
  busyRuns: number;
  overlaps: number;
  failures: number;
  capped: boolean;
}

function summariseHandoff(rows: HandoffRow[]): HandoffSummary[] {
  return [...rows]
    .sort((a, b) => b.waiters - a.waiters || LIB_ORDER.indexOf(a.lib) - LIB_ORDER.indexOf(b.lib))
    .map((row) => {
      const all = (f: (r: HandoffRun) => number[]) => row.runs.flatMap(f);
      const sum = (f: (r: HandoffRun) => number) => row.runs.reduce((s, r) => s + f(r), 0);
      const handoffs = sum((r) => r.handoffs);
      const windowHandoffs = sum((r) => r.windowHandoffs);
      return {
        lib: row.lib,
        waiters: row.waiters,
        issued: dist(all((r) => r.fromIssued)),
        returned: dist(all((r) => r.fromReturned)),
        wait: dist(all((r) => r.waits)),
        handoffs,
        requestsPer: sum((r) => r.requests) / windowHandoffs,
        redisUsPer: (sum((r) => r.cpu.redisS ?? NaN) * 1e6) / windowHandoffs,
        clientUsPer: (sum((r) => r.clientCpuS) * 1e6) / windowHandoffs,
        busyRuns: row.runs.filter((r) => otherShare({ ...r.cpu, otherS: (r.cpu.otherS ?? 0) - r.clientCpuS }) > BUSY_MACHINE).length,
        overlaps: sum((r) => r.overlaps),
        failures: sum((r) => r.failures),
        capped: row.runs.some((r) => r.capped),
      };
    });
}

interface Goal {
  goal: string;
  target: string;
  measured: string;
  met?: boolean;
  info?: boolean;
}

function goals(u: UncontendedSummary[], hs: HandoffSummary[], o: Options): Goal[] {
  const out: Goal[] = [];
  for (const mode of ['serial', 'concurrent'] as const) {
    const e = u.find((s) => s.lib === 'engine' && s.mode === mode);
    const peers = u.filter((s) => s.lib !== 'engine' && s.lib !== FLOOR && s.mode === mode);
    if (!e || !peers.length) continue;
    const inFlight = mode === 'serial' ? '1 client, 1 in flight' : `1 client, ${o.uncontended.concurrency} in flight`;
    // No goal: the peers give no fencing token, reentrancy or read/write modes, and the cheapest fenced
    // lock (the row below) at best ties them (docs/benchmarks.md, "The trade-off"). Measured for the record.
    out.push({
      goal: `uncontended acquire+release, ${inFlight}`,
      target: '— (information: the price of fencing, reentrancy and read/write)',
      measured: `${fmtInt(e.median)} ops/s; ${peers.map((p) => `${fmtNum(e.median / p.median, 2)}× ${p.lib} (${fmtInt(p.median)})`).join(', ')}`,
      info: true,
    });
    // What any lock that returns a fencing token can reach here: a ratio below 1 means no fenced lock, however lean, reaches that peer.
    const floor = u.find((s) => s.lib === FLOOR && s.mode === mode);
    if (floor) {
      out.push({
        goal: `bound: the cheapest fenced lock ÷ each peer (uncontended, ${inFlight})`,
        target: '— (information)',
        measured:
          `${FLOOR} ${fmtInt(floor.median)} ops/s: ${peers.map((p) => `${fmtNum(floor.median / p.median, 2)}× ${p.lib}`).join(', ')}; ` +
          `engine ÷ ${FLOOR} ${fmtNum(e.median / floor.median, 2)}`,
        info: true,
      });
    }
  }
  for (const waiters of [o.handoff.waiters, 1]) {
    const e = hs.find((s) => s.lib === 'engine' && s.waiters === waiters);
    if (!e) continue;
    const peers = hs.filter((s) => s.lib !== 'engine' && s.waiters === waiters);
    out.push({
      goal: `hand-off, ${waiters} waiter${waiters > 1 ? 's' : ' (a polling waiter pays its whole retry interval)'}: release issued → next holder`,
      target: `engine p50 ≤ ${GOALS.handoffP50Ms} ms`,
      measured: `p50 ${ms(e.issued.p50)} ms, p99 ${ms(e.issued.p99)} ms (p50: ${peers.map((p) => `${p.lib} ${ms(p.issued.p50)}`).join(', ')})`,
      met: e.issued.p50 <= GOALS.handoffP50Ms && e.overlaps === 0,
    });
  }
  return out;
}

function uncontendedTable(u: UncontendedSummary[], o: Options): string {
  const rows = LIB_ORDER.filter((lib) => u.some((s) => s.lib === lib)).map((lib) => {
    const s = (mode: Mode) => u.find((x) => x.lib === lib && x.mode === mode);
    const e = (mode: Mode) => u.find((x) => x.lib === 'engine' && x.mode === mode);
    const cell = (mode: Mode) => {
      const x = s(mode);
      return x ? `${fmtInt(x.median)} (${fmtInt(x.min)}–${fmtInt(x.max)})${x.busyRuns ? ' ⚠' : ''}` : 'n/a';
    };
    const ratio = (mode: Mode) => (lib === 'engine' ? '1.00' : s(mode) && e(mode) ? fmtNum(e(mode)!.median / s(mode)!.median, 2) : 'n/a');
    const cpu = (f: (x: UncontendedSummary) => number) => (['serial', 'concurrent'] as const).map((m) => (s(m) ? fmtNum(f(s(m)!), 1) : 'n/a')).join(' / ');
    return [
      label(lib),
      cell('serial'),
      ratio('serial'),
      cell('concurrent'),
      ratio('concurrent'),
      cpu((x) => x.clientUs),
      cpu((x) => x.redisUs),
      cpu((x) => x.commandUs),
    ];
  });
  const c = o.uncontended.concurrency;
  return markdownTable(
    [
      'library',
      '1 in flight: ops/s (min–max)',
      'engine ÷ row',
      `${c} in flight: ops/s (min–max)`,
      'engine ÷ row',
      `client CPU µs/op (1 / ${c})`,
      `Redis CPU µs/op (1 / ${c})`,
      `Redis command time µs/op (1 / ${c})`,
    ],
    rows,
    ['left', ...Array<Align>(7).fill('right')],
  );
}

function handoffTable(hs: HandoffSummary[], waiters: number): string {
  const rows = hs
    .filter((s) => s.waiters === waiters)
    .map((s) => [
      label(s.lib),
      `${fmtInt(s.handoffs)}${s.capped ? ' (time cap)' : ''}${s.busyRuns ? ' ⚠' : ''}`,
      ms(s.issued.p50),
      ms(s.issued.p90),
      ms(s.issued.p99),
      ms(s.issued.max),
      ms(s.returned.p50),
      `${ms(s.wait.p50)} / ${ms(s.wait.max)}`,
      fmtNum(s.requestsPer, 1),
      fmtInt(s.redisUsPer),
      fmtInt(s.clientUsPer),
      `${s.overlaps}${s.failures ? ` / ${s.failures} failed` : ''}`,
    ]);
  return markdownTable(
    [
      'library',
      'hand-offs',
      'p50 ms',
      'p90 ms',
      'p99 ms',
      'max ms',
      'p50 from release returned',
      'acquire wait p50 / max ms',
      'Redis commands per hand-off',
      'Redis CPU µs per hand-off',
      'clients CPU µs per hand-off',
      'overlaps',
    ],
    rows,
    ['left', ...Array<Align>(11).fill('right')],
  );
}

let labels = new Map<string, string>();
const label = (id: string) => labels.get(id) ?? id;

function report(
  args: string[],
  o: Options,
  env: ReturnType<typeof environmentInfo>,
  libs: LockLibrary[],
  commandTimeoutMs: number,
  u: UncontendedSummary[],
  hs: HandoffSummary[],
  sc: ScriptCostRow[],
  totalS: number,
): string {
  const md: string[] = [];
  const h = o.handoff;
  md.push(...reportHead(NAME, args, env, goals(u, hs, o)));
  if (u.length) {
    const x = o.uncontended;
    md.push('## Uncontended acquire + release', '');
    md.push(
      `One client per library (the engine: one LockService, i.e. one command connection), taking and releasing locks that nobody else wants: every acquire is on a ` +
        `lock name never used before (\`u<round><mode>:<loop>:<i>\`), awaited, then released and awaited. "1 in flight": one loop; "${x.concurrency} in flight": ` +
        `${x.concurrency} such loops on the same client. Each run: ${x.warmupMs} ms of warm-up, then ${fmtNum(x.measureMs / 1000, 1)} s counted; FLUSHALL before each run; ` +
        `${x.rounds} rounds, the library order rotated every round. A run during which other jobs used more than ${BUSY_MACHINE * 100}% of a core is made again ` +
        `(at most ${UNCONTENDED_RETRIES} times, within ${x.budgetS} s for the section) and the least disturbed attempt kept; one still disturbed is left out of its ` +
        "row's median when the row has undisturbed ones (⚠: the row had such runs). The cell is the median over the rounds (min–max of the same runs in brackets). " +
        'CPU: this process (library + ioredis; getrusage) and redis-server (INFO cpu), per acquire + release, medians. "Redis command time": what ' +
        'INFO commandstats says Redis spent executing the commands the client sent (a script with everything it calls; no network I/O), per acquire + release. ' +
        'The last row is a reference, not a lock the service could use (no reentrancy, no read/write, no watchdog, no metrics, no waiting): a string key and the ' +
        "engine's fencing counter in one script, the peers' release in another, so it prices only \"acquire returns a fencing token\", and any fenced lock's " +
        "uncontended throughput is at most about this row's.",
      '',
    );
    md.push(uncontendedTable(u, o), '');
    const retried = u.filter((s) => s.attempts > o.uncontended.rounds || s.busyRuns);
    if (retried.length) {
      md.push(
        `Runs made again or left out: ${retried.map((s) => `${s.lib}, ${s.mode === 'serial' ? '1' : o.uncontended.concurrency} in flight: ${s.attempts} runs made for ${o.uncontended.rounds} rounds, median over ${s.runs}`).join('; ')}.`,
        '',
      );
    }
  }
  if (hs.length) {
    md.push('## Hand-off', '');
    md.push(
      `${h.waiters + 1} clients contend for one lock, **each in its own process** (bench/lib/locks-handoff.ts; the engine: its own Nest application context ` +
        `there, so its own command and subscriber connections and its own subscription to the lock's release channel). A client that gets the lock holds it ` +
        `${h.holdMs} ms (a timer: ~1–1.3 ms), releases it, and asks for it again only once another client has taken it: at every release the ${h.waiters} others ` +
        `are waiting inside acquire(). A client's first hold of a run lasts ${h.firstHoldMs} ms (so everybody is waiting before the first release), and the ` +
        `first ${warmupFor(h.waiters)} hand-offs of a run (${warmupFor(1)} with 1 waiter) are not counted. **Latency = from the release call being issued** (just before \`release()\`) **to the next ` +
        `holder's \`acquire()\` resolving**, both read on CLOCK_MONOTONIC (process.hrtime), which the processes share; "from release returned" starts when the ` +
        `releasing process saw its release call resolve (the next holder can get there first: release reply and wake-up race). ${h.rounds} rounds per row, ` +
        `the library order rotated; a run stops taking samples after ${h.capS} s (the slow polling rows). Per hand-off, over the counted window: "Redis ` +
        'commands" = what all participating clients sent (EVALSHA, SET, SUBSCRIBE, ...; a script is one command), polling included; Redis CPU; the client ' +
        "processes' CPU (both CPU figures include the processes' idle background work over the hand-off's duration, which shows only in the slow " +
        'rows). "overlaps" = holds that began before the previous one was released (must be 0). ⚠: other jobs used more than ' +
        `${BUSY_MACHINE * 100}% of a core during a run.`,
      '',
    );
    md.push(`### ${h.waiters} waiters`, '', handoffTable(hs, h.waiters), '');
    md.push(
      '### 1 waiter',
      '',
      'The same with 2 clients: one holder, one waiter; a polling waiter is alone to notice the release, so it pays its retry interval.',
      '',
      handoffTable(hs, 1),
      '',
    );
  }
  if (sc.length) {
    const engineUs = sc.find((r) => r.id === 'engine')?.usPerPair ?? NaN;
    md.push('## What the semantics cost inside Redis', '');
    md.push(
      "One acquire + release of a lock nobody else wants (a new name each time) on one connection: the engine's scripts as shipped, the same with a piece " +
        "of the fast path taken out (these are not working locks; they price the piece), and the peers' commands. Redis's own execution time of what the " +
        'client sent (INFO commandstats: a script with everything it calls; no network, no client), per acquire + release. ' +
        `${o.scripts.rounds} rounds of ${fmtInt(o.scripts.batch)} pairs per variant, the order shuffled every round; median over the rounds. The uncontended ` +
        "rows above pay this once per operation on Redis's core, next to the network I/O every row pays alike.",
      '',
    );
    md.push(
      markdownTable(
        ['variant', 'Redis µs per acquire + release', '÷ engine', 'commands sent per acquire + release'],
        sc.map((r) => [r.label, fmtNum(r.usPerPair, 2), fmtNum(r.usPerPair / engineUs, 2), fmtNum(r.commandsPerPair, 1)]),
        ['left', 'right', 'right', 'right'],
      ),
      '',
    );
  }
  md.push('## Settings', '');
  md.push(`- Every row: lease ${LEASE_MS} ms, an acquire waits up to ${WAIT_MS} ms, exclusive lock.`);
  for (const lib of libs) md.push(`- **${lib.label}**: ${lib.settings}.`);
  md.push(
    "- Connections: every client has its own ioredis connection with the service's options from the same build (src/platform/redis/redis-options.ts: no auto-pipelining, " +
      "the engine's command connection with its writes coalesced per event-loop turn as in RedisService, " +
      `no offline queue, ${fmtInt(commandTimeoutMs)} ms command timeout); the engine's also has its pub/sub connection. redlock and redis-semaphore both work ` +
      "with the repo's ioredis 6 " +
      '(redis-semaphore declares ioredis ^4 || ^5 || ^6 as a peer; redlock 5 beta declares none and only calls evalsha/eval), so every row uses the same ioredis.',
    '',
  );
  md.push('## Notes', '');
  md.push(
    '- Uncontended: every client is in this process (one client per library). Hand-off: every client in its own process, because the waiters of a ' +
      "distributed lock are in different processes, and because in one process the polling peers' waiters fall into lockstep (failed polls answered in " +
      'the same event-loop turn set timers that expire together, so ten waiters poll like one). Nothing is pinned; on 2 vCPUs the clients and ' +
      'redis-server share both.',
  );
  md.push(
    '- The polling peers never learn that a lock was released: with 10 independent waiters the first of 10 staggered polls notices it (about ' +
      'interval ÷ 11 after the release on average), with 1 waiter about half an interval. The engine wakes its waiters on the release message, however ' +
      'many they are, and re-checks on its own only as a fallback; every woken waiter tries, and the lock script decides who gets it.',
  );
  md.push(`- The whole run took ${fmtNum(totalS / 60, 1)} minutes.`);
  return md.join('\n');
}

// ---------------------------------------------------------------------------------------------

export async function main(args: string[]): Promise<void> {
  const o = parseArgs(args);
  const started = performance.now();
  assertBuilt([o.dist]);
  const workDir = benchWorkDir('rp-bench-locks-');
  const dist = snapshotBuild(o.dist, join(workDir, 'build'));

  const redis = await startBenchRedis();
  const admin = new Redis(redis.url, { maxRetriesPerRequest: 1 });
  const redisCpu = redisCpuFromInfo(admin);
  const unregisterAdmin = onCleanup(
    'locks bench admin connection',
    () => admin.disconnect(),
    () => admin.disconnect(),
  );
  const { engine, redlock, semaphore, redlockFast, fencedFloor } = allLibraries(dist, redis.url);
  const libs = [engine, redlock, semaphore, redlockFast];
  labels = new Map([...libs, fencedFloor].map((l) => [l.id, l.label]));
  const env = environmentInfo(redis.version, {
    ...packageVersions(),
    'Engine under test': `LockService from a snapshot of dist/ and lua/, one Nest application context per client (${engine.viaLockModule ? "the build's lock module" : 'LockService + LockMetrics'} with config, metrics and Redis; no HTTP)`,
    Placement: 'uncontended: the client in this process; hand-off: one process per client; redis-server on loopback; nothing pinned',
    Mode: o.quick ? 'quick (short smoke run)' : 'full',
  });
  console.error(`[bench] redis ${redis.version} at ${redis.url}; sections: ${[...o.sections].join(', ')}${o.quick ? ' (quick)' : ''}`);

  let u: UncontendedRun[] = [];
  let hs: HandoffRow[] = [];
  let sc: ScriptCostRow[] = [];
  // redlock-10ms only differs from redlock in its retry, which an uncontended acquire never uses; fenced-floor (last) is a reference for this section only.
  if (o.sections.has('uncontended')) u = await measureUncontended(o, [engine, redlock, semaphore, fencedFloor], admin, redisCpu);
  if (o.sections.has('handoff')) hs = await measureHandoff(o, libs, dist, redis.url, admin, redisCpu);
  if (o.sections.has('scripts')) {
    console.error('[bench] scripts: Redis execution time per acquire + release');
    sc = await measureScriptCost(admin, dist, 'bench-locks', o.scripts.rounds, o.scripts.batch);
    for (const r of sc) console.error(`[bench]   ${r.id}: ${fmtNum(r.usPerPair, 2)} µs`);
  }
  admin.disconnect();
  unregisterAdmin();
  await redis.stop();

  const standard = args.length === 0;
  const outDir = standard ? RESULTS_DIR : join(tmpdir(), 'redis-pay-bench');
  const [uSum, hsSum] = [summariseUncontended(u), summariseHandoff(hs)];
  writeResult(
    NAME,
    report(args, o, env, [...libs, fencedFloor], Number(engine.redisOptions.commandTimeout), uSum, hsSum, sc, (performance.now() - started) / 1000),
    outDir,
  );
  // The machine-readable side: the goals table and the environment (the figures stay in the report).
  writeJsonResult(NAME, benchJson({ bench: NAME, args, dist: o.dist, environment: env, goals: goals(uSum, hsSum, o), ratios: {} }, {}), outDir);
}
