/**
 * How the service reaches Redis. `none`: no Redis settings (outside production only; loading still succeeds so that
 * code needing no Redis can read the rest, but the service refuses to start).
 */
export type RedisTopology =
  | { mode: 'standalone'; url: string }
  | { mode: 'sentinel'; sentinels: HostPort[]; masterName: string; sentinelPassword?: string }
  | { mode: 'cluster'; nodes: HostPort[] }
  | { mode: 'none' };

export interface HostPort {
  host: string;
  port: number;
}

export interface RedisConfig {
  topology: RedisTopology;
  username?: string;
  password?: string;
  tls: boolean;
  tlsCaFile?: string;
  tlsRejectUnauthorized: boolean;
  /** Prepended by the key builder to every key: `<prefix>:<feature>:{tag}:<part>`. */
  keyPrefix: string;
  commandTimeoutMs: number;
  connectTimeoutMs: number;
  /** Retry-After sent with a 503 when Redis is unreachable. */
  retryAfterS: number;
}

/** Which durable writes there are: the class a script's contract header declares (`Durable: money`). */
export type DurabilityClass = 'money' | 'messages';

/** How many replicas must have a durable write before it is acknowledged (see docs/durability.md). */
export interface DurabilityConfig {
  /** Per class of durable write; 0 waits for none (the WAIT is not sent). */
  replicas: Record<DurabilityClass, number>;
  /** WAIT's own timeout: past it the write is answered WRITE_UNCONFIRMED. */
  timeoutMs: number;
}

/** The cache role: where caches live and how long a cache command may take before it counts as a miss. */
export interface CacheConfig {
  /** A separate Redis (redis:// or rediss://) used only for caches; undefined = caches use the main connection. */
  url?: string;
  /** A cache read or write slower than this is given up: a read becomes a miss, a write is dropped. */
  commandTimeoutMs: number;
}

export interface JwtConfig {
  algorithm: 'HS256' | 'RS256' | 'ES256';
  /** HS256 secret or PEM public key. */
  key: string;
  issuer?: string;
  audience?: string;
  clockToleranceS: number;
  /** True when the key is the built-in development secret. */
  isDevSecret: boolean;
}

export interface RateLimitConfig {
  enabled: boolean;
  windowMs: number;
  /** Most requests one instance leases from Redis at a time (see RateLimiter). 1 = every request asks Redis. */
  maxLease: number;
  limits: Record<'user' | 'merchant' | 'service' | 'admin' | 'anonymous', number>;
}

/**
 * The typed, validated configuration of the platform (server, Redis, identities, rate limits).
 * Built once at boot by `loadConfig`; inject it, never read `process.env`.
 */
export class AppConfig {
  env!: 'development' | 'test' | 'production';
  port!: number;
  host!: string;
  logLevel!: string;
  bodyLimitBytes!: number;
  requestIdHeader!: string;
  /** Most time a client may take to send one request, headers and body (slow senders get 408). */
  requestTimeoutMs!: number;
  shutdownGraceMs!: number;
  swaggerEnabled!: boolean;
  redis!: RedisConfig;
  jwt!: JwtConfig;
  /** merchantId → HMAC secret */
  merchantSecrets!: ReadonlyMap<string, string>;
  merchantSignatureWindowMs!: number;
  /** service name → token */
  serviceTokens!: ReadonlyMap<string, string>;
  /** admin key name → key */
  adminKeys!: ReadonlyMap<string, string>;
  rateLimit!: RateLimitConfig;
  durability!: DurabilityConfig;
  /** The cache role (REDIS_CACHE_URL, CACHE_COMMAND_TIMEOUT_MS): see docs/modules/cache.md. */
  cache!: CacheConfig;
  /**
   * Each feature module's own settings, by slice name, built by `loadConfig` from every
   * slice defined with `defineConfigSlice`. Modules inject their slice's token, never this map.
   */
  readonly slices = new Map<string, unknown>();
  /** The environment this was loaded from, for a slice defined after `loadConfig` ran. Not enumerable: never logged or compared. */
  declare readonly source: Readonly<NodeJS.ProcessEnv>;
}
