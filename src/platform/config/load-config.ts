import { createPublicKey } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { AppConfig, DurabilityConfig, HostPort, RedisConfig, RedisTopology } from './app-config';
import { ConfigError } from './config.error';
import { configSlices } from './config-slice';
import { EnvSchema } from './env.schema';
import { validateEnv } from './env-validation';

export { ConfigError } from './config.error';

/** Credentials used only outside production, so `npm start` works with no setup. Production refuses them. */
export const DEV_DEFAULTS = {
  JWT_SECRET: 'dev-only-jwt-secret-change-me-0123456789abcdef',
  MERCHANT_SECRETS: 'm_demo:dev-merchant-secret-0123456789',
  SERVICE_TOKENS: 'dev-service:dev-service-token-0123456789',
  ADMIN_API_KEYS: 'dev-admin:dev-admin-key-0123456789',
} as const;

const NAME_RE = /^[A-Za-z0-9_.-]{1,64}$/;

/** Parses `name:secret,name2:secret2`. Secrets must be at least 16 characters. */
export function parseNamedSecrets(variable: string, raw: string): Map<string, string> {
  const out = new Map<string, string>();
  for (const entry of raw
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean)) {
    const i = entry.indexOf(':');
    const name = i > 0 ? entry.slice(0, i) : '';
    const secret = i > 0 ? entry.slice(i + 1) : '';
    if (!NAME_RE.test(name)) throw new ConfigError(variable, `has an entry without a valid name (want name:secret, name of A-Z a-z 0-9 _ . -)`);
    if (secret.length < 16) throw new ConfigError(variable, `entry "${name}" has a secret shorter than 16 characters`);
    if (out.has(name)) throw new ConfigError(variable, `names "${name}" twice`);
    out.set(name, secret);
  }
  if (out.size === 0) throw new ConfigError(variable, 'is empty');
  return out;
}

function parseHostPorts(variable: string, raw: string): HostPort[] {
  return raw.split(',').map((hp) => {
    const i = hp.lastIndexOf(':');
    const host = hp.slice(0, i).replace(/^\[(.*)\]$/, '$1');
    const port = Number(hp.slice(i + 1));
    if (!host || !Number.isInteger(port) || port < 1 || port > 65535) throw new ConfigError(variable, `has an invalid host:port "${hp}"`);
    return { host, port };
  });
}

function readPem(variable: string, value: string): string {
  if (value.includes('-----BEGIN')) return value.replace(/\\n/g, '\n');
  try {
    return readFileSync(resolve(value), 'utf8');
  } catch {
    throw new ConfigError(variable, `is neither a PEM key nor a readable file path`);
  }
}

/**
 * Validates the environment once and returns the typed configuration: the
 * platform's settings, and every module slice defined so far (`defineConfigSlice`;
 * the modules' `*.config.ts` files define theirs when imported, which the app's
 * imports do before this runs). Throws `ConfigError` naming the first bad variable.
 */
