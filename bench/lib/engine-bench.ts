/**
 * What the in-process engine benchmarks (delay-queue, locks) share: src/ loaded with decorator
 * metadata, and CPU windows.
 *
 * tsx (esbuild) emits no decorator metadata, which Nest's injection needs. Importing this file first
 * makes every src/ file load through TypeScript's own transpiler (emitDecoratorMetadata, as
 * tsconfig.json and jest have it), so a benchmark imports the engine it measures through the
 * engine's public interface (`../src/engines/<name>`), as any module of the service does.
 */
import { createHash } from 'node:crypto';
import { mkdirSync, readdirSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type * as TS from 'typescript';
import { parseCommandStats } from './command-stats';
import { machineCpuSeconds, selfCpuSeconds } from './proc';

const SRC = join(__dirname, '..', '..', 'src') + '/';
/**
 * Transpiled files, named by path hash and content hash: the hand-off's eleven worker processes load the same files the
 * benchmark did. A file's older versions are removed when a new one is written, so the cache holds one per source file.
 */
const CACHE = join(tmpdir(), 'redis-pay-bench-src');
const sha = (s: string) => createHash('sha256').update(s).digest('hex').slice(0, 24);
type Loader = (m: NodeJS.Module & { _compile(code: string, file: string): void }, file: string) => void;
const loaders = require.extensions as unknown as Record<string, Loader>;
const tsxLoader = loaders['.ts'];
function transpile(file: string): string {
  const source = readFileSync(file, 'utf8');
  const [of, name] = [`${sha(file)}-`, `${sha(file)}-${sha(source)}.js`];
  const cached = join(CACHE, name);
  try {
    return readFileSync(cached, 'utf8');
  } catch {
    const ts = require('typescript') as typeof TS;
    const options = {
      module: ts.ModuleKind.CommonJS,
      target: ts.ScriptTarget.ES2022,
      experimentalDecorators: true,
      emitDecoratorMetadata: true,
      esModuleInterop: true,
    };
    const out = ts.transpileModule(source, { fileName: file, compilerOptions: options }).outputText;
    mkdirSync(CACHE, { recursive: true });
    for (const old of readdirSync(CACHE)) if (old.startsWith(of) && !old.startsWith(name)) rmSync(join(CACHE, old), { force: true });
    // Written whole, then renamed: a worker process reading it meanwhile sees no file or the whole file, never half.
    writeFileSync(`${cached}.${process.pid}`, out);
    renameSync(`${cached}.${process.pid}`, cached);
    return out;
  }
}
loaders['.ts'] = (m, file) => (file.startsWith(SRC) ? m._compile(transpile(file), file) : tsxLoader(m, file));

/** CLOCK_MONOTONIC in ms: one clock for every process on the machine, so times taken in two processes compare. */
export const monotonicMs = () => Number(process.hrtime.bigint()) / 1e6;

/** redis-server's CPU seconds so far, from INFO cpu (getrusage: µs resolution, where /proc has 10 ms ticks). */
export type RedisCpu = () => Promise<number>;
export const redisCpuFromInfo =
  (conn: { info(section: string): Promise<string> }): RedisCpu =>
  async () => {
    const info = await conn.info('cpu');
    return ['used_cpu_sys', 'used_cpu_user'].reduce((t, f) => t + Number(new RegExp(`^${f}:([0-9.]+)`, 'm').exec(info)?.[1]), 0);
  };

/** CPU seconds over a window: this process, redis-server, and everything else on the machine (a benchmark's child processes included). */
export type CpuWindow = { wallS: number; selfS: number; redisS: number; otherS: number };

/** Starts a CPU window; the returned function ends it. */
export async function cpuWindow(redisCpu: RedisCpu): Promise<() => Promise<CpuWindow>> {
  const snap = async () => ({ redis: await redisCpu(), self: selfCpuSeconds(), machine: machineCpuSeconds()?.busy ?? NaN, t: performance.now() });
  const a = await snap();
  return async () => {
    const b = await snap();
    const [selfS, redisS] = [b.self - a.self, b.redis - a.redis];
    return { wallS: (b.t - a.t) / 1000, selfS, redisS, otherS: Math.max(0, b.machine - a.machine - selfS - redisS) };
  };
}

/** Share of one core above which other jobs are said to have disturbed a run (⚠). */
export const BUSY_MACHINE = 0.2;
/** Share of one core that other jobs used during a window (0 when unknown). */
export const otherShare = (c: CpuWindow) => (Number.isFinite(c.otherS) && c.wallS > 0 ? c.otherS / c.wallS : 0);
export const busyMark = (c: CpuWindow) => (otherShare(c) > BUSY_MACHINE ? ' ⚠' : '');

/** Microseconds Redis spent executing `commands` since the last CONFIG RESETSTAT (INFO commandstats). */
export const commandUs = async (conn: { info(section: string): Promise<string> }, commands: readonly string[]) => {
  const stats = parseCommandStats(await conn.info('commandstats'));
  return commands.reduce((t, c) => t + (stats.get(c)?.usec ?? 0), 0);
};

/** `f(i)` for i in [from, to), `concurrency` at a time, until `deadline` (performance.now() ms). Returns how many were done: a prefix. */
export async function inFlight(from: number, to: number, concurrency: number, f: (i: number) => Promise<unknown>, deadline = Infinity): Promise<number> {
  let next = from;
  const loop = async () => {
    while (next < to && performance.now() < deadline) await f(next++);
  };
  await Promise.all(Array.from({ length: concurrency }, loop));
  return next - from;
}
