import { cpSync, existsSync, mkdirSync, realpathSync, symlinkSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { createHmac } from 'node:crypto';
import type { Layer } from './cpu-profile';
import { ManagedProcess, spawnManaged } from './proc';

/** The project root (bench/lib/../..). */
export const ROOT = resolve(__dirname, '..', '..');

/** Credentials the benchmarks give the real service (never used anywhere else). */
export const BENCH_JWT_SECRET = 'bench-only-jwt-secret-not-for-production-0123456789';
export const BENCH_SERVICE_TOKEN = 'bench-service-token-0123456789';
export const BENCH_ADMIN_KEY = 'bench-admin-key-0123456789';

/**
 * `Bearer <jwt>` for each account: an HS256 app-user JWT (`sub`, `iat`, an hour's `exp`) signed with node:crypto,
 * about fifty times faster than jsonwebtoken's sign (a storm of 100,000 users needs 100,000 tokens).
 */
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

/** Env for the real service: production, bench credentials, limits it never reaches. */
export function fullEnv(port: number, redisUrl: string, prefix: string, overrides: Record<string, string> = {}): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {};
  const ours =
    /^(NODE_ENV|PORT|HOST|LOG_LEVEL|BODY_LIMIT_BYTES|REQUEST_ID_HEADER|SHUTDOWN_GRACE_MS|SWAGGER_ENABLED|REDIS_|JWT_|MERCHANT_|SERVICE_TOKENS|ADMIN_API_KEYS|RATE_LIMIT_|MESSAGES_|PENDING_ACTION_)/;
  for (const [k, v] of Object.entries(process.env)) if (!ours.test(k)) env[k] = v;
  return {
    ...env,
    NODE_ENV: 'production',
    PORT: String(port),
    HOST: '127.0.0.1',
    REDIS_URL: redisUrl,
    REDIS_KEY_PREFIX: prefix,
    JWT_SECRET: BENCH_JWT_SECRET,
    MERCHANT_SECRETS: 'bench_merchant:bench-merchant-secret-0123456789',
    SERVICE_TOKENS: `bench-service:${BENCH_SERVICE_TOKEN}`,
    ADMIN_API_KEYS: `bench-admin:${BENCH_ADMIN_KEY}`,
    LOG_LEVEL: 'info',
    RATE_LIMIT_ENABLED: 'true',
    // The schema's maximum; with a 1 s window no run comes near it.
    RATE_LIMIT_USER: '10000000',
    RATE_LIMIT_WINDOW_MS: '1000',
    ...overrides,
  };
}

/**
 * Copies `<dir>/dist` and `<dir>/lua` of a build to `dest` (node_modules linked, not copied) and
 * returns the copied dist dir. The service finds its Lua scripts at `dist/../lua`. Benchmarks
 * snapshot every build first: a `nest build` elsewhere in the tree during the run (it deletes
 * dist/ first) must neither break the run nor mix two versions of the code in one table.
 */
export function snapshotBuild(distDir: string, dest: string): string {
  const src = dirname(distDir);
  mkdirSync(dest, { recursive: true });
  cpSync(distDir, join(dest, 'dist'), { recursive: true });
  cpSync(join(src, 'lua'), join(dest, 'lua'), { recursive: true });
  const modules = existsSync(join(src, 'node_modules')) ? join(src, 'node_modules') : join(ROOT, 'node_modules');
  symlinkSync(realpathSync(modules), join(dest, 'node_modules'), 'dir');
  return join(dest, 'dist');
}

/** Throws unless every build dir has a main.js. */
export function assertBuilt(dists: string[]): void {
  for (const d of dists) {
    if (!existsSync(join(d, 'main.js'))) throw new Error(`${join(d, 'main.js')} not found; run \`npm run build\` (npm run bench does)`);
  }
}

/** `require`s a compiled module of a build (`path` relative to its dist/, e.g. `config/load-config`), typed as its source. */
export function requireFromBuild<T>(dist: string, path: string): T {
  return require(join(dist, path)) as T;
}

export interface ServerSpawn {
  /** For process names and logs. */
  id: string;
  port: number;
  /** CPUs to pin the server to (taskset cpu-list), or undefined. */
  cpus?: string;
  /** Run under `node --cpu-prof`, writing the profile to this dir. */
  profileDir?: string;
}

