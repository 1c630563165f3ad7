/**
 * The load generator process of bench/scale.ts: `node --import tsx bench/lib/scale-loader.ts` with SCALE_LOADER set to
 * a LoaderSpec (JSON). It prepares, says READY on stderr, starts its load (autocannon, lib/load.ts) on SIGUSR2, and
 * writes its summary and its own CPU to the spec's `out` file. Every request is from a new user with its own bearer
 * token, signed as it is sent.
 */
import { writeFileSync } from 'node:fs';
import { bearerTokens } from './full-stack';
import { type LoadRequest, type LoadSummary, runLoad } from './load';
import { selfCpuSeconds } from './proc';

export const LOADER_SCRIPT = __filename;
export const LOADER_ENV = 'SCALE_LOADER';
export const READY = 'scale-loader ready';
const JSON_BODY = { 'content-type': 'application/json' };

export interface LoaderSpec {
  url: string;
  /** The service's routes, or a floor server's (bench/seckill-floor-server.ts `/reserve`, bench/red-envelopes-floor-server.ts `/grab`). */
  op: 'reserve' | 'grab' | 'reserve-floor' | 'grab-floor';
  activityId: string;
  durationS: number;
  connections: number;
  /** Accounts are `<users><n>`: a new one for every request. */
  users: string;
  out: string;
}

export interface LoaderResult {
  load: LoadSummary;
  cpuS: number;
  users: number;
}

/** The request maker of a load generator: every request from a new user, with its own bearer token (and requestId). */
function requestsOf(spec: LoaderSpec): { next: () => LoadRequest; count: () => number } {
  let n = 0;
  const next = (): LoadRequest => {
    const i = n++;
    const account = `${spec.users}${i}`;
    // The floors take the account from the body: they have no identity to take it from.
    if (spec.op === 'grab-floor') return { method: 'POST', path: `/grab/${spec.activityId}`, headers: JSON_BODY, body: JSON.stringify({ account }) };
    if (spec.op === 'reserve-floor')
      return {
        method: 'POST',
        path: `/reserve/${spec.activityId}/hot`,
        headers: JSON_BODY,
        body: JSON.stringify({ account, quantity: 1, requestId: `r${i}` }),
      };
    const authorization = bearerTokens([account])[0];
    if (spec.op === 'grab') return { method: 'POST', path: `/red-envelopes/activities/${spec.activityId}/grab`, headers: { authorization } };
    return {
      method: 'POST',
      path: `/seckill/activities/${spec.activityId}/products/hot/reservations`,
      headers: { authorization, 'content-type': 'application/json' },
      body: JSON.stringify({ quantity: 1, requestId: `r${i}` }),
    };
  };
  return { next, count: () => n };
}

/** The load generator process: says it is ready, starts on SIGUSR2, writes its summary and CPU to `out`. */
async function runLoader(spec: LoaderSpec): Promise<void> {
  const r = requestsOf(spec);
  await new Promise<void>((go) => {
    // A signal listener does not keep the process alive: the timer does, until the signal.
    const alive = setInterval(() => undefined, 60_000);
    process.once('SIGUSR2', () => {
      clearInterval(alive);
      go();
    });
    console.error(READY);
  });
  const cpu0 = selfCpuSeconds();
  const load = await runLoad({ url: spec.url, connections: spec.connections, durationS: spec.durationS, requests: r.next });
  const result: LoaderResult = { load, cpuS: selfCpuSeconds() - cpu0, users: r.count() };
  writeFileSync(spec.out, JSON.stringify(result));
}

if (require.main === module && process.env[LOADER_ENV]) {
  runLoader(JSON.parse(process.env[LOADER_ENV]) as LoaderSpec).then(
    () => process.exit(0),
    (err: Error) => {
      console.error('scale load generator failed:', err);
      process.exit(1);
    },
  );
}
