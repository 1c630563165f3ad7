import { mkdirSync } from 'node:fs';
import { Agent } from 'node:http';
import { join } from 'node:path';
import { BENCH_ADMIN_KEY, fullEnv, spawnFullStack } from './full-stack';
import { freePort, httpRequest } from './net';
import { type ManagedProcess, waitUntilServing } from './proc';

/** One answer of the built service: its status and its body as text. */
export interface Answer {
  status: number;
  body: string;
}

const agent = new Agent({ keepAlive: true, maxSockets: 256 });

/** One request on `agent` to the service on `port` (30 s timeout), with `body` as it is. */
export const httpOn = (agent: Agent, port: number, method: string, path: string, headers: Record<string, string>, body?: string): Promise<Answer> =>
  httpRequest(`http://127.0.0.1:${port}${path}`, { method, headers, body, agent, timeoutMs: 30_000 });

/** One request to the service on `port` (kept-alive connections, 30 s timeout); `body` is sent as JSON. */
export const http = (port: number, method: string, path: string, headers: Record<string, string>, body?: unknown): Promise<Answer> =>
  httpOn(agent, port, method, path, headers, body === undefined ? undefined : JSON.stringify(body));

export const json = <T>(a: Answer): T => JSON.parse(a.body) as T;

/** The built service, running as a full stack. */
export interface Service {
  port: number;
  proc: ManagedProcess;
}

/**
 * Starts the built service in `dist` as a full stack on a free port, with `serviceEnv` on top of the bench's
 * environment and `redisEnv` (REDIS_URL, or REDIS_CLUSTER_NODES without a REDIS_URL) last; resolves once it is ready.
 */
export async function startService(
  dist: string,
  workDir: string,
  id: string,
  prefix: string,
  serviceEnv: Record<string, string>,
  redisEnv: Record<string, string>,
): Promise<Service> {
  const port = await freePort();
  const env = fullEnv(port, redisEnv.REDIS_URL ?? '', prefix, serviceEnv);
  if (!redisEnv.REDIS_URL) delete env.REDIS_URL;
  Object.assign(env, redisEnv);
  const dir = join(workDir, `run-${id}`);
  mkdirSync(dir, { recursive: true });
  const proc = spawnFullStack({ id, port, dist, workDir: dir, env });
  await waitUntilServing(proc, port, `http://127.0.0.1:${port}/health/ready`, 60_000);
  return { port, proc };
}

/** The headers of an ops request with a JSON body. */
export const ADMIN_JSON = { 'x-admin-key': BENCH_ADMIN_KEY, 'content-type': 'application/json' };

/** The service's env under load: warnings only, rate limits on but far above any load a bench sends. */
export const UNDER_LOAD_ENV: Record<string, string> = {
  LOG_LEVEL: 'warn',
  RATE_LIMIT_ENABLED: 'true',
  RATE_LIMIT_USER: '10000000',
  RATE_LIMIT_ADMIN: '10000000',
  RATE_LIMIT_WINDOW_MS: '1000',
};
