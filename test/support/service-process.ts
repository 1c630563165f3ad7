import { ChildProcess, spawn } from 'node:child_process';
import { resolve } from 'node:path';
import { freePort } from '../harness/free-port';
import { waitUntil } from '../harness/redis-process';
import { type RedisServerHandle, startRedisServer } from '../harness/redis-server';
import { CREDS } from './test-app';

const MAIN = resolve(__dirname, '../../dist/main.js');

export interface ServiceProcess {
  child: ChildProcess;
  base: string;
  /** A request to the instance, given up after 5 s. */
  call(path: string, init?: RequestInit): Promise<Response>;
  /** What it printed so far. */
  output(): string;
  /** Resolves when it has exited (by itself, a crash point, or kill). */
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  /** `kill -9`, and waits for the exit. */
  kill(): Promise<void>;
}

export interface ServiceOptions {
  /** Extra or overriding environment. */
  env?: Record<string, string>;
  /**
   * Crash points (src/platform/core/crash-points.ts) the instance dies at, `<name>` or `<name>#<n>`. Crash points live only
   * outside production, so the instance then runs with NODE_ENV=test.
   */
  crashAt?: string[];
}

/**
 * The built service (dist/main.js: `npm test` builds it first) as a child process on `redisUrl` with `prefix`,
 * ready (GET /health/ready answered 200) when this resolves. Production settings unless crash points are armed.
 */
export async function startServiceProcess(redisUrl: string, prefix: string, opts: ServiceOptions = {}): Promise<ServiceProcess> {
  // A port free a moment ago can be taken before the child binds it (by another process's outgoing connection, on a
  // busy machine): the child then exits saying so, and another port is tried. Any other failure is the test's.
  for (let attempt = 1; ; attempt++) {
    try {
      return await startOnce(await freePort(), redisUrl, prefix, opts);
    } catch (err) {
      if (attempt === 3 || !/the port is already in use/.test((err as Error).message)) throw err;
    }
  }
}

async function startOnce(port: number, redisUrl: string, prefix: string, opts: ServiceOptions): Promise<ServiceProcess> {
  let out = '';
  const crash = opts.crashAt?.length ? { NODE_ENV: 'test', CRASH_AT: opts.crashAt.join(',') } : {};
  const child: ChildProcess = spawn(process.execPath, [MAIN], {
    env: {
      PATH: process.env.PATH ?? '',
      NODE_ENV: 'production',
      PORT: String(port),
      HOST: '127.0.0.1',
      LOG_LEVEL: 'warn',
      REDIS_URL: redisUrl,
      REDIS_KEY_PREFIX: prefix,
      JWT_SECRET: CREDS.jwtSecret,
      MERCHANT_SECRETS: `${CREDS.merchantId}:${CREDS.merchantSecret}`,
      ADMIN_API_KEYS: `${CREDS.adminName}:${CREDS.adminKey}`,
      SERVICE_TOKENS: `${CREDS.serviceName}:${CREDS.serviceToken}`,
      RATE_LIMIT_ENABLED: 'false',
      ...crash,
      ...opts.env,
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  child.stdout!.on('data', (d) => (out += d));
  child.stderr!.on('data', (d) => (out += d));
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((r) => child.once('exit', (code, signal) => r({ code, signal })));
  const base = `http://127.0.0.1:${port}`;
  const svc: ServiceProcess = {
    child,
    base,
    exited,
    output: () => out,
    call: (path, init = {}) => fetch(`${base}${path}`, { signal: AbortSignal.timeout(5000), ...init }),
    async kill() {
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
      await exited;
    },
  };
  try {
    await Promise.race([
      waitUntil('the service to be ready', async () => (await svc.call('/health/ready').catch(() => ({ status: 0 }))).status === 200, 30_000, 100),
      exited.then(() => Promise.reject(new Error('the service exited'))),
    ]);
  } catch (err) {
    await svc.kill();
    throw new Error(`${(err as Error).message}\n${out}`, { cause: err });
  }
  return svc;
}

/** Waits for an instance armed with a crash point to die at it (SIGKILL), within `ms`. */
export async function diedAtCrashPoint(svc: ServiceProcess, name: string, ms = 10_000): Promise<void> {
  const r = await Promise.race([svc.exited, new Promise<null>((res) => setTimeout(() => res(null), ms).unref())]);
  if (r === null) throw new Error(`the instance did not reach crash point ${name} within ${ms} ms\n${svc.output()}`);
  if (r.signal !== 'SIGKILL' || !svc.output().includes(`crash point ${name}:`))
    throw new Error(`the instance exited (${r.signal ?? r.code}) but not at crash point ${name}\n${svc.output()}`);
}

/** What a crash-point suite works with: one redis-server for all its tests, and instances of the built service on it. */
export interface ServicesOnOwnRedis {
  redis: RedisServerHandle;
  /** An instance on `prefix` (dying at `crashAt`, when given), killed after the test. */
  start(prefix: string, crashAt?: string, env?: Record<string, string>): Promise<ServiceProcess>;
}

/** Registers the hooks of such a suite: the redis-server started before all tests and destroyed after; every instance a test started killed after it. */
export function useServicesOnOwnRedis(): ServicesOnOwnRedis {
  const running: ServiceProcess[] = [];
  const handles: ServicesOnOwnRedis = {
    redis: undefined as unknown as RedisServerHandle,
    async start(prefix, crashAt, env) {
      const svc = await startServiceProcess(handles.redis.url, prefix, { ...(env ? { env } : {}), ...(crashAt ? { crashAt: [crashAt] } : {}) });
      running.push(svc);
      return svc;
    },
  };
  beforeAll(async () => {
    handles.redis = await startRedisServer();
  });
  afterEach(async () => {
    await Promise.all(running.splice(0).map((s) => s.kill()));
  });
  afterAll(async () => {
    await handles.redis?.destroy();
  });
  return handles;
}
