import { type LoadOptions, type LoadSummary, runLoad } from './load';
import { cpuSeconds, machineCpuSeconds, selfCpuSeconds } from './proc';
import { fmtInt, fmtNum } from './report';

/** One measured load run and the CPU every party used during it (seconds; 1 s = one core for a second). */
export interface Measured {
  load: LoadSummary;
  wallS: number;
  serverCpuS?: number;
  redisCpuS?: number;
  /** CPU of this process (autocannon) over the measured run. */
  loadCpuS: number;
  /** CPU used on the machine by anything else (other jobs, unattributed kernel work). */
  otherCpuS?: number;
}

/** Runs autocannon (`runLoad`) and samples, from its start to its end, the CPU of the server, of redis-server, of this process and of the machine. */
export async function measuredLoad(opts: LoadOptions, serverPid: number, redisPid: number): Promise<Measured> {
  const sample = () => ({
    wall: performance.now(),
    server: cpuSeconds(serverPid),
    redis: cpuSeconds(redisPid),
    self: selfCpuSeconds(),
    machine: machineCpuSeconds(),
  });
  let s0 = sample();
  const load = await runLoad({ ...opts, onStart: () => (s0 = sample()) });
  const s1 = sample();
  const diff = (a: number | undefined, b: number | undefined) => (a !== undefined && b !== undefined ? b - a : undefined);
  const [serverCpuS, redisCpuS] = [diff(s0.server, s1.server), diff(s0.redis, s1.redis)];
  const m: Measured = { load, wallS: (s1.wall - s0.wall) / 1000, serverCpuS, redisCpuS, loadCpuS: s1.self - s0.self };
  const busy = diff(s0.machine?.busy, s1.machine?.busy);
  if (busy !== undefined && m.serverCpuS !== undefined && m.redisCpuS !== undefined) m.otherCpuS = Math.max(0, busy - m.serverCpuS - m.redisCpuS - m.loadCpuS);
  return m;
}

/** The median of some numbers (the mean of the middle two for an even count); undefined when there are none. */
export function median(values: (number | undefined)[]): number | undefined {
  const v = values.filter((x): x is number => x !== undefined && Number.isFinite(x)).sort((a, b) => a - b);
  return v.length === 0 ? undefined : v.length % 2 ? v[(v.length - 1) / 2] : (v[v.length / 2 - 1] + v[v.length / 2]) / 2;
}

/** The element with the median `key` (the lower middle one for an even count). */
export const medianBy = <T>(items: T[], key: (t: T) => number): T => [...items].sort((a, b) => key(a) - key(b))[Math.floor((items.length - 1) / 2)];

/**
 * Runs `schedule` in order. A slot during which other jobs took a real share of the CPU (`disturbance(result)` >
 * busyShare) runs again, up to `retries` times, while the retry and the slots still to run fit in `budgetS`; the least
 * disturbed attempt is kept. Returns the kept result of each slot, every attempt, and how many retries the budget skipped.
 */
export async function runSchedule<S, R extends { attempts: number }>(
  schedule: S[],
  run: (slot: S, index: number, attempt: number) => Promise<R>,
  disturbance: (r: R) => number,
  o: { busyShare: number; retries: number; budgetS: number },
  label: (slot: S) => string,
): Promise<{ kept: R[]; everyAttempt: R[]; retriesSkipped: number; wallS: number }> {
  const [kept, everyAttempt, start] = [[] as R[], [] as R[], performance.now()];
  let retriesSkipped = 0;
  for (const [n, slot] of schedule.entries()) {
    const t0 = performance.now();
    let best = await run(slot, n, 1);
    const needS = ((performance.now() - t0) / 1000) * (schedule.length - n);
    everyAttempt.push(best);
    for (let retry = 1; retry <= o.retries && disturbance(best) > o.busyShare; retry++) {
      const why = `${label(slot)}: other jobs used ${fmtNum(100 * disturbance(best), 0)}% of a core`;
      if ((performance.now() - start) / 1000 + needS > o.budgetS) {
        console.error(`[bench] ${why}; no retry (it would not fit in the budget of ${o.budgetS} s)`);
        retriesSkipped++;
        break;
      }
      console.error(`[bench] ${why}; running it again (${retry}/${o.retries})`);
      const again = await run(slot, n, retry + 1);
      everyAttempt.push(again);
      again.attempts = best.attempts + 1;
      best = disturbance(again) < disturbance(best) ? again : { ...best, attempts: again.attempts };
    }
    kept.push(best);
  }
  return { kept, everyAttempt, retriesSkipped, wallS: (performance.now() - start) / 1000 };
}

/** Nearest-rank percentiles of a sample. */
export interface Dist {
  n: number;
  p50: number;
  p90: number;
  p99: number;
  max: number;
}

export function dist(values: number[]): Dist {
  const s = [...values].sort((a, b) => a - b);
  const q = (p: number) => (s.length ? s[Math.min(s.length - 1, Math.max(0, Math.ceil(p * s.length) - 1))] : NaN);
  return { n: s.length, p50: q(0.5), p90: q(0.9), p99: q(0.99), max: s.length ? s[s.length - 1] : NaN };
}

/** Milliseconds: three decimals below 1, two below 10, one below 100. */
export const ms = (v: number) => (!Number.isFinite(v) ? 'n/a' : v < 1 ? v.toFixed(3) : v < 10 ? v.toFixed(2) : v < 100 ? v.toFixed(1) : fmtInt(v));