export function loadConfig(env: NodeJS.ProcessEnv = process.env): AppConfig {
  const s = validateEnv(EnvSchema, env);
  const nodeEnv = s.NODE_ENV ?? 'development';
  const prod = nodeEnv === 'production';

  const topology = redisTopology(s, prod);
  const cfg = new AppConfig();
  cfg.env = nodeEnv;
  cfg.port = s.PORT ?? 3000;
  cfg.host = s.HOST ?? '0.0.0.0';
  cfg.logLevel = s.LOG_LEVEL ?? 'info';
  cfg.bodyLimitBytes = s.BODY_LIMIT_BYTES ?? 64 * 1024;
  cfg.requestIdHeader = s.REQUEST_ID_HEADER ?? 'x-request-id';
  cfg.requestTimeoutMs = s.REQUEST_TIMEOUT_MS ?? 30_000;
  cfg.shutdownGraceMs = s.SHUTDOWN_GRACE_MS ?? 10_000;
  cfg.swaggerEnabled = s.SWAGGER_ENABLED ?? true;

  // A path, read again by every Redis connection: PEM text (which JWT_PUBLIC_KEY takes) would pass a PEM check here
  // and then stop the boot with a stack trace when the first connection opened it as a file.
  if (s.REDIS_TLS_CA_FILE) {
    try {
      readFileSync(resolve(s.REDIS_TLS_CA_FILE));
    } catch {
      throw new ConfigError('REDIS_TLS_CA_FILE', 'is not a readable file; give the path of the CA certificate (PEM)');
    }
  }
  const tls = s.REDIS_TLS ?? s.REDIS_URL?.startsWith('rediss://') ?? false;
  // Settings that contradict the rest are refused rather than ignored: the service would run otherwise than its
  // operator believes (on REDIS_URL rather than Sentinel; with the URL's TLS but without the CA file).
  if (s.REDIS_TLS === false && s.REDIS_URL?.startsWith('rediss://')) {
    throw new ConfigError('REDIS_TLS', 'is false but REDIS_URL is a rediss:// URL; use redis:// for a connection without TLS');
  }
  if (s.REDIS_TLS_CA_FILE && !tls) {
    throw new ConfigError('REDIS_TLS_CA_FILE', 'is set but TLS is off; set REDIS_TLS=true or use a rediss:// REDIS_URL');
  }
  cfg.redis = {
    topology,
    username: s.REDIS_USERNAME,
    password: s.REDIS_PASSWORD,
    tls,
    tlsCaFile: s.REDIS_TLS_CA_FILE,
    tlsRejectUnauthorized: s.REDIS_TLS_REJECT_UNAUTHORIZED ?? true,
    keyPrefix: s.REDIS_KEY_PREFIX ?? 'rp',
    commandTimeoutMs: s.REDIS_COMMAND_TIMEOUT_MS ?? 1000,
    connectTimeoutMs: s.REDIS_CONNECT_TIMEOUT_MS ?? 2000,
    retryAfterS: s.REDIS_RETRY_AFTER_S ?? 1,
  };

  cfg.durability = durability(s, cfg.redis);
  cfg.cache = {
    url: s.REDIS_CACHE_URL,
    commandTimeoutMs: s.CACHE_COMMAND_TIMEOUT_MS ?? 50,
  };

  const algorithm = s.JWT_ALGORITHM ?? (s.JWT_PUBLIC_KEY ? 'RS256' : 'HS256');
  let key: string;
  if (algorithm === 'HS256') {
    if (s.JWT_PUBLIC_KEY) throw new ConfigError('JWT_PUBLIC_KEY', 'is set but JWT_ALGORITHM is HS256 (use JWT_SECRET, or set JWT_ALGORITHM=RS256/ES256)');
    if (!s.JWT_SECRET && prod) throw new ConfigError('JWT_SECRET', 'is required in production when JWT_ALGORITHM is HS256');
    key = s.JWT_SECRET ?? DEV_DEFAULTS.JWT_SECRET;
  } else {
    if (!s.JWT_PUBLIC_KEY) throw new ConfigError('JWT_PUBLIC_KEY', `is required when JWT_ALGORITHM is ${algorithm}`);
    key = readPem('JWT_PUBLIC_KEY', s.JWT_PUBLIC_KEY);
    let type: string | undefined;
    try {
      type = createPublicKey(key).asymmetricKeyType;
    } catch {
      throw new ConfigError('JWT_PUBLIC_KEY', 'is not a valid PEM public key');
    }
    const want = algorithm === 'ES256' ? 'ec' : 'rsa';
    if (type !== want) throw new ConfigError('JWT_PUBLIC_KEY', `is a ${type} key but JWT_ALGORITHM is ${algorithm}`);
  }
  cfg.jwt = {
    algorithm,
    key,
    issuer: s.JWT_ISSUER,
    audience: s.JWT_AUDIENCE,
    clockToleranceS: s.JWT_CLOCK_TOLERANCE_S ?? 5,
    isDevSecret: key === DEV_DEFAULTS.JWT_SECRET,
  };
  if (prod && cfg.jwt.isDevSecret) throw new ConfigError('JWT_SECRET', 'is the development default; production needs its own');

  cfg.merchantSecrets = credentials('MERCHANT_SECRETS', s.MERCHANT_SECRETS, prod);
  cfg.merchantSignatureWindowMs = s.MERCHANT_SIGNATURE_WINDOW_MS ?? 5 * 60_000;
  cfg.serviceTokens = credentials('SERVICE_TOKENS', s.SERVICE_TOKENS, prod);
  cfg.adminKeys = credentials('ADMIN_API_KEYS', s.ADMIN_API_KEYS, prod);
  refuseSharedSecrets(cfg);

  cfg.rateLimit = {
    enabled: s.RATE_LIMIT_ENABLED ?? true,
    windowMs: s.RATE_LIMIT_WINDOW_MS ?? 1000,
    maxLease: s.RATE_LIMIT_MAX_LEASE ?? 100,
    limits: {
      user: s.RATE_LIMIT_USER ?? 50,
      merchant: s.RATE_LIMIT_MERCHANT ?? 200,
      service: s.RATE_LIMIT_SERVICE ?? 5000,
      admin: s.RATE_LIMIT_ADMIN ?? 50,
      anonymous: s.RATE_LIMIT_ANONYMOUS ?? 20,
    },
  };
  // Kept for a slice defined after this ran (see ConfigSlice.of); not enumerable, so never logged or compared.
  Object.defineProperty(cfg, 'source', { value: Object.freeze({ ...env }), enumerable: false });
  // Every module's own slice, validated now so that a bad module setting stops the boot like any other.
  for (const slice of configSlices()) cfg.slices.set(slice.name, slice.load(env));
  return cfg;
}

