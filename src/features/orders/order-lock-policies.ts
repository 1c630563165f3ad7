import type { LockPolicyDeclarations } from '../../engines/locks/lock-policies';

/**
 * The lock policies of the orders module, registered by OrdersModule with
 * `LocksModule.forFeature`. LOCK_POLICIES overrides either by name.
 */
export const ORDER_LOCK_POLICIES = {
  /** A master order (create, close, expire): short critical sections, refused rather than queued. */
  order: { leaseMs: 10_000, waitMs: 0 },
  /** A payment plan's run: channel calls happen under it, so its lease is longer. */
  'payment-plan': { leaseMs: 30_000, waitMs: 0 },
} as const satisfies LockPolicyDeclarations;
