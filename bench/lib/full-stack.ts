/** The build under test: its snapshot, its public entry, the service process, its bench credentials and HTTP calls to it. */
import { createHmac, randomBytes } from 'node:crypto';
import { cpSync, existsSync, mkdirSync, realpathSync, symlinkSync } from 'node:fs';
import { Agent } from 'node:http';
import { dirname, join, resolve } from 'node:path';
import { signRequest } from '../../src/platform/auth/merchant-signature';
import { httpRequest, spawnManaged } from './proc';

/** The project root (bench/lib/../..). */
export const ROOT = resolve(__dirname, '..', '..');

/** Credentials the benchmarks give the real service (never used anywhere else). */
export const BENCH_JWT_SECRET = 'bench-only-jwt-secret-not-for-production-0123456789';
export const BENCH_SERVICE_TOKEN = 'bench-service-token-0123456789';
export const BENCH_ADMIN_KEY = 'bench-admin-key-0123456789';
const [MERCHANT, MERCHANT_SECRET] = ['bench_merchant', 'bench-merchant-secret-0123456789'];
export const MERCHANT_ORDERS_PATH = '/merchant/orders';
/** The headers of an ops request with a JSON body. */
export const ADMIN_JSON = { 'x-admin-key': BENCH_ADMIN_KEY, 'content-type': 'application/json' };

/** `Bearer <jwt>` for each account: an HS256 app-user JWT (`sub`, `iat`, an hour's `exp`) signed with node:crypto (fast enough for 100,000 users). */
export function bearerTokens(accounts: readonly string[]): string[] {
  const b64 = (s: string) => Buffer.from(s).toString('base64url');
  const header = b64(JSON.stringify({ alg: 'HS256', typ: 'JWT' }));
  const iat = Math.floor(Date.now() / 1000);
  return accounts.map((sub) => {
    const unsigned = `${header}.${b64(JSON.stringify({ sub, iat, exp: iat + 3600 }))}`;
    return `Bearer ${unsigned}.${createHmac('sha256', BENCH_JWT_SECRET).update(unsigned).digest('base64url')}`;
  });
}

/** The JWT alone (no `Bearer `) for one account. */
export const userToken = (account: string) => bearerTokens([account])[0].slice('Bearer '.length);

/** One signed `POST /merchant/orders` of 12.00 CNY by the bench merchant (a new merchantOrderNo unless given one; `payerAccountId` when given). */
export function signedOrder(merchantOrderNo = `b-${randomBytes(8).toString('hex')}`, payerAccountId?: string) {
  const body = JSON.stringify({ merchantOrderNo, amount: 1200, currency: 'CNY', subject: 'Bench', ...(payerAccountId ? { payerAccountId } : {}) });
  const [timestamp, nonce] = [String(Date.now()), randomBytes(16).toString('hex')];
  const signature = signRequest(MERCHANT_SECRET, { method: 'POST', path: MERCHANT_ORDERS_PATH, timestamp, nonce, body });
  const headers = { 'content-type': 'application/json', 'x-merchant-id': MERCHANT, 'x-timestamp': timestamp, 'x-nonce': nonce, 'x-signature': signature };
  return { method: 'POST', path: MERCHANT_ORDERS_PATH, body, headers };
}

/** The service's env under load: warnings only, rate limits on but far above any load a bench sends. */
export const UNDER_LOAD_ENV: Record<string, string> = { LOG_LEVEL: 'warn', RATE_LIMIT_ADMIN: '10000000' };

/** Env for the real service: production, bench credentials, rate limits on but never reached (the schema's maximum in a 1 s window), then `overrides`. */
export function fullEnv(port: number, redisUrl: string, prefix: string, overrides: Record<string, string> = {}): NodeJS.ProcessEnv {
  const ours =
    /^(NODE_ENV|PORT|HOST|LOG_LEVEL|BODY_LIMIT_BYTES|REQUEST_ID_HEADER|SHUTDOWN_GRACE_MS|SWAGGER_ENABLED|REDIS_|JWT_|MERCHANT_|SERVICE_TOKENS|ADMIN_API_KEYS|RATE_LIMIT_|MESSAGES_|PENDING_ACTION_)/;
  return {
    ...Object.fromEntries(Object.entries(process.env).filter(([k]) => !ours.test(k))),
    NODE_ENV: 'production',
    PORT: String(port),
    HOST: '127.0.0.1',
    REDIS_URL: redisUrl,
    REDIS_KEY_PREFIX: prefix,
    JWT_SECRET: BENCH_JWT_SECRET,
    MERCHANT_SECRETS: `${MERCHANT}:${MERCHANT_SECRET}`,
    SERVICE_TOKENS: `bench-service:${BENCH_SERVICE_TOKEN}`,
    ADMIN_API_KEYS: `bench-admin:${BENCH_ADMIN_KEY}`,
    LOG_LEVEL: 'info',
    RATE_LIMIT_ENABLED: 'true',
    RATE_LIMIT_USER: '10000000',
    RATE_LIMIT_WINDOW_MS: '1000',
    ...overrides,
  };
}

