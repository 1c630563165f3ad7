import { join, resolve } from 'node:path';
import { benchWorkDir } from './cleanup';
import { assertBuilt, ROOT, snapshotBuild } from './full-stack';
import { cpuSplit, pinProcess } from './proc';

/**
 * What the benchmarks that compare servers row by row (http-floor, messages) share: their common
 * options, the choice of rows (targets), the snapshot of the builds, CPU pinning and the rounds.
 */

/** Options every row benchmark takes. */
export interface RowOptions {
  connections: number;
  /** Measured seconds per run (profiled runs may take longer). */
  duration: number;
  warmup: number;
  repeat: number;
  retries: number;
  budgetS: number;
  pin: boolean;
  /** CPUs of the server under test (set by prepareRows when pinning). */
  serverCpus?: string;
  profile: boolean;
  only?: string[];
  keepProfile?: string;
  dist: string;
  candidates: string[];
}

export const ROW_OPTIONS_USAGE =
  '--connections N --duration S --warmup S --repeat N --retries N --budget S --no-profile --no-pin --only ids --keep-profile dir --dist dir --candidate dir';

/**
 * Parses the common options over `defaults`. `extra(arg, value, num)` handles a benchmark's own
 * options and returns true when it took `arg`; `value()` and `num()` consume the next argument.
 */
export function parseRowOptions(
  args: string[],
  defaults: Pick<RowOptions, 'duration' | 'warmup' | 'budgetS'> & Partial<Pick<RowOptions, 'repeat' | 'connections'>>,
  extra: (arg: string, value: () => string, num: () => number) => boolean = () => false,
  extraUsage = '',
): RowOptions {
  const o: RowOptions = { connections: 100, repeat: 3, retries: 2, pin: true, profile: true, dist: join(ROOT, 'dist'), candidates: [], ...defaults };
  for (let i = 0; i < args.length; i++) {
    const a = args[i];
    const value = () => args[++i] ?? '';
    const num = () => {
      const v = Number(value());
      if (!Number.isFinite(v) || v <= 0) throw new Error(`${a} needs a positive number`);
      return v;
    };
    if (a === '--connections') o.connections = Math.round(num());
    else if (a === '--duration') o.duration = num();
    else if (a === '--warmup') o.warmup = num();
    else if (a === '--repeat') o.repeat = Math.max(1, Math.round(num()));
    else if (a === '--retries') o.retries = Math.max(0, Math.round(Number(value()) || 0));
    else if (a === '--budget') o.budgetS = num();
    else if (a === '--no-profile') o.profile = false;
    else if (a === '--no-pin') o.pin = false;
    else if (a === '--only') o.only = value().split(',').filter(Boolean);
    else if (a === '--keep-profile') o.keepProfile = resolve(args[++i] ?? '.');
    else if (a === '--dist') o.dist = resolve(args[++i] ?? 'dist');
    else if (a === '--candidate') o.candidates.push(resolve(value()));
    else if (!extra(a, value, num)) throw new Error(`unknown option ${a} (known: ${ROW_OPTIONS_USAGE}${extraUsage ? ` ${extraUsage}` : ''})`);
  }
  return o;
}

/** A row: `main` rows answer the question, `variant` rows switch one thing, `profile` rows run once at the end, `on-demand` rows only with --only. */
export interface RowTarget {
  id: string;
  group: 'main' | 'variant' | 'profile' | 'on-demand';
}

/** The rows to run: `--only` ids, else those `include` keeps (never on-demand ones, nor profiled ones with --no-profile); then one row per --candidate. */
export function selectTargets<T extends RowTarget>(all: T[], o: RowOptions, include: (t: T) => boolean, candidate: (dist: string, n: number) => T): T[] {
  let targets = all.filter((t) => t.group !== 'on-demand' && (o.profile || t.group !== 'profile') && include(t));
  if (o.only) {
    const unknown = o.only.filter((id) => !all.some((t) => t.id === id));
    if (unknown.length) throw new Error(`--only: unknown target(s) ${unknown.join(', ')}; known: ${all.map((t) => t.id).join(', ')}`);
    targets = all.filter((t) => o.only!.includes(t.id));
  }
  o.candidates.forEach((dist, i) => targets.push(candidate(dist, i + 1)));
  return targets;
}

/** The row of one --candidate build: the full stack built from `dist`. */
export const candidateRow = (dist: string, n: number) => ({
  id: `candidate-${n}`,
  kind: 'full' as const,
  group: 'variant' as const,
  dist,
  label: `candidate ${n}: full built from ${dist}`,
});

/**
 * A work dir (removed at the end), a snapshot of every build (see snapshotBuild), keyed by the dist
 * dir given; and, unless --no-pin, the server's CPU (o.serverCpus): the server alone on the last
 * CPU, this process (autocannon) and what it starts later (redis-server) on the others.
 */
export function prepareRows(o: RowOptions): { workDir: string; builds: Map<string, string>; split?: { server: string; rest: string } } {
  assertBuilt([o.dist, ...o.candidates]);
  const workDir = benchWorkDir('rp-bench-');
  const builds = new Map<string, string>();
  for (const [i, d] of [o.dist, ...o.candidates].entries()) builds.set(d, snapshotBuild(d, join(workDir, `build-${i}`)));

  const split = o.pin ? cpuSplit() : undefined;
  if (o.pin && !split) console.error('[bench] cannot pin CPUs (fewer than 2 CPUs or no taskset); the scheduler places everything');
  if (split) {
    pinProcess(split.rest);
    o.serverCpus = split.server;
  }
  return { workDir, builds, split };
}

/** Environment lines about CPU placement and the build, for environmentInfo. */
export function placementInfo(o: RowOptions, split: { server: string; rest: string } | undefined): Record<string, string> {
  return {
    'CPU placement': split
      ? `server under test alone on CPU ${split.server}; autocannon (this process) and redis-server on CPU ${split.rest} (taskset)`
      : 'not pinned: server, autocannon and redis-server share every CPU',
    ...(o.dist !== join(ROOT, 'dist') ? { 'full stack built from': o.dist } : {}),
  };
}

/**
 * `repeat` rounds of the rows, interleaved so a drift or a burst of noise hits them alike, then the
 * profiled rows once; `announce(n, attempt)` logs the start of each round (not again on a retry).
 */
export function roundSchedule<T extends RowTarget>(targets: T[], repeat: number): { schedule: T[]; announce(n: number, attempt: number): void } {
  const perRound = targets.filter((t) => t.group !== 'profile');
  return {
    schedule: [...Array.from({ length: repeat }, () => perRound).flat(), ...targets.filter((t) => t.group === 'profile')],
    announce(n, attempt) {
      if (attempt === 1 && repeat > 1 && n % perRound.length === 0 && n < perRound.length * repeat)
        console.error(`[bench] round ${n / perRound.length + 1}/${repeat}`);
    },
  };
}

/** ` (attempts: 1+3+1)` when some run of a row was repeated, else ''. */
export const attemptsNote = (runs: { attempts: number }[]) => (runs.some((x) => x.attempts > 1) ? ` (attempts: ${runs.map((x) => x.attempts).join('+')})` : '');
