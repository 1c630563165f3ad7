import type { AcquireOptions } from '../../engines/locks/lock.types';

/**
 * The orders module's lock resources: how its two locks are named and which
 * lock business each is taken under. OrdersService, PaymentPlansService and
 * PaymentRunner take their locks through these and nothing else.
 */

/** The lock guarding one master order (plan creation, close, expiry). */
export const orderLockName = (orderId: string): string => `order:${orderId}`;

/** The lock guarding one payment plan (paying, queries, reversals). */
export const planLockName = (planId: string): string => `plan:${planId}`;

/** How the order lock is taken: under the `order` business's lease and wait. */
export const ORDER_LOCK: Readonly<AcquireOptions> = { policy: 'order' };

/** How the plan lock is taken: under the `payment-plan` business's lease and wait. */
export const PLAN_LOCK: Readonly<AcquireOptions> = { policy: 'payment-plan' };
