import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { EnvironmentInfo, fmtNum, GoalLine, RESULTS_DIR } from './report';

/**
 * The machine-readable side of a benchmark report: `<name>.json` beside `<name>.md`, with the
 * figures the report's tables show, the goals, and the ratios a later run compares itself with
 * (`--compare`: see compareWithBaseline).
 */

/** Bumped when a field changes meaning; a --compare refuses a baseline of another schema. */
export const RESULTS_SCHEMA = 1;

export interface BenchJson {
  schema: number;
  bench: string;
  /** ISO time the report was written. */
  generated: string;
  /** The command line after `npm run bench --`. */
  args: string[];
  build: BuildInfo;
  environment: EnvironmentInfo;
  goals: GoalLine[];
  /**
   * The figures --compare checks, by key (e.g. `fullOverFloorRps`): higher is better. Each one is a
   * ratio of two rows of the same run, so it carries over from one machine, or one load level, to another
   * far better than req/s does.
   */
  ratios: Record<string, number | null>;
  /** Share of runs during which other jobs used more than the bench's threshold of a core (where the bench counts them). */
  disturbedRuns?: { disturbed: number; of: number };
  [more: string]: unknown;
}

export interface BuildInfo {
  /** The dist dir the full stack ran from. */
  dist: string;
  /** `git rev-parse HEAD` of the tree the dist dir belongs to, when it is a git work tree. */
  commit?: string;
  /** True when that tree had uncommitted changes under src/ or lua/ (the build may not be the commit). */
  dirty?: boolean;
}

/** What is known of the build in `dist` (a dist/ dir inside a git work tree: its commit and whether src/ or lua/ differ from it). */
export function buildInfo(dist: string): BuildInfo {
  const tree = resolve(dist, '..');
  const git = (...a: string[]) => execFileSync('git', ['-C', tree, ...a], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] }).trim();
  try {
    const commit = git('rev-parse', 'HEAD');
    const dirty = git('status', '--porcelain', '--', 'src', 'lua') !== '';
    return { dist, commit, dirty };
  } catch {
    return { dist };
  }
}

/** A results document: what every bench's JSON has (schema, when, the build), then its own figures (`more`). */
export function benchJson(
  head: Pick<BenchJson, 'bench' | 'args' | 'environment' | 'goals' | 'ratios' | 'disturbedRuns'> & { dist: string },
  more: Record<string, unknown>,
): BenchJson {
  const { dist, ...rest } = head;
  return { schema: RESULTS_SCHEMA, generated: new Date().toISOString(), build: buildInfo(dist), ...rest, ...more };
}

/** Writes `<dir>/<name>.json` (default dir: bench/results) and returns its path. */
export function writeJsonResult(name: string, data: BenchJson, dir = RESULTS_DIR): string {
  mkdirSync(dir, { recursive: true });
  const path = join(dir, `${name}.json`);
  writeFileSync(path, `${JSON.stringify(data, (_k, v: unknown) => (typeof v === 'number' && !Number.isFinite(v) ? null : v), 2)}\n`);
  console.log(`[bench] written ${path}`);
  return path;
}

/** A number for JSON: rounded to `digits` decimals, null when unknown. */
export const jsonNum = (n: number | undefined, digits = 3): number | null => (n !== undefined && Number.isFinite(n) ? Number(n.toFixed(digits)) : null);

/** A --compare that found a regression (or could not compare): run.ts prints the message alone and exits 1. */
export class BenchCheckFailed extends Error {
  override readonly name = 'BenchCheckFailed';
}

export interface RatioCheck {
  /** Key in `ratios` of the baseline and of this run. */
  key: string;
  /** What the ratio is, for the messages (e.g. `full / floor req/s`). */
  label: string;
  measured: number | undefined;
}

export interface Comparison {
  baselinePath: string;
  baseline: BenchJson;
  /** Allowed drop below the baseline, as a share of it (0.1 = 10%). */
  tolerance: number;
  lines: { check: RatioCheck; committed: number | null; floor: number | null; ok: boolean }[];
  ok: boolean;
}

