import { Transform } from 'class-transformer';
import { IsIn, IsInt, IsOptional, Matches, Max, Min } from 'class-validator';
import { defineConfigSlice } from '../../platform/config/config-slice';
import { emptyToUndefined, toInt } from '../../platform/config/env-validation';

/** The orders module's environment variables (see `.env.example`). */
export class OrdersEnv {
  @IsOptional()
  @Transform(toInt)
  @IsInt()
  @Min(2 * 86_400)
  @Max(3650 * 86_400)
  ORDERS_RETENTION_SECONDS?: number;

  @IsOptional()
  @Transform(toInt)
  @IsInt()
  @Min(1000)
  @Max(10_000_000)
  ORDERS_EVENTS_MAXLEN?: number;

  @IsOptional()
  @Transform(toInt)
  @IsInt()
  @Min(10)
  @Max(3_600_000)
  ORDERS_QUERY_DELAY_MS?: number;

  @IsOptional()
  @Transform(toInt)
  @IsInt()
  @Min(0)
  @Max(60_000)
  CHANNEL_LATENCY_MS?: number;

  @IsOptional()
  @Transform(emptyToUndefined)
  @Matches(
    /^(balance|quickpay|points|ebanking)\.(pay|query|reverse)=(success|failure|unknown)(,(balance|quickpay|points|ebanking)\.(pay|query|reverse)=(success|failure|unknown))*$/,
    {
      message: 'must be method.op=outcome[,...]: method balance|quickpay|points|ebanking, op pay|query|reverse, outcome success|failure|unknown',
    },
  )
  CHANNEL_OUTCOMES?: string;

  @IsOptional()
  @Transform(emptyToUndefined)
  @IsIn(['wallet', 'simulated'])
  BALANCE_CHANNEL?: 'wallet' | 'simulated';
}

/** The orders module's settings. Injected by this type. */
export class OrdersConfig {
  /** How long an order and its plans are kept after their last write, ms (the idempotency window of merchantOrderNo). */
  retentionMs!: number;
  /** Approximate most events kept per shard stream. */
  eventsMaxLen!: number;
  /** Delay before the first channel query after an unknown outcome, and the query backoff's first step, ms. */
  queryDelayMs!: number;
  /** Latency of every simulated payment channel, ms. */
  channelLatencyMs!: number;
  /** `method.op` → outcome of the simulated channels (pay, query, reverse); success when absent. */
  channelOutcomes!: ReadonlyMap<string, 'success' | 'failure' | 'unknown'>;
  /** What serves the `balance` method: the payer's wallet (`wallet`), or a simulated channel like the others (`simulated`). */
  balanceChannel!: 'wallet' | 'simulated';
}

/** The orders slice of the configuration: list `ordersConfig.provider` in the module's providers. */
export const ordersConfig = defineConfigSlice({
  name: 'orders',
  token: OrdersConfig,
  schema: OrdersEnv,
  build: (s): OrdersConfig => ({
    retentionMs: (s.ORDERS_RETENTION_SECONDS ?? 90 * 86_400) * 1000,
    eventsMaxLen: s.ORDERS_EVENTS_MAXLEN ?? 100_000,
    queryDelayMs: s.ORDERS_QUERY_DELAY_MS ?? 2000,
    channelLatencyMs: s.CHANNEL_LATENCY_MS ?? 20,
    channelOutcomes: new Map(
      (s.CHANNEL_OUTCOMES ?? '')
        .split(',')
        .filter(Boolean)
        .map((e) => e.split('=') as [string, 'success' | 'failure' | 'unknown']),
    ),
    balanceChannel: s.BALANCE_CHANNEL ?? 'wallet',
  }),
});
