import { Transform } from 'class-transformer';
import { IsInt, IsOptional, Matches, Max, Min } from 'class-validator';
import { defineConfigSlice } from '../../platform/config/config-slice';
import { emptyToUndefined, toInt } from '../../platform/config/env-validation';
import type { LockPolicy } from './lock.types';

/** The lock engine's environment variables (see `.env.example`). */
export class LocksEnv {
  @IsOptional()
  @Transform(emptyToUndefined)
  @Matches(/^[a-z][a-z0-9-]{0,31}:\d{1,8}:\d{1,8}(,[a-z][a-z0-9-]{0,31}:\d{1,8}:\d{1,8})*$/, {
    message: 'must be business:leaseMs:waitMs[,business:leaseMs:waitMs...] with lower-case business names',
  })
  LOCK_POLICIES?: string;

  @IsOptional()
  @Transform(toInt)
  @IsInt()
  @Min(10)
  @Max(60_000)
  LOCK_WAKE_CHECK_MS?: number;
}

/** The lock engine's settings. Injected by this type. */
export class LocksConfig {
  /** LOCK_POLICIES: lease and wait per business, overriding what the modules declare. */
  policies!: ReadonlyMap<string, LockPolicy>;
  /** A waiter checks the lock again at least this often, even if no release message arrives, ms. */
  wakeCheckMs!: number;
}

/** The locks slice of the configuration: `locksConfig.provider` is in the engine's providers. */
export const locksConfig = defineConfigSlice({
  name: 'locks',
  token: LocksConfig,
  schema: LocksEnv,
  build: (s): LocksConfig => ({
    policies: new Map(
      (s.LOCK_POLICIES ?? '')
        .split(',')
        .filter(Boolean)
        .map((e) => e.split(':'))
        .map(([name, lease, wait]) => [name, { leaseMs: Number(lease), waitMs: Number(wait) }] as const),
    ),
    wakeCheckMs: s.LOCK_WAKE_CHECK_MS ?? 250,
  }),
});