/** The committed `<name>.json` (or `file`), checked to be a results file of this bench and schema. */
export function readBaseline(name: string, file = join(RESULTS_DIR, `${name}.json`)): { path: string; data: BenchJson } {
  if (!existsSync(file)) {
    throw new BenchCheckFailed(
      `--compare: no baseline at ${file}. Run the standard \`npm run bench -- ${name}\` on a quiet machine and commit ${name}.md and ${name}.json first.`,
    );
  }
  let data: BenchJson;
  try {
    data = JSON.parse(readFileSync(file, 'utf8')) as BenchJson;
  } catch (err) {
    throw new BenchCheckFailed(`--compare: ${file} is not valid JSON: ${(err as Error).message}`);
  }
  if (data.bench !== name || data.schema !== RESULTS_SCHEMA || typeof data.ratios !== 'object' || data.ratios === null) {
    throw new BenchCheckFailed(
      `--compare: ${file} is not a ${name} results file of schema ${RESULTS_SCHEMA} (bench ${String(data.bench)}, schema ${String(data.schema)})`,
    );
  }
  return { path: file, data };
}

/**
 * Each ratio of this run against the baseline's: ok when it is at least (1 − tolerance) × the
 * committed one. A ratio missing on either side fails (the run could not show it did not regress).
 */
export function compareWithBaseline(baseline: { path: string; data: BenchJson }, checks: RatioCheck[], tolerance: number): Comparison {
  const lines = checks.map((check) => {
    const committed = baseline.data.ratios[check.key] ?? null;
    const floor = committed === null ? null : committed * (1 - tolerance);
    const ok = floor !== null && check.measured !== undefined && Number.isFinite(check.measured) && check.measured >= floor;
    return { check, committed, floor, ok };
  });
  return { baselinePath: baseline.path, baseline: baseline.data, tolerance, lines, ok: lines.every((l) => l.ok) };
}

/** One line per check, for the console and the report. */
export function comparisonLines(c: Comparison): string[] {
  const b = c.baseline;
  const from = `${b.build.commit ? `at ${b.build.commit.slice(0, 7)}` : 'build unknown'}${b.build.dirty ? ' + uncommitted changes' : ''}, ${b.generated}`;
  return c.lines.map(
    (l) =>
      `${l.ok ? 'ok  ' : 'FAIL'} ${l.check.label}: ${fmtNum(l.check.measured, 3)} against ${fmtNum(l.committed ?? undefined, 3)} committed ` +
      `(${from}); the least allowed is ${fmtNum(l.floor ?? undefined, 3)} (−${fmtNum(100 * c.tolerance, 0)}%)` +
      (l.committed !== null && l.check.measured !== undefined ? `; change ${fmtNum((100 * (l.check.measured - l.committed)) / l.committed, 1)}%` : ''),
  );
}

/** Throws BenchCheckFailed with every line when a check failed; prints them either way. */
export function enforceComparison(name: string, c: Comparison, disturbed: { disturbed: number; of: number }): void {
  const lines = comparisonLines(c);
  for (const l of lines) console.log(`[bench] compare: ${l}`);
  if (c.ok) {
    console.log(`[bench] compare: ${name} is within ${fmtNum(100 * c.tolerance, 0)}% of the committed result (${c.baselinePath})`);
    return;
  }
  const noisy =
    disturbed.disturbed > 0
      ? `\nOther jobs used a real share of the CPU during ${disturbed.disturbed} of ${disturbed.of} runs: run it again on a quiet machine before blaming the code.`
      : '';
  throw new BenchCheckFailed(
    `${name}: regression against the committed result (${c.baselinePath}):\n  ${lines.filter((l) => l.startsWith('FAIL')).join('\n  ')}${noisy}\n` +
      `To find the change: build a candidate in a scratch work tree and run \`npm run bench -- ${name} --candidate <tree>/dist\`; ` +
      'if the drop is intended, run the standard bench on a quiet machine and commit the new results.',
  );
}

/** The goals-table lines of a --compare: one per ratio checked (none without a comparison). */
export function comparisonGoalLines(c: Comparison | undefined): GoalLine[] {
  if (!c) return [];
  const commit = c.baseline.build.commit ? ` (${c.baseline.build.commit.slice(0, 7)})` : '';
  return c.lines.map((l) => ({
    goal: `No regression (--compare): ${l.check.label} against the committed result${commit}`,
    target:
      l.committed === null ? 'no committed figure' : `≥ ${fmtNum(l.floor ?? undefined, 3)} (${fmtNum(l.committed, 3)} − ${fmtNum(100 * c.tolerance, 0)}%)`,
    measured: fmtNum(l.check.measured, 3),
    met: l.ok,
  }));
}
