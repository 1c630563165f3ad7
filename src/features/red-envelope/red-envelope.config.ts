import { Transform } from 'class-transformer';
import { IsInt, IsOptional, Max, Min } from 'class-validator';
import { defineConfigSlice } from '../../platform/config/config-slice';
import { toInt } from '../../platform/config/env-validation';
import { Setting, settingsSlice } from '../../platform/config/settings';

/** The red envelopes' environment variables (see `.env.example`). */
export class RedEnvelopeEnv {
  @Setting<RedEnvelopeConfig>('maxCount', 1_000_000)
  @IsOptional()
  @Transform(toInt)
  @IsInt()
  @Min(1)
  @Max(10_000_000)
  RED_ENVELOPE_MAX_COUNT?: number;

  @Setting<RedEnvelopeConfig>('maxSubPools', 16)
  @IsOptional()
  @Transform(toInt)
  @IsInt()
  @Min(1)
  @Max(64)
  RED_ENVELOPE_MAX_SUBPOOLS?: number;

  @Setting<RedEnvelopeConfig>('creditConcurrency', 200)
  @IsOptional()
  @Transform(toInt)
  @IsInt()
  @Min(1)
  @Max(1000)
  RED_ENVELOPE_CREDIT_CONCURRENCY?: number;

  @Setting<RedEnvelopeConfig>('creditMaxDeliveries', 10)
  @IsOptional()
  @Transform(toInt)
  @IsInt()
  @Min(1)
  @Max(1000)
  RED_ENVELOPE_CREDIT_MAX_DELIVERIES?: number;

  @Setting<RedEnvelopeConfig>('creditRetryMs', 5000)
  @IsOptional()
  @Transform(toInt)
  @IsInt()
  @Min(100)
  @Max(600_000)
  RED_ENVELOPE_CREDIT_RETRY_MS?: number;

  @Setting<RedEnvelopeConfig>('creditRetryMaxMs', 60_000)
  @IsOptional()
  @Transform(toInt)
  @IsInt()
  @Min(100)
  @Max(3_600_000)
  RED_ENVELOPE_CREDIT_RETRY_MAX_MS?: number;

  @Setting<RedEnvelopeConfig>('liveRetentionMs', 7 * 86_400, 1000)
  @IsOptional()
  @Transform(toInt)
  @IsInt()
  @Min(60)
  @Max(90 * 86_400)
  RED_ENVELOPE_LIVE_RETENTION_SECONDS?: number;

  @Setting<RedEnvelopeConfig>('resumeAfterMs', 60_000)
  @IsOptional()
  @Transform(toInt)
  @IsInt()
  @Min(1000)
  @Max(600_000)
  RED_ENVELOPE_RESUME_AFTER_MS?: number;

  @Setting<RedEnvelopeConfig>('jobVisibilityMs', 120_000)
  @IsOptional()
  @Transform(toInt)
  @IsInt()
  @Min(1000)
  @Max(3_600_000)
  RED_ENVELOPE_JOB_VISIBILITY_MS?: number;
}

/** The red envelopes' settings. Injected by this type. */
export class RedEnvelopeConfig {
  /** Most envelopes in one activity. */
  maxCount!: number;
  /** Most sub-pools of one activity. */
  maxSubPools!: number;
  /** Grabs credited at once per sub-pool by one instance (a read brings at most 200: more does nothing). */
  creditConcurrency!: number;
  /** Deliveries of a grab's crediting before it goes to the dead-letter stream. */
  creditMaxDeliveries!: number;
  /** A failed (or abandoned) crediting is tried again after this long, ms. */
  creditRetryMs!: number;
  /** The retries of a failed crediting back off, doubling from creditRetryMs up to this, ms. */
  creditRetryMaxMs!: number;
  /** An activity's keys are kept this long after its end, ms. */
  liveRetentionMs!: number;
  /** A create or load that has not finished this long after it began is taken up again by its job, ms. */
  resumeAfterMs!: number;
  /** A rain job (load, end) taken by an instance that died is delivered again after this long, ms. */
  jobVisibilityMs!: number;
}

export const redEnvelopeConfig = defineConfigSlice(settingsSlice('red-envelope', RedEnvelopeConfig, RedEnvelopeEnv));
