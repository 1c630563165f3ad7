/**
 * Public types of the lock engine (`LockService`), shared by every module.
 * See README "Locks".
 */

/** `write` is the exclusive lock; `read` locks share with each other and exclude a writer. */
export type LockMode = 'write' | 'read';

/** Lease and wait time of one business (set per business, not globally). */
export interface LockPolicy {
  /** How long a hold lasts without renewal, ms. */
  leaseMs: number;
  /** How long an acquire waits for a contended lock, ms (0: try once). */
  waitMs: number;
}

export interface AcquireOptions {
  /** Business whose policy gives the defaults for leaseMs/waitMs (LOCK_POLICIES); `default` when absent. */
  policy?: string;
  leaseMs?: number;
  waitMs?: number;
  mode?: LockMode;
  /**
   * The owner token. Default: the owner this async call chain already holds `name` with
   * (reentrancy through AsyncLocalStorage), else a fresh unique token for this logical operation.
   */
  owner?: string;
  /** Renew the lease while held (default true). HTTP callers, which renew themselves, pass false. */
  watchdog?: boolean;
  /** Stops waiting (LockContendedError) when aborted. */
  signal?: AbortSignal;
}

/** One hold on a lock. Release it exactly once (withLock does). */
export interface LockHandle {
  readonly name: string;
  readonly owner: string;
  readonly mode: LockMode;
  /**
   * Increases with every new hold of this lock (never reissued, even across lease expiry, key
   * deletion or a failover): a downstream write that remembers the highest token it has seen
   * refuses a stale holder. A reentrant acquire returns the owner's current token.
   */
  readonly fencingToken: number;
  /** The lease's end on the Redis clock (epoch ms), as of the acquire or the last renewal. */
  readonly expiresAt: number;
  /** The owner's hold count after this acquire (1 for a first hold). */
  readonly holdCount: number;
  /** Aborted, with a LockLostError as its reason, when the lock is lost (lease expired, taken over). */
  readonly signal: AbortSignal;
  /** Gives this hold back (the hold count drops by one; at zero the lock is free and waiters wake). Idempotent. */
  release(): Promise<void>;
}

/** What `inspect` reports. */
export interface LockState {
  name: string;
  mode: LockMode;
  holders: Array<{ owner: string; count: number; expiresAt: number }>;
  /** Time left on the key, ms. */
  ttlMs: number;
  /** The newest fencing token issued for this lock. */
  fencingToken: number;
}
