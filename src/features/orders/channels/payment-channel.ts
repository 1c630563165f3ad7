import type { PaymentMethod } from '../order.types';

/** What a channel answered. `unknown`: it may or may not have happened (a timeout, an ambiguous code). */
export type ChannelOutcome = 'success' | 'failure' | 'unknown';
export const CHANNEL_OUTCOMES: readonly ChannelOutcome[] = ['success', 'failure', 'unknown'];
export type ChannelOp = 'pay' | 'query' | 'reverse';

/** Who pays a leg, and in which currency (the plan's): what a channel that holds accounts, such as the wallet, needs. */
export interface Payer {
  accountId: string;
  currency: string;
}

/**
 * One payment channel (balance, quick pay, points, e-banking). Every call is
 * idempotent on `ref`, the instruction's reference (`legReference`): a retried pay or reverse
 * of the same ref moves money at most once. Never called inside a Redis
 * script or transaction.
 */
export interface PaymentChannel {
  readonly method: PaymentMethod;
  pay(ref: string, amount: number): Promise<ChannelOutcome>;
  /** The outcome of an earlier pay of `ref`. */
  query(ref: string): Promise<ChannelOutcome>;
  /** Gives back the money of a succeeded pay of `ref`. */
  reverse(ref: string, amount: number): Promise<ChannelOutcome>;
}

/** How a simulated channel behaves: its latency and the outcome of each operation. */
export interface ChannelSettings {
  latencyMs: number;
  pay: ChannelOutcome;
  query: ChannelOutcome;
  reverse: ChannelOutcome;
}