/** The real service, `node <dist>/main.js`, with `env` (see fullEnv); its stdout (the access log) goes to /dev/null. */
export function spawnFullStack(s: ServerSpawn & { dist: string; env: NodeJS.ProcessEnv; workDir: string }): ManagedProcess {
  return spawnManaged({
    name: `redis-pay (${s.id}) :${s.port}`,
    cpus: s.cpus,
    command: process.execPath,
    // BENCH_PROFILE_DIR: every service a benchmark starts runs under node --cpu-prof (for a look at where the time goes).
    args: [...RUNTIME_FLAGS, ...profileArgs(s.profileDir ?? process.env.BENCH_PROFILE_DIR), join(s.dist, 'main.js')],
    // An empty working dir: main.ts would load a developer's .env from the cwd.
    cwd: s.workDir,
    env: s.env,
    stdout: 'ignore',
  });
}

/** A baseline server written in TypeScript (`script`, a path), run by tsx from the project root. */
export function spawnBareServer(s: ServerSpawn & { script: string; env: NodeJS.ProcessEnv }): ManagedProcess {
  return spawnManaged({
    name: `${s.id} server :${s.port}`,
    cpus: s.cpus,
    command: process.execPath,
    args: [...RUNTIME_FLAGS, ...profileArgs(s.profileDir), '--import', 'tsx', s.script],
    cwd: ROOT,
    env: s.env,
    stdout: 'ignore',
  });
}

/**
 * Node flags of the service as deployed (the Dockerfile's NODE_OPTIONS, `npm start`), given to the baseline servers
 * too, so that a floor runs on the same runtime settings as the service it is compared with.
 */
export const RUNTIME_FLAGS = ['--max-semi-space-size=64'];

const profileArgs = (dir: string | undefined) => (dir ? ['--cpu-prof', `--cpu-prof-dir=${dir}`] : []);

/** Layers of the real service looked for in its CPU profiles. */
export const SERVICE_LAYERS: Layer[] = [
  // Inclusive: Nest's frames sit under guards, pipes, the handler and the reply, so these two include all of them.
  { name: 'Nest core (inclusive: guards, pipes, handler, reply run inside it)', match: (_f, w) => w.startsWith('node_modules/@nestjs/core/') },
  { name: 'Nest Fastify adapter (inclusive, as above)', match: (_f, w) => w.startsWith('node_modules/@nestjs/platform-fastify/') },
  {
    name: 'AuthGuard.canActivate (dist/platform/auth/auth.guard.js)',
    match: (f, w) => w.startsWith('dist/platform/auth/auth.guard') && f.functionName === 'canActivate',
  },
  { name: 'JWT verify (jsonwebtoken/jws/jwa)', match: (_f, w) => /^node_modules\/(jsonwebtoken|jws|jwa)\//.test(w) },
  {
    name: 'RateLimitGuard.canActivate (dist/platform/rate-limit)',
    match: (f, w) => w.startsWith('dist/platform/rate-limit/') && f.functionName === 'canActivate',
  },
  {
    name: 'ValidationPipe (class-validator, class-transformer)',
    match: (_f, w) =>
      /^node_modules\/(class-validator|class-transformer|validator)\//.test(w) || w.startsWith('node_modules/@nestjs/common/pipes/validation.pipe'),
  },
  {
    name: 'Logging + request id (pino, sonic-boom, dist/platform/http/logging.js)',
    match: (_f, w) =>
      /^node_modules\/(pino|sonic-boom|pino-std-serializers|@pinojs\/redact|fast-redact|thread-stream|on-exit-leak-free)\//.test(w) ||
      w.startsWith('dist/platform/http/logging'),
  },
  { name: 'Metrics (prom-client)', match: (_f, w) => w.startsWith('node_modules/prom-client/') },
  {
    name: 'ioredis (commands, parser)',
    match: (_f, w) => /^node_modules\/(ioredis|redis-parser|denque|standard-as-callback|cluster-key-slot|@ioredis\/[^/]+)\//.test(w),
  },
  {
    name: 'Fastify (routing, hooks, reply, JSON)',
    match: (_f, w) =>
      /^node_modules\/(fastify|find-my-way|fast-json-stringify|avvio|secure-json-parse|@fastify\/[^/]+|light-my-request|fast-querystring|toad-cache)\//.test(w),
  },
  { name: 'Node HTTP + net + streams', match: (_f, w) => /^node:(_http_|http$|net$|internal\/streams|internal\/http|stream$)/.test(w) },
  { name: 'Garbage collector', match: (f) => f.functionName === '(garbage collector)' },
];
