import type { RetryPolicyInput } from '../workers/retry-policy';

/**
 * Public types of the delay-queue engine: "do X at time T unless it is
 * cancelled first", shared by every module. See README "Delay queue".
 */

/** Where an item is. `absent` = never scheduled, acknowledged or cancelled. */
export type ItemState = 'pending' | 'ready' | 'in-flight' | 'dead' | 'absent';

/** When an item is due: an absolute time (epoch ms or Date), or a delay measured on the Redis server's clock. */
export type When = { dueAt: number | Date } | { delayMs: number };

export interface ScheduleOptions {
  /**
   * What to do when (queue, id) already exists (pending, ready, in flight or dead):
   * `replace` (default) sets the new due time and payload, `keep` leaves the existing entry untouched.
   */
  ifExists?: 'replace' | 'keep';
}

export interface ScheduleResult {
  /** True when this call created or replaced the entry; false when `keep` found one. */
  written: boolean;
  /** False when an entry for the id already existed (it was replaced or kept). */
  created: boolean;
  /**
   * The entry's due time in epoch ms after the call. For an entry `keep` found in flight or dead:
   * its visibility deadline or time of death.
   */
  dueAt: number;
}

export interface CancelResult {
  /**
   * True when the item was pending or ready: no live delivery held it, and none ever will.
   * It may still have been delivered before (a retry waiting for its backoff): see `attempts`.
   */
  wasPending: boolean;
  /** Where the item was when the cancel landed. `in-flight`: a handler held it; its `signal` aborts and `stillWanted()` turns false. */
  state: ItemState;
  /** Deliveries the item had before the cancel; 0 means no handler ever ran on it. */
  attempts: number;
}

export interface ItemView<T = unknown> {
  id: string;
  state: Exclude<ItemState, 'absent'>;
  /** Due time for pending/ready items, visibility deadline for in-flight ones, time of death for dead ones (epoch ms). */
  at: number;
  payload: T;
  /** Deliveries so far. */
  attempts: number;
  /** The last handler error, for items that failed at least once. */
  lastError?: string;
}

export interface QueueStats {
  queue: string;
  pending: number;
  ready: number;
  inFlight: number;
  dead: number;
  /** How long ago (ms, Redis clock) the oldest due-but-unclaimed item came due; 0 when none is overdue. */
  oldestOverdueMs: number;
  /** Due time of the earliest pending item, or null. */
  nextDueAt: number | null;
}

export interface DeadLetter<T = unknown> {
  id: string;
  payload: T;
  attempts: number;
  lastError: string;
  diedAt: number;
}

export interface Page<T> {
  items: T[];
  total: number;
  offset: number;
  limit: number;
}

/** What a handler receives with each delivery. */
export interface Delivery<T = unknown> {
  queue: string;
  id: string;
  payload: T;
  /** 1 on the first delivery. */
  attempt: number;
  /**
   * This delivery's fencing token: unique and increasing per queue, never reused even when the id is
   * cancelled and scheduled again. A downstream write can refuse a token older than one it has seen.
   */
  token: number;
  /** When the item was due (epoch ms). */
  dueAt: number;
  /**
   * The Redis clock now (epoch ms), estimated without a round trip: the claim's Redis time plus the
   * local time elapsed since its reply. For rendering and early checks; a decision that must hold on
   * the Redis clock belongs in a script.
   */
  serverNow(): number;
  /** Aborted when the item is cancelled, the delivery is lost (visibility expired) or the worker stops. */
  signal: AbortSignal;
  /**
   * One atomic check in Redis: is this delivery still the live one (not cancelled, not redelivered)?
   * It also extends the visibility deadline. Call it right before an irreversible side effect.
   */
  stillWanted(): Promise<boolean>;
}

export type Handler<T = unknown> = (delivery: Delivery<T>) => Promise<void>;

export interface ProcessOptions {
  /** Handlers run at once in this instance. Default 10, at most 1000. */
  concurrency?: number;
  /**
   * The retry policy (src/engines/workers/retry-policy.ts): `attempts`, deliveries before an item goes to dead-letter (default
   * 5, at most 1000); `backoff`, the wait before a failed item is delivered again (default 1 s doubling to 5 min);
   * `visibilityMs`, a delivery not acked, failed or extended within this time is delivered again (default 30000, at
   * least 1000).
   */
  retry?: RetryPolicyInput;
  /** Fallback poll, ms, jittered down to half; at most 1000. Default 1000. */
  pollMs?: number;
  /**
   * A handler still running after this long counts as a failed delivery (retry or dead-letter) and its
   * slot is freed; its signal aborts. Default 300000. Keeps a hung handler from holding an item forever.
   */
  handlerTimeoutMs?: number;
  /**
   * Most items one claim script call hands out, 1 to 1000. Default 100: a call claiming 100 stays
   * around a few milliseconds inside Redis. Never more than the free handler slots.
   */
  claimBatch?: number;
  /** Most due items one claim script call moves to ready (and lost deliveries it requeues), 10 to 1000. Default 1000. */
  promoteBatch?: number;
}

export interface Processor {
  readonly queue: string;
  /** Stops claiming, waits for running handlers (up to the grace), hands unfinished items back. */
  stop(): Promise<void>;
}
