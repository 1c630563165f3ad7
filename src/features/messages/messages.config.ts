import { Transform } from 'class-transformer';
import { IsInt, IsOptional, Matches, Max, Min } from 'class-validator';
import { ConfigError } from '../../platform/config/config.error';
import { defineConfigSlice } from '../../platform/config/config-slice';
import { emptyToUndefined, toInt } from '../../platform/config/env-validation';
import { PENDING_ACTION_TYPES } from './pending-action.types';

/** The message center's environment variables (see `.env.example`). */
export class MessagesEnv {
  @IsOptional()
  @Transform(toInt)
  @IsInt()
  @Min(10)
  @Max(100_000)
  MESSAGES_MAX_PER_ACCOUNT?: number;

  @IsOptional()
  @Transform(toInt)
  @IsInt()
  @Min(1)
  @Max(3650 * 86_400)
  MESSAGES_RETENTION_SECONDS?: number;

  @IsOptional()
  @Transform(emptyToUndefined)
  @Matches(/^[A-Z][A-Z0-9_]{0,31}:\d{1,9}(,[A-Z][A-Z0-9_]{0,31}:\d{1,9})*$/, {
    message: 'must be TYPE:delayMs[,TYPE:delayMs...] with upper-case types',
  })
  PENDING_ACTION_DELAYS?: string;
}

/** The message center's settings. Injected by this type. */
export class MessagesConfig {
  /** Most messages an account keeps (the newest). */
  maxPerAccount!: number;
  /** How long a message is kept, ms. */
  retentionMs!: number;
  /** Reminder delay per pending-action type, ms (overrides of the built-in defaults). */
  pendingActionDelays!: ReadonlyMap<string, number>;
}

/** The messages slice of the configuration: list `messagesConfig.provider` in the module's providers. */
export const messagesConfig = defineConfigSlice({
  name: 'messages',
  token: MessagesConfig,
  schema: MessagesEnv,
  build: (s): MessagesConfig => {
    const pendingActionDelays = new Map(
      (s.PENDING_ACTION_DELAYS ?? '')
        .split(',')
        .filter(Boolean)
        .map((e) => [e.split(':')[0], Number(e.split(':')[1])] as const),
    );
    for (const name of pendingActionDelays.keys()) {
      if (!PENDING_ACTION_TYPES[name])
        throw new ConfigError('PENDING_ACTION_DELAYS', `names ${name}, which is not an action type (${Object.keys(PENDING_ACTION_TYPES).join(', ')})`);
    }
    return {
      maxPerAccount: s.MESSAGES_MAX_PER_ACCOUNT ?? 1000,
      retentionMs: (s.MESSAGES_RETENTION_SECONDS ?? 90 * 86_400) * 1000,
      pendingActionDelays,
    };
  },
});
