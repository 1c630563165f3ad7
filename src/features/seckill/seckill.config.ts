import { Transform } from 'class-transformer';
import { IsInt, IsOptional, Max, Min } from 'class-validator';
import { defineConfigSlice } from '../../platform/config/config-slice';
import { toInt } from '../../platform/config/env-validation';
import { Setting, settingsSlice } from '../../platform/config/settings';

/** Most shards of one product the API takes (the OpenAPI document's maximum); SECKILL_MAX_SHARDS may only lower it. */
export const MAX_SHARDS = 16;

/** The flash sales' environment variables (see `.env.example`). */
export class SeckillEnv {
  @Setting<SeckillConfig>('listingTtlMs', 2000)
  @IsOptional()
  @Transform(toInt)
  @IsInt()
  @Min(200)
  @Max(60_000)
  SECKILL_LISTING_TTL_MS?: number;

  @Setting<SeckillConfig>('soldOutMemoryMs', 5000)
  @IsOptional()
  @Transform(toInt)
  @IsInt()
  @Min(0)
  @Max(60_000)
  SECKILL_SOLD_OUT_MEMORY_MS?: number;

  @Setting<SeckillConfig>('safetyNetGraceMs', 1, 1000)
  @IsOptional()
  @Transform(toInt)
  @IsInt()
  @Min(1)
  @Max(3600)
  SECKILL_SAFETY_NET_GRACE_SECONDS?: number;

  @Setting<SeckillConfig>('safetyNetSweepMs', 1000)
  @IsOptional()
  @Transform(toInt)
  @IsInt()
  @Min(100)
  @Max(600_000)
  SECKILL_SAFETY_NET_SWEEP_MS?: number;

  @Setting<SeckillConfig>('liveRetentionMs', 7 * 86_400, 1000)
  @IsOptional()
  @Transform(toInt)
  @IsInt()
  @Min(60)
  @Max(90 * 86_400)
  SECKILL_LIVE_RETENTION_SECONDS?: number;

  @Setting<SeckillConfig>('resultsRetentionMs', 90, 86_400_000)
  @IsOptional()
  @Transform(toInt)
  @IsInt()
  @Min(1)
  @Max(365)
  SECKILL_RESULTS_RETENTION_DAYS?: number;

  @Setting<SeckillConfig>('maxProducts', 10_000)
  @IsOptional()
  @Transform(toInt)
  @IsInt()
  @Min(1)
  @Max(100_000)
  SECKILL_MAX_PRODUCTS?: number;

  @Setting<SeckillConfig>('maxShards', MAX_SHARDS)
  @IsOptional()
  @Transform(toInt)
  @IsInt()
  @Min(1)
  @Max(MAX_SHARDS)
  SECKILL_MAX_SHARDS?: number;

  @Setting<SeckillConfig>('eventConcurrency', 32)
  @IsOptional()
  @Transform(toInt)
  @IsInt()
  @Min(1)
  @Max(1000)
  SECKILL_EVENT_CONCURRENCY?: number;
}

/** The flash sales' settings. Injected by this type. */
export class SeckillConfig {
  /** How long a listing page is cached (and so how stale its `available` may be), ms. */
  listingTtlMs!: number;
  /** How long an instance refuses a product it saw sold out without asking Redis, unless a restock message comes first, ms (0: never). */
  soldOutMemoryMs!: number;
  /** A reservation not settled this long after its expiry is released by the safety net, ms. */
  safetyNetGraceMs!: number;
  /** How often the safety net sweeps the product shards' due sets (one instance at a time), ms. */
  safetyNetSweepMs!: number;
  /** How long an activity's live keys (stock, reservations) are kept after its end, ms. */
  liveRetentionMs!: number;
  /** How long an activity's results are kept, ms. */
  resultsRetentionMs!: number;
  /** Most products of one activity. */
  maxProducts!: number;
  /** Most shards of one product. */
  maxShards!: number;
  /** Order events handled at once per shard by one instance. */
  eventConcurrency!: number;
}

/** The flash-sale slice of the configuration: list `seckillConfig.provider` in the module's providers. */
export const seckillConfig = defineConfigSlice(settingsSlice('seckill', SeckillConfig, SeckillEnv));
