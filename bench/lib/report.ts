import { mkdirSync, writeFileSync } from 'node:fs';
import { cpus, loadavg, release, totalmem } from 'node:os';
import { join, resolve } from 'node:path';

export const BENCH_DIR = resolve(__dirname, '..');
export const RESULTS_DIR = join(BENCH_DIR, 'results');

export type Align = 'left' | 'right';

/** A GitHub-flavoured markdown table. Cells are escaped for `|`. */
export function markdownTable(headers: string[], rows: (string | number)[][], align: Align[] = []): string {
  const esc = (v: string | number) => String(v).replace(/\|/g, '\\|');
  const sep = headers.map((_, i) => (align[i] === 'right' ? '---:' : '---'));
  return [headers, sep, ...rows]
    .map((r, i) => `| ${(i === 1 ? r.map(String) : r.map(esc)).join(' | ')} |`)
    .join('\n');
}

/** `12345.6` -> `12,346`; for req/s and counts. */
export const fmtInt = (n: number) => (Number.isFinite(n) ? Math.round(n).toLocaleString('en-US') : 'n/a');
/** Fixed decimals, or n/a. */
export const fmtNum = (n: number | undefined, digits = 2) => (n !== undefined && Number.isFinite(n) ? n.toFixed(digits) : 'n/a');

export interface EnvironmentInfo {
  date: string;
  node: string;
  cpuCount: number;
  cpuModel: string;
  os: string;
  memoryGb: string;
  loadAvg: string;
  redisVersion: string;
  [extra: string]: string | number;
}

export function environmentInfo(redisVersion: string, extra: Record<string, string | number> = {}): EnvironmentInfo {
  const c = cpus();
  return {
    date: new Date().toISOString(),
    node: process.version,
    cpuCount: c.length,
    cpuModel: c[0]?.model?.trim() ?? 'unknown',
    os: `${process.platform} ${release()}`,
    memoryGb: (totalmem() / 2 ** 30).toFixed(1),
    loadAvg: loadavg().map((l) => l.toFixed(2)).join(' '),
    redisVersion,
    ...extra,
  };
}

export function environmentMarkdown(env: EnvironmentInfo): string {
  const label: Record<string, string> = {
    date: 'Date',
    node: 'Node',
    cpuCount: 'CPUs',
    cpuModel: 'CPU model',
    os: 'OS',
    memoryGb: 'Memory (GiB)',
    loadAvg: 'Load average at start (1/5/15 min)',
    redisVersion: 'Redis',
  };
  return Object.entries(env)
    .map(([k, v]) => `- ${label[k] ?? k}: ${v}`)
    .join('\n');
}

/** Writes `<dir>/<name>.md` (default dir: bench/results), prints it, and returns its path. */
export function writeResult(name: string, markdown: string, dir = RESULTS_DIR): string {
  mkdirSync(dir, { recursive: true });
  const path = join(dir, `${name}.md`);
  writeFileSync(path, markdown.endsWith('\n') ? markdown : `${markdown}\n`);
  console.log(`\n${markdown}\n`);
  console.log(`[bench] written ${path}`);
  return path;
}
