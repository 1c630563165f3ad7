/** How the service reaches Redis. `managed` means a local redis-server the service supervises (development only). */
export type RedisTopology =
  | { mode: 'standalone'; url: string }
  | { mode: 'sentinel'; sentinels: HostPort[]; masterName: string; sentinelPassword?: string }
  | { mode: 'cluster'; nodes: HostPort[] }
  | { mode: 'managed'; port: number; dir: string };

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

export interface MessagesConfig {
  /** Most messages an account keeps (the newest). */
  maxPerAccount: number;
  /** How long a message is kept, ms. */
  retentionMs: number;
  /** Reminder delay per pending-action type, ms (overrides of the built-in defaults). */
  pendingActionDelays: ReadonlyMap<string, number>;
}

export interface LocksConfig {
  /** LOCK_POLICIES: lease and wait per business, overriding what the modules declare. */
  policies: ReadonlyMap<string, { leaseMs: number; waitMs: number }>;
  /** A waiter checks the lock again at least this often, even if no release message arrives, ms. */
  wakeCheckMs: number;
}

export interface OrdersConfig {
  /** How long an order and its plans are kept after their last write, ms (the idempotency window of merchantOrderNo). */
  retentionMs: number;
  /** Approximate most events kept per shard stream. */
  eventsMaxLen: number;
  /** Delay before the first channel query after an unknown outcome, and the query backoff's first step, ms. */
  queryDelayMs: number;
  /** Latency of every simulated payment channel, ms. */
  channelLatencyMs: number;
  /** `method.op` → outcome of the simulated channels (pay, query, reverse); success when absent. */
  channelOutcomes: ReadonlyMap<string, 'success' | 'failure' | 'unknown'>;
}

/** The typed, validated configuration. Built once at boot by `loadConfig`; inject it, never read `process.env`. */
export class AppConfig {
  env!: 'development' | 'test' | 'production';
  port!: number;
  host!: string;
  logLevel!: string;
  bodyLimitBytes!: number;
  requestIdHeader!: string;
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
  messages!: MessagesConfig;
  locks!: LocksConfig;
  orders!: OrdersConfig;
}
