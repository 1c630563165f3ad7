import type { SPREAD_TAGS } from '../../platform/redis/slot-tags';

/** FUNDING (the sponsor's debit under way) → LOADING → READY (→ OPEN, in the window) → ENDED → SETTLED. */
export type StoredState = 'FUNDING' | 'LOADING' | 'READY' | 'ENDED' | 'SETTLED';
export type ActivityState = StoredState | 'OPEN';

/** An activity as stored (times epoch ms, amounts minor units). */
export interface ActivityRecord {
  activityId: string;
  sponsorMerchantId: string;
  title: string;
  currency: string;
  totalAmount: number;
  count: number;
  minAmount: number;
  perUserLimit: number;
  subPools: number;
  /**
   * How its sub-pools' hash tags are made: 2, spread over equal slot ranges (src/platform/redis/slot-tags.ts), for activities
   * created since; absent, the first tags (the sub-pool's number), kept by activities created before.
   */
  tags?: typeof SPREAD_TAGS;
  startsAt: number;
  endsAt: number;
  /** The split's seed: the same seed gives the same amounts (for audit). */
  seed: string;
  fingerprint: string;
  state: StoredState;
  /** Envelopes written to the staging lists so far. */
  loaded: number;
  createdAt: number;
  readyAt?: number;
  endedAt?: number;
  settledAt?: number;
  /** Left over at the end and credited back to the sponsor. */
  refundedAmount?: number;
}

/** One sub-pool's counters (see lua/features/red-envelope/includes/red-envelope-pool.lua). */
export interface PoolStats {
  armed: boolean;
  loadedCount: number;
  loadedAmount: number;
  leftCount: number;
  leftAmount: number;
  grabbedCount: number;
  grabbedAmount: number;
  pendingCount: number;
  pendingAmount: number;
  creditedCount: number;
  creditedAmount: number;
  deadCount: number;
  deadAmount: number;
  refundedCount: number;
  refundedAmount: number;
}

export type GrabStatus = 'GRABBED' | 'ALREADY_GRABBED' | 'NONE_LEFT' | 'NOT_STARTED' | 'ENDED';

export interface GrabResult {
  status: GrabStatus;
  envelopeId?: string;
  amount?: number;
}

/** A step of a rain that cannot advance: which, why (the first cause seen), and since when (epoch ms). */
export interface Stall {
  step: 'funding' | 'load' | 'end' | 'refund' | 'credit';
  reason: string;
  since: number;
}
