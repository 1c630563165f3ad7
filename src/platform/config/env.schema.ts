import { Transform } from 'class-transformer';
import { IsBoolean, IsIn, IsInt, IsOptional, IsString, Matches, Max, MaxLength, Min, MinLength } from 'class-validator';
import { emptyToUndefined, toBool, toInt } from './env-validation';

/**
 * The platform's environment variables (server, Redis, identities, rate limits),
 * named exactly as in the environment so a validation error names the variable.
 * Defaults live in `load-config.ts` and in `.env.example`; keep the three in step.
 * A feature module's own variables are in its `<module>.config.ts` slice.
 */
export class EnvSchema {
  @IsOptional()
  @Transform(emptyToUndefined)
  @IsIn(['development', 'test', 'production'])
  NODE_ENV?: 'development' | 'test' | 'production';

  @IsOptional()
  @Transform(toInt)
  @IsInt()
  @Min(1)
  @Max(65535)
  PORT?: number;

  @IsOptional()
  @Transform(emptyToUndefined)
  @IsString()
  @MaxLength(255)
  HOST?: string;

  @IsOptional()
  @Transform(emptyToUndefined)
  @IsIn(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'])
  LOG_LEVEL?: string;

  @IsOptional()
  @Transform(toInt)
  @IsInt()
  @Min(1024)
  @Max(10 * 1024 * 1024)
  BODY_LIMIT_BYTES?: number;

  @IsOptional()
  @Transform(emptyToUndefined)
  @Matches(/^[a-z0-9-]{1,64}$/, { message: 'must be a lower-case header name' })
  REQUEST_ID_HEADER?: string;

  @IsOptional()
  @Transform(toInt)
  @IsInt()
  @Min(1000)
  @Max(600_000)
  REQUEST_TIMEOUT_MS?: number;

  @IsOptional()
  @Transform(toInt)
  @IsInt()
  @Min(0)
  @Max(600_000)
  SHUTDOWN_GRACE_MS?: number;

  @IsOptional()
  @Transform(toBool)
  @IsBoolean()
  SWAGGER_ENABLED?: boolean;

  // --- Redis -----------------------------------------------------------------
  @IsOptional()
  @Transform(emptyToUndefined)
  @Matches(/^rediss?:\/\/.+/, { message: 'must be a redis:// or rediss:// URL' })
  REDIS_URL?: string;

  @IsOptional()
  @Transform(emptyToUndefined)
  @Matches(/^[^\s,]+:\d+(,[^\s,]+:\d+)*$/, { message: 'must be host:port[,host:port...]' })
  REDIS_SENTINELS?: string;

  @IsOptional()
  @Transform(emptyToUndefined)
  @IsString()
  @MaxLength(128)
  REDIS_SENTINEL_MASTER?: string;

  @IsOptional()
  @Transform(emptyToUndefined)
  @IsString()
  @MaxLength(512)
  REDIS_SENTINEL_PASSWORD?: string;

  @IsOptional()
  @Transform(emptyToUndefined)
  @Matches(/^[^\s,]+:\d+(,[^\s,]+:\d+)*$/, { message: 'must be host:port[,host:port...]' })
  REDIS_CLUSTER_NODES?: string;

  @IsOptional()
  @Transform(emptyToUndefined)
  @IsString()
  @MaxLength(128)
  REDIS_USERNAME?: string;

  @IsOptional()
  @Transform(emptyToUndefined)
  @IsString()
  @MaxLength(512)
  REDIS_PASSWORD?: string;

  @IsOptional()
  @Transform(toBool)
  @IsBoolean()
  REDIS_TLS?: boolean;

  @IsOptional()
  @Transform(emptyToUndefined)
  @IsString()
  @MaxLength(4096)
  REDIS_TLS_CA_FILE?: string;

  @IsOptional()
  @Transform(toBool)
  @IsBoolean()
  REDIS_TLS_REJECT_UNAUTHORIZED?: boolean;

  @IsOptional()
  @Transform(emptyToUndefined)
  @Matches(/^[A-Za-z0-9_.-]{1,32}$/, { message: 'must be 1-32 characters of A-Z a-z 0-9 _ . - (no braces or colons)' })
  REDIS_KEY_PREFIX?: string;

  @IsOptional()
  @Transform(toInt)
  @IsInt()
  @Min(10)
  @Max(60_000)
  REDIS_COMMAND_TIMEOUT_MS?: number;

  @IsOptional()
  @Transform(toInt)
  @IsInt()
  @Min(100)
  @Max(120_000)
  REDIS_CONNECT_TIMEOUT_MS?: number;

  @IsOptional()
  @Transform(toInt)
  @IsInt()
  @Min(1)
  @Max(3600)
  REDIS_RETRY_AFTER_S?: number;

  /** Replicas a durable write (one that moves money) waits for before it is acknowledged; 0 waits for none. */
  @IsOptional()
  @Transform(toInt)
  @IsInt()
  @Min(0)
  @Max(16)
  DURABILITY_REPLICAS?: number;

  /** As DURABILITY_REPLICAS, for the message center's writes. Default: DURABILITY_REPLICAS. */
  @IsOptional()
  @Transform(toInt)
  @IsInt()
  @Min(0)
  @Max(16)
  DURABILITY_MESSAGES_REPLICAS?: number;

  /** Longest a durable write waits for its replicas before it is answered WRITE_UNCONFIRMED. */
  @IsOptional()
  @Transform(toInt)
  @IsInt()
  @Min(1)
  @Max(10_000)
  DURABILITY_TIMEOUT_MS?: number;

  /** A separate Redis used only for caches (page caches); unset, caches use the main connection. */
  @IsOptional()
  @Transform(emptyToUndefined)
  @Matches(/^rediss?:\/\/.+/, { message: 'must be a redis:// or rediss:// URL' })
  REDIS_CACHE_URL?: string;

  /** A cache read or write slower than this is given up and treated as a miss. */
  @IsOptional()
  @Transform(toInt)
  @IsInt()
  @Min(5)
  @Max(2000)
  CACHE_COMMAND_TIMEOUT_MS?: number;

  // --- Identities ------------------------------------------------------------
  @IsOptional()
  @Transform(emptyToUndefined)
  @IsIn(['HS256', 'RS256', 'ES256'])
  JWT_ALGORITHM?: 'HS256' | 'RS256' | 'ES256';

  @IsOptional()
  @Transform(emptyToUndefined)
  @IsString()
  @MinLength(32, { message: 'must be at least 32 characters' })
  @MaxLength(4096)
  JWT_SECRET?: string;

  @IsOptional()
  @Transform(emptyToUndefined)
  @IsString()
  @MaxLength(16384)
  JWT_PUBLIC_KEY?: string;

  @IsOptional()
  @Transform(emptyToUndefined)
  @IsString()
  @MaxLength(256)
  JWT_ISSUER?: string;

  @IsOptional()
  @Transform(emptyToUndefined)
  @IsString()
  @MaxLength(256)
  JWT_AUDIENCE?: string;

  @IsOptional()
  @Transform(toInt)
  @IsInt()
  @Min(0)
  @Max(300)
  JWT_CLOCK_TOLERANCE_S?: number;

  @IsOptional()
  @Transform(emptyToUndefined)
  @IsString()
  @MaxLength(65536)
  MERCHANT_SECRETS?: string;

  @IsOptional()
  @Transform(toInt)
  @IsInt()
  @Min(1000)
  @Max(3_600_000)
  MERCHANT_SIGNATURE_WINDOW_MS?: number;

  @IsOptional()
  @Transform(emptyToUndefined)
  @IsString()
  @MaxLength(65536)
  SERVICE_TOKENS?: string;

  @IsOptional()
  @Transform(emptyToUndefined)
  @IsString()
  @MaxLength(65536)
  ADMIN_API_KEYS?: string;

  // --- Rate limits -----------------------------------------------------------
  @IsOptional()
  @Transform(toBool)
  @IsBoolean()
  RATE_LIMIT_ENABLED?: boolean;

  @IsOptional()
  @Transform(toInt)
  @IsInt()
  @Min(100)
  @Max(3_600_000)
  RATE_LIMIT_WINDOW_MS?: number;

  @IsOptional()
  @Transform(toInt)
  @IsInt()
  @Min(1)
  @Max(10_000)
  RATE_LIMIT_MAX_LEASE?: number;

  @IsOptional()
  @Transform(toInt)
  @IsInt()
  @Min(1)
  @Max(10_000_000)
  RATE_LIMIT_USER?: number;

  @IsOptional()
  @Transform(toInt)
  @IsInt()
  @Min(1)
  @Max(10_000_000)
  RATE_LIMIT_MERCHANT?: number;

  @IsOptional()
  @Transform(toInt)
  @IsInt()
  @Min(1)
  @Max(10_000_000)
  RATE_LIMIT_SERVICE?: number;

  @IsOptional()
  @Transform(toInt)
  @IsInt()
  @Min(1)
  @Max(10_000_000)
  RATE_LIMIT_ADMIN?: number;

  @IsOptional()
  @Transform(toInt)
  @IsInt()
  @Min(1)
  @Max(10_000_000)
  RATE_LIMIT_ANONYMOUS?: number;
}
