import { Transform } from 'class-transformer';
import { IsInt, IsOptional, Max, Min } from 'class-validator';
import { defineConfigSlice } from '../config/config-slice';
import { toInt } from '../config/env-validation';

/** The red envelopes' environment variables (see `.env.example`). */
export class RedEnvelopeEnv {
  @IsOptional()
  @Transform(toInt)
  @IsInt()
  @Min(1)
  @Max(10_000_000)
  RED_ENVELOPE_MAX_COUNT?: number;

  @IsOptional()
  @Transform(toInt)
  @IsInt()
  @Min(1)
  @Max(64)
  RED_ENVELOPE_MAX_SUBPOOLS?: number;

  @IsOptional()
  @Transform(toInt)
  @IsInt()
  @Min(1)
  @Max(1000)
  RED_ENVELOPE_CREDIT_CONCURRENCY?: number;

  @IsOptional()
  @Transform(toInt)
  @IsInt()
  @Min(1)
  @Max(1000)
  RED_ENVELOPE_CREDIT_MAX_DELIVERIES?: number;

  @IsOptional()
  @Transform(toInt)
  @IsInt()
  @Min(100)
  @Max(600_000)
  RED_ENVELOPE_CREDIT_RETRY_MS?: number;

  @IsOptional()
  @Transform(toInt)
  @IsInt()
  @Min(100)
  @Max(3_600_000)
  RED_ENVELOPE_CREDIT_RETRY_MAX_MS?: number;

  @IsOptional()
  @Transform(toInt)
  @IsInt()
  @Min(60)
  @Max(90 * 86_400)
  RED_ENVELOPE_LIVE_RETENTION_SECONDS?: number;

  @IsOptional()
  @Transform(toInt)
  @IsInt()
  @Min(1000)
  @Max(600_000)
  RED_ENVELOPE_RESUME_AFTER_MS?: number;

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

export const redEnvelopeConfig = defineConfigSlice({
  name: 'red-envelope',
  token: RedEnvelopeConfig,
  schema: RedEnvelopeEnv,
  build: (s): RedEnvelopeConfig => ({
    maxCount: s.RED_ENVELOPE_MAX_COUNT ?? 1_000_000,
    maxSubPools: s.RED_ENVELOPE_MAX_SUBPOOLS ?? 16,
    creditConcurrency: s.RED_ENVELOPE_CREDIT_CONCURRENCY ?? 200,
    creditMaxDeliveries: s.RED_ENVELOPE_CREDIT_MAX_DELIVERIES ?? 10,
    creditRetryMs: s.RED_ENVELOPE_CREDIT_RETRY_MS ?? 5000,
    creditRetryMaxMs: s.RED_ENVELOPE_CREDIT_RETRY_MAX_MS ?? 60_000,
    liveRetentionMs: (s.RED_ENVELOPE_LIVE_RETENTION_SECONDS ?? 7 * 86_400) * 1000,
    resumeAfterMs: s.RED_ENVELOPE_RESUME_AFTER_MS ?? 60_000,
    jobVisibilityMs: s.RED_ENVELOPE_JOB_VISIBILITY_MS ?? 120_000,
  }),
});
