import type { RetryPolicyInput } from '../../engines/workers/retry-policy';
import type { OrderEventType, OrderStatus } from './order.types';

/** One event from a shard stream, as handed to a consumer. */
export interface OrderEvent {
  /** The stream entry id (unique within its shard). */
  id: string;
  /** The shard stream's key. */
  stream: string;
  type: OrderEventType;
  /** When the state changed (Redis clock, epoch ms). */
  at: number;
  orderId: string;
  merchantId: string;
  merchantOrderNo: string;
  amount: number;
  currency: string;
  /** The order's status and version right after the change. */
  status: OrderStatus;
  version: number;
  expiresAt: number;
  accountId?: string;
  paidPlanId?: string;
  closeReason?: string;
}

export type OrderEventHandler = (event: OrderEvent) => Promise<void>;

export interface ConsumeOptions {
  /** This consumer's name within the group; default host-pid-random. Keep it stable across restarts to resume its own pending entries at once. */
  consumer?: string;
  /** Entries read per shard per round. Default 50. */
  batchSize?: number;
  /**
   * Events of one shard's batch handled at once, 1 to 1000. Default 1: one at a time, in stream order. Above 1,
   * events of one shard may be handled out of order: only for a handler that does not depend on it.
   */
  concurrency?: number;
  /** No longer used: reads block until an event arrives (see StreamGroupRunner). Kept so existing callers compile. */
  pollMs?: number;
  /**
   * The retry policy (src/engines/workers/retry-policy.ts): `visibilityMs`, entries pending this long (their consumer died, or
   * the handler failed) are taken over, default 30000; `attempts`, deliveries of one event before it is given up:
   * acked, recorded on the shard's dead-events stream (OrderEventsService.deadStreams(), capped) with the group, the
   * error and the event, counted as `dead` and logged, default 20; `backoff`, see StreamGroupOptions.retry.
   */
  retry?: RetryPolicyInput;
  /** Where a new group starts: `beginning` (every retained event, default) or `now`. An existing group keeps its position. */
  startFrom?: 'beginning' | 'now';
}

/** A running consumer. */
export interface EventConsumer {
  readonly group: string;
  readonly consumer: string;
  /** Stops reading and waits for the handler in hand; what it did not ack stays pending for the group. */
  stop(): Promise<void>;
}

/** A stream entry's fields as the write-4 script stores them. */
export function toOrderEvent(stream: string, id: string, fields: string[]): OrderEvent {
  const f: Record<string, string> = {};
  for (let i = 0; i + 1 < fields.length; i += 2) f[fields[i]] = fields[i + 1];
  return {
    id,
    stream,
    type: f.type as OrderEventType,
    at: Number(f.at),
    orderId: f.orderId,
    merchantId: f.merchantId,
    merchantOrderNo: f.merchantOrderNo,
    amount: Number(f.amount),
    currency: f.currency,
    status: f.status as OrderStatus,
    version: Number(f.version),
    expiresAt: Number(f.expiresAt),
    ...(f.accountId ? { accountId: f.accountId } : {}),
    ...(f.paidPlan ? { paidPlanId: f.paidPlan } : {}),
    ...(f.closeReason ? { closeReason: f.closeReason } : {}),
  };
}