/**
 * Copies `<dir>/dist` and `<dir>/lua` of a build to `dest` (node_modules linked) and returns the copied dist dir (the
 * service finds its scripts at `dist/../lua`). A `nest build` elsewhere during the run (it deletes dist/ first) must
 * neither break the run nor mix two versions of the code in one table.
 */
export function snapshotBuild(distDir: string, dest: string): string {
  if (!existsSync(join(distDir, 'main.js'))) throw new Error(`${join(distDir, 'main.js')} not found; run \`npm run build\` (npm run bench does)`);
  const src = dirname(distDir);
  mkdirSync(dest, { recursive: true });
  cpSync(distDir, join(dest, 'dist'), { recursive: true });
  cpSync(join(src, 'lua'), join(dest, 'lua'), { recursive: true });
  symlinkSync(realpathSync(existsSync(join(src, 'node_modules')) ? join(src, 'node_modules') : join(ROOT, 'node_modules')), join(dest, 'node_modules'), 'dir');
  return join(dest, 'dist');
}

/**
 * The build's public entry (`<dist>/create-app`: createApp, appContext, loadConfig and the services a bench drives in
 * process), typed as its source. From the build, not the source: tsx emits no decorator metadata for Nest's injection.
 */
export const requireBuildEntry = (dist: string) => require(join(dist, 'create-app')) as typeof import('../../src/create-app');

/**
 * Node flags of the service as deployed (the Dockerfile's NODE_OPTIONS), given to the baseline servers too. With
 * BENCH_PROFILE_DIR set, every server a benchmark starts runs under `node --cpu-prof` (open the profiles in DevTools).
 */
const nodeArgs = (...rest: string[]) => [
  '--max-semi-space-size=64',
  ...(process.env.BENCH_PROFILE_DIR ? ['--cpu-prof', `--cpu-prof-dir=${process.env.BENCH_PROFILE_DIR}`] : []),
  ...rest,
];

const spawnNode = (name: string, cpus: string | undefined, cwd: string, env: NodeJS.ProcessEnv, ...args: string[]) =>
  spawnManaged({ name, cpus, command: process.execPath, args: nodeArgs(...args), cwd, env });

/** The real service, `node <dist>/main.js` in an empty working dir (main.ts would load a .env from it). */
export const spawnFullStack = (s: { id: string; port: number; cpus?: string; dist: string; env: NodeJS.ProcessEnv; workDir: string }) =>
  spawnNode(`redis-pay (${s.id}) :${s.port}`, s.cpus, s.workDir, s.env, join(s.dist, 'main.js'));

/** A baseline server written in TypeScript (`script`, a path), run by tsx from the project root. */
export const spawnBareServer = (s: { id: string; port: number; cpus?: string; script: string; env: NodeJS.ProcessEnv }) =>
  spawnNode(`${s.id} server :${s.port}`, s.cpus, ROOT, s.env, '--import', 'tsx', s.script);

/** One answer of the built service: its status and its body as text. */
export type Answer = { status: number; body: string };

const agent = new Agent({ keepAlive: true, maxSockets: 256 });

/** One request on `agent` to the service on `port` (30 s timeout), with `body` as it is. */
export const httpOn = (agent: Agent, port: number, method: string, path: string, headers: Record<string, string>, body?: string): Promise<Answer> =>
  httpRequest(`http://127.0.0.1:${port}${path}`, { method, headers, body, agent, timeoutMs: 30_000 });

/** One request to the service on `port` (kept-alive connections, 30 s timeout); `body` is sent as JSON. */
export const http = (port: number, method: string, path: string, headers: Record<string, string>, body?: unknown): Promise<Answer> =>
  httpOn(agent, port, method, path, headers, body === undefined ? undefined : JSON.stringify(body));

export const json = <T>(a: Answer): T => JSON.parse(a.body) as T;
