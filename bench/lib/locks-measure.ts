/** Statistics and CPU windows shared by bench/locks.ts and its hand-off workers (bench/lib/locks-handoff.ts). */
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { selfCpuSeconds } from './proc';

/** CLOCK_MONOTONIC in ms: one clock for every process on the machine, so times taken in two processes compare. */
export const monotonicMs = () => Number(process.hrtime.bigint()) / 1e6;

export interface Snapshot {
  t: number;
  self: number;
  redis?: number;
  machine?: number;
}

/** redis-server's CPU seconds so far (user + system); undefined when unknown. */
export type RedisCpu = () => Promise<number | undefined>;

/** Reads redis-server's CPU time from INFO cpu on `conn` (getrusage: µs resolution, where /proc has 10 ms ticks). */
export function redisCpuFromInfo(conn: { info(section: string): Promise<string> }): RedisCpu {
  return async () => {
    const info = await conn.info('cpu');
    const field = (name: string) => Number(new RegExp(`^${name}:([0-9.]+)`, 'm').exec(info)?.[1]);
    const s = field('used_cpu_sys') + field('used_cpu_user');
    return Number.isFinite(s) ? s : undefined;
  };
}

let ticks: number | undefined;

/**
 * CPU seconds the machine spent in processes (user + nice + system, all cores). Unlike proc.ts's
 * machineCpuSeconds it leaves out irq and softirq time, which no process is charged with: with
 * eleven client processes and Redis talking over loopback TCP, softirq alone would look like
 * another job using a good part of a core.
 */
function machineProcessCpuSeconds(): number | undefined {
  try {
    ticks ??= Number(execFileSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }).trim()) || 100;
    const [user, nice, system] = readFileSync('/proc/stat', 'utf8').split('\n')[0].trim().split(/\s+/).slice(1, 4).map(Number);
    return (user + nice + system) / ticks;
  } catch {
    return undefined;
  }
}

/** CPU used so far by this process, redis-server and the machine; `t` is taken last. */
export async function snapshot(redisCpu: RedisCpu): Promise<Snapshot> {
  const redis = await redisCpu();
  return { redis, self: selfCpuSeconds(), machine: machineProcessCpuSeconds(), t: performance.now() };
}

export interface CpuWindow {
  wallS: number;
  /** This process. */
  selfS: number;
  redisS?: number;
  /** Everything else on the machine (for the hand-off: the client processes are in here too). */
  otherS?: number;
}

export function cpuBetween(a: Snapshot, b: Snapshot): CpuWindow {
  const redisS = a.redis !== undefined && b.redis !== undefined ? b.redis - a.redis : undefined;
  const selfS = b.self - a.self;
  const machine = a.machine !== undefined && b.machine !== undefined ? b.machine - a.machine : undefined;
  return {
    wallS: (b.t - a.t) / 1000,
    selfS,
    redisS,
    otherS: machine !== undefined && redisS !== undefined ? Math.max(0, machine - selfS - redisS) : undefined,
  };
}

/** Share of one core that other jobs used during a window (0 when unknown). */
export const otherShare = (c: CpuWindow) => (c.otherS === undefined || c.wallS <= 0 ? 0 : c.otherS / c.wallS);

/** Microseconds Redis spent executing `commands` (INFO commandstats, since the last CONFIG RESETSTAT), and how many calls. */
export async function commandTime(conn: { info(section: string): Promise<string> }, commands: readonly string[]): Promise<{ calls: number; usec: number }> {
  const info = await conn.info('commandstats');
  let calls = 0;
  let usec = 0;
  for (const c of commands) {
    const m = new RegExp(`^cmdstat_${c}:calls=(\\d+),usec=(\\d+)`, 'm').exec(info);
    if (m) {
      calls += Number(m[1]);
      usec += Number(m[2]);
    }
  }
  return { calls, usec };
}