function durability(s: EnvSchema, redis: RedisConfig): DurabilityConfig {
  const money = s.DURABILITY_REPLICAS ?? 0;
  const out: DurabilityConfig = {
    replicas: { money, messages: s.DURABILITY_MESSAGES_REPLICAS ?? money },
    timeoutMs: s.DURABILITY_TIMEOUT_MS ?? 500,
  };
  // The WAIT is a command on the command connection: it must settle before that connection's timeout would cut it.
  if ((out.replicas.money > 0 || out.replicas.messages > 0) && out.timeoutMs >= redis.commandTimeoutMs) {
    throw new ConfigError('DURABILITY_TIMEOUT_MS', `must be below REDIS_COMMAND_TIMEOUT_MS (${redis.commandTimeoutMs}) when durable writes wait for replicas`);
  }
  return out;
}

function credentials(variable: keyof typeof DEV_DEFAULTS, raw: string | undefined, prod: boolean): Map<string, string> {
  if (!raw) {
    if (prod) throw new ConfigError(variable, 'is required in production');
    return parseNamedSecrets(variable, DEV_DEFAULTS[variable]);
  }
  const parsed = parseNamedSecrets(variable, raw);
  if (prod) {
    // Every built-in credential is public (README, Swagger UI in development), whichever variable it is put in.
    const named = (['MERCHANT_SECRETS', 'SERVICE_TOKENS', 'ADMIN_API_KEYS'] as const).flatMap((v) => [...parseNamedSecrets(v, DEV_DEFAULTS[v]).values()]);
    const dev = new Set([DEV_DEFAULTS.JWT_SECRET, ...named]);
    for (const [name, secret] of parsed) {
      if (dev.has(secret)) throw new ConfigError(variable, `entry "${name}" uses a development default secret; production needs its own`);
    }
  }
  return parsed;
}

/**
 * One secret names one caller. A secret in two entries would let whoever holds it be the other caller too: a
 * service token that is also an admin key opens the admin routes, a merchant secret equal to the HS256 JWT secret
 * mints user tokens, and two entries of one variable always authenticate as the first name.
 */
function refuseSharedSecrets(cfg: AppConfig): void {
  const seen = new Map<string, string>();
  const sources: Array<[variable: string, secrets: Iterable<[string, string]>]> = [
    ['JWT_SECRET', cfg.jwt.algorithm === 'HS256' ? [['', cfg.jwt.key]] : []],
    ['MERCHANT_SECRETS', cfg.merchantSecrets],
    ['SERVICE_TOKENS', cfg.serviceTokens],
    ['ADMIN_API_KEYS', cfg.adminKeys],
  ];
  for (const [variable, secrets] of sources) {
    for (const [name, secret] of secrets) {
      const first = seen.get(secret);
      const self = name ? `entry "${name}"` : 'its value';
      if (first) throw new ConfigError(variable, `${self} uses the same secret as ${first}; every caller needs a secret of its own`);
      seen.set(secret, name ? `${variable} entry "${name}"` : variable);
    }
  }
}

function redisTopology(s: EnvSchema, prod: boolean): RedisTopology {
  const set = [s.REDIS_URL && 'REDIS_URL', s.REDIS_SENTINELS && 'REDIS_SENTINELS', s.REDIS_CLUSTER_NODES && 'REDIS_CLUSTER_NODES'].filter(Boolean) as string[];
  if (set.length > 1) throw new ConfigError(set[1], `cannot be combined with ${set[0]}; configure exactly one Redis topology`);
  if (!s.REDIS_SENTINELS) {
    for (const variable of ['REDIS_SENTINEL_MASTER', 'REDIS_SENTINEL_PASSWORD'] as const) {
      if (s[variable]) throw new ConfigError(variable, 'applies only to Sentinel, but REDIS_SENTINELS is not set');
    }
  }
  if (s.REDIS_URL) return { mode: 'standalone', url: s.REDIS_URL };
  if (s.REDIS_SENTINELS) {
    if (!s.REDIS_SENTINEL_MASTER) throw new ConfigError('REDIS_SENTINEL_MASTER', 'is required with REDIS_SENTINELS');
    return {
      mode: 'sentinel',
      sentinels: parseHostPorts('REDIS_SENTINELS', s.REDIS_SENTINELS),
      masterName: s.REDIS_SENTINEL_MASTER,
      sentinelPassword: s.REDIS_SENTINEL_PASSWORD,
    };
  }
  if (s.REDIS_CLUSTER_NODES) return { mode: 'cluster', nodes: parseHostPorts('REDIS_CLUSTER_NODES', s.REDIS_CLUSTER_NODES) };
  if (prod) throw noRedisConfigured(true);
  return { mode: 'none' };
}

/** No Redis is configured: refused when production settings load, and by the service's entry point everywhere. */
export function noRedisConfigured(prod: boolean): ConfigError {
  return new ConfigError(
    'REDIS_URL',
    `is required${prod ? ' in production' : ''} (or REDIS_SENTINELS + REDIS_SENTINEL_MASTER, or REDIS_CLUSTER_NODES): the service never starts a Redis of its own` +
      (prod ? '' : '; `npm start` starts a local redis-server for development when none is configured'),
  );
}
