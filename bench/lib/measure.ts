import { LoadOptions, LoadSummary, runLoad } from './load';
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
  /** The run's window in V8 profile time (CLOCK_MONOTONIC µs), for summariseProfile. */
  window: { fromUs: number; toUs: number };
}

const monotonicUs = () => Number(process.hrtime.bigint() / 1000n);

/**
 * Runs autocannon (`runLoad`) and samples, from the moment it starts to the moment it ends, the CPU
 * time of the server process, of redis-server, of this process and of the whole machine.
 */
export async function measuredLoad(opts: LoadOptions, serverPid: number, redisPid: number): Promise<Measured> {
  let fromUs = 0;
  let cpu0: number | undefined;
  let rcpu0: number | undefined;
  let wall0 = 0;
  let self0 = 0;
  let m0: ReturnType<typeof machineCpuSeconds>;
  const load = await runLoad({
    ...opts,
    onStart: () => {
      opts.onStart?.();
      fromUs = monotonicUs();
      wall0 = performance.now();
      cpu0 = cpuSeconds(serverPid);
      rcpu0 = cpuSeconds(redisPid);
      self0 = selfCpuSeconds();
      m0 = machineCpuSeconds();
    },
  });
  const toUs = monotonicUs();
  const wallS = (performance.now() - wall0) / 1000;
  const cpu1 = cpuSeconds(serverPid);
  const rcpu1 = cpuSeconds(redisPid);
  const self1 = selfCpuSeconds();
  const m1 = machineCpuSeconds();
  const out: Measured = {
    load,
    wallS,
    serverCpuS: cpu0 !== undefined && cpu1 !== undefined ? cpu1 - cpu0 : undefined,
    redisCpuS: rcpu0 !== undefined && rcpu1 !== undefined ? rcpu1 - rcpu0 : undefined,
    loadCpuS: self1 - self0,
    window: { fromUs, toUs },
  };
  if (m0 && m1 && out.serverCpuS !== undefined && out.redisCpuS !== undefined) {
    out.otherCpuS = Math.max(0, m1.busy - m0.busy - out.serverCpuS - out.redisCpuS - out.loadCpuS);
  }
  return out;
}

/** Share of one core that other jobs used during a run (0 when unknown). */
export const otherShare = (m: Pick<Measured, 'otherCpuS' | 'wallS'>) => (m.otherCpuS !== undefined && m.wallS > 0 ? m.otherCpuS / m.wallS : 0);

/** Server CPU µs per request of a run, when known. */
export const serverUsPerRequest = (m: Measured) => (m.serverCpuS !== undefined && m.load.total > 0 ? (m.serverCpuS * 1e6) / m.load.total : undefined);

/** The median of some numbers (the mean of the middle two for an even count); undefined when there are none. */
export function median(values: (number | undefined)[]): number | undefined {
  const v = values.filter((x): x is number => x !== undefined && Number.isFinite(x)).sort((a, b) => a - b);
  if (v.length === 0) return undefined;
  return v.length % 2 ? v[(v.length - 1) / 2] : (v[v.length / 2 - 1] + v[v.length / 2]) / 2;
}

/** The element with the median `key` (the lower middle one for an even count). */
export function medianBy<T>(items: T[], key: (t: T) => number): T {
  const s = [...items].sort((a, b) => key(a) - key(b));
  return s[Math.floor((s.length - 1) / 2)];
}

/** The one-line summary of a measured run, for the console. */
export function runLine(id: string, m: Measured): string {
  const l = m.load;
  const pct = (c: number) => fmtNum((100 * c) / m.wallS, 0);
  return (
    `[bench] ${id}: ${fmtInt(l.rps)} req/s, p50 ${l.p50} ms, p99 ${l.p99} ms, non-2xx ${l.non2xx}, errors ${l.errors}` +
    (m.serverCpuS !== undefined ? `, server CPU ${pct(m.serverCpuS)}%` : '') +
    `, autocannon ${pct(m.loadCpuS)}%` +
    (m.otherCpuS !== undefined ? `, other jobs ${pct(m.otherCpuS)}%` : '')
  );
}

/** `server / redis / autocannon / other jobs` CPU, % of one core, for a table cell. */
export const cpuShares = (m: Measured) =>
  [m.serverCpuS, m.redisCpuS, m.loadCpuS, m.otherCpuS].map((c) => (c === undefined ? 'n/a' : fmtNum((100 * c) / m.wallS, 0))).join(' / ');

export interface ScheduledRun {
  /** Runs made of this slot to get one that other jobs did not disturb (1 = first try). */
  attempts: number;
}

export interface ScheduleOptions {
  /** Rerun a slot when other jobs used more than this share of a core during it (checked by `disturbance`). */
  busyShare: number;
  retries: number;
  /** A retry starts only if it and the slots still to run fit in this many seconds of slots. */
  budgetS: number;
}

/**
 * Runs `schedule` in order. A slot during which other jobs took a real share of the CPU
 * (`disturbance(result)` > busyShare) runs again, up to `retries` times, while the retry and the
 * slots still to run fit in the time budget; the least disturbed attempt is kept.
 * Returns the kept result of each slot (in schedule order), every attempt, and how many retries
 * the budget skipped.
 */
export async function runSchedule<S, R extends ScheduledRun>(
  schedule: S[],
  run: (slot: S, index: number, attempt: number) => Promise<R>,
  disturbance: (r: R) => number,
  o: ScheduleOptions,
  label: (slot: S) => string,
): Promise<{ kept: R[]; everyAttempt: R[]; retriesSkipped: number; wallS: number }> {
  const kept: R[] = [];
  const everyAttempt: R[] = [];
  let retriesSkipped = 0;
  const start = performance.now();
  for (const [n, slot] of schedule.entries()) {
    const t0 = performance.now();
    let best = await run(slot, n, 1);
    const firstS = (performance.now() - t0) / 1000;
    everyAttempt.push(best);
    for (let retry = 1; retry <= o.retries && disturbance(best) > o.busyShare; retry++) {
      const why = `other jobs used ${fmtNum(100 * disturbance(best), 0)}% of a core`;
      const spentS = (performance.now() - start) / 1000;
      const needS = firstS * (1 + schedule.length - 1 - n);
      if (spentS + needS > o.budgetS) {
        console.error(
          `[bench] ${label(slot)}: ${why}; no retry (budget: ${fmtNum(spentS, 0)} s spent + ~${fmtNum(needS, 0)} s > ${o.budgetS} s; see --budget)`,
        );
        retriesSkipped++;
        break;
      }
      console.error(`[bench] ${label(slot)}: ${why}; running it again (${retry}/${o.retries})`);
      const again = await run(slot, n, retry + 1);
      everyAttempt.push(again);
      again.attempts = best.attempts + 1;
      best = disturbance(again) < disturbance(best) ? again : { ...best, attempts: again.attempts };
    }
    kept.push(best);
  }
  return { kept, everyAttempt, retriesSkipped, wallS: (performance.now() - start) / 1000 };
}

/** Nearest-rank quantile of sorted values. */
const quantile = (sorted: number[], q: number) => (sorted.length ? sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil(q * sorted.length) - 1))] : NaN);

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
  return { n: s.length, p50: quantile(s, 0.5), p90: quantile(s, 0.9), p99: quantile(s, 0.99), max: s.length ? s[s.length - 1] : NaN };
}

/** Milliseconds: three decimals below 1, two below 10, one below 100. */
export const ms = (v: number) => (!Number.isFinite(v) ? 'n/a' : v < 1 ? v.toFixed(3) : v < 10 ? v.toFixed(2) : v < 100 ? v.toFixed(1) : fmtInt(v));
