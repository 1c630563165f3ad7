import { Transform } from 'class-transformer';
import { IsInt, IsOptional, Max, Min } from 'class-validator';
import { defineConfigSlice } from '../../platform/config/config-slice';
import { toInt } from '../../platform/config/env-validation';

/** The close reminders' environment variables (see `.env.example`). */
export class CloseReminderEnv {
  @IsOptional()
  @Transform(toInt)
  @IsInt()
  @Min(1)
  @Max(1000)
  CLOSE_REMINDER_SEND_CONCURRENCY?: number;

  @IsOptional()
  @Transform(toInt)
  @IsInt()
  @Min(1)
  @Max(1000)
  CLOSE_REMINDER_CLAIM_BATCH?: number;

  @IsOptional()
  @Transform(toInt)
  @IsInt()
  @Min(10)
  @Max(1000)
  CLOSE_REMINDER_PROMOTE_BATCH?: number;

  @IsOptional()
  @Transform(toInt)
  @IsInt()
  @Min(1)
  @Max(1000)
  CLOSE_REMINDER_EVENT_CONCURRENCY?: number;

  @IsOptional()
  @Transform(toInt)
  @IsInt()
  @Min(0)
  @Max(3600)
  CLOSE_REMINDER_MIN_LEFT_SECONDS?: number;

  @IsOptional()
  @Transform(toInt)
  @IsInt()
  @Min(3600)
  @Max(90 * 86_400)
  CLOSE_REMINDER_RECORD_RETENTION_SECONDS?: number;

  @IsOptional()
  @Transform(toInt)
  @IsInt()
  @Min(1)
  @Max(3600)
  CLOSE_REMINDER_VISIBILITY_TIMEOUT_SECONDS?: number;

  @IsOptional()
  @Transform(toInt)
  @IsInt()
  @Min(1)
  @Max(3600)
  CLOSE_REMINDER_EVENT_TAKEOVER_SECONDS?: number;
}

/** The close reminders' settings. Injected by this type. */
export class CloseReminderConfig {
  /** Reminders sent at once by one instance (handlers in flight). */
  sendConcurrency!: number;
  /** Most reminders one claim script call hands out (the work per script call). */
  claimBatch!: number;
  /** Most due reminders one claim script call moves to ready (the other bound on one call's time inside Redis). */
  promoteBatch!: number;
  /** Order events of one shard handled at once by one instance. */
  eventConcurrency!: number;
  /** A reminder whose due time has passed when its order.created is handled is still sent while this much is left before the close, ms. */
  minLeftMs!: number;
  /** How long an order's reminder record is kept after the order's close time, ms (for ops). */
  recordRetentionMs!: number;
  /** A reminder claimed by an instance that dies (or stalls) this long without finishing is sent by another, ms. */
  visibilityTimeoutMs!: number;
  /**
   * The shortest lead a merchant may set, s: the least time left for a late reminder (`minLeftMs`) plus the
   * visibility timeout, so an order.created handled up to a visibility timeout late is still reminded, and a
   * reminder whose sender died is sent again by another instance with `minLeftMs` still left before the close.
   */
  minLeadSeconds!: number;
  /** An order event held by a consumer that died (or whose handler failed) is taken over after this long idle, ms. */
  eventTakeoverMs!: number;
}

/** The shortest lead the settings DTO accepts, whatever the other settings: 30 s. */
export const LEAD_FLOOR_SECONDS = 30;

/** The close-reminder slice of the configuration: list `closeReminderConfig.provider` in the module's providers. */
export const closeReminderConfig = defineConfigSlice({
  name: 'close-reminder',
  token: CloseReminderConfig,
  schema: CloseReminderEnv,
  build: (s): CloseReminderConfig => ({
    minLeadSeconds: Math.max(LEAD_FLOOR_SECONDS, (s.CLOSE_REMINDER_MIN_LEFT_SECONDS ?? 60) + (s.CLOSE_REMINDER_VISIBILITY_TIMEOUT_SECONDS ?? 30)),
    sendConcurrency: s.CLOSE_REMINDER_SEND_CONCURRENCY ?? 200,
    claimBatch: s.CLOSE_REMINDER_CLAIM_BATCH ?? 100,
    promoteBatch: s.CLOSE_REMINDER_PROMOTE_BATCH ?? 250,
    eventConcurrency: s.CLOSE_REMINDER_EVENT_CONCURRENCY ?? 32,
    minLeftMs: (s.CLOSE_REMINDER_MIN_LEFT_SECONDS ?? 60) * 1000,
    recordRetentionMs: (s.CLOSE_REMINDER_RECORD_RETENTION_SECONDS ?? 86_400) * 1000,
    visibilityTimeoutMs: (s.CLOSE_REMINDER_VISIBILITY_TIMEOUT_SECONDS ?? 30) * 1000,
    eventTakeoverMs: (s.CLOSE_REMINDER_EVENT_TAKEOVER_SECONDS ?? 30) * 1000,
  }),
});
