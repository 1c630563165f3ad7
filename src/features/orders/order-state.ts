import type { OrderStatus, PlanStatus } from './order.types';

/**
 * The state machines of master orders and payment plans: for every status and
 * every action, the status it leads to or the reason it is refused. Pure, so
 * it is unit-tested exhaustively; the services ask it instead of repeating the
 * rules (the write-4 compare-and-set still refuses a record that changed since
 * it was read).
 */

/** What can happen to a master order. */
export const ORDER_ACTIONS = ['createPlan', 'startPayment', 'paymentSucceeded', 'paymentFailed', 'close'] as const;
export type OrderAction = (typeof ORDER_ACTIONS)[number];

/** What can happen to a payment plan: `pay` is a pay request (it starts a PENDING plan and carries a PAYING one on). */
export const PLAN_ACTIONS = ['pay', 'supersede', 'cancel', 'succeed', 'fail'] as const;
export type PlanAction = (typeof PLAN_ACTIONS)[number];

/**
 * Why an action is refused. The first four are answers a caller gets (the conflict codes of
 * order.errors.ts); ILLEGAL is an action that the services never ask for in that state.
 */
export type Refusal = 'ORDER_PAID' | 'ORDER_CLOSED' | 'ORDER_PAYING' | 'PLAN_NOT_PAYABLE' | 'ILLEGAL';

/** An allowed action leads to `to`; `changed` is false when the record is already there (nothing to write). */
export type Transition<S extends string> = { ok: true; to: S; changed: boolean } | { ok: false; refusal: Refusal };

type Table<S extends string, A extends string> = Readonly<Record<S, Readonly<Record<A, S | Refusal>>>>;

/** CREATED → PAYING → PAID, or CREATED → CLOSED; PAYING → CREATED when a plan fails (payable again). */
const ORDER_TABLE: Table<OrderStatus, OrderAction> = {
  CREATED: { createPlan: 'CREATED', startPayment: 'PAYING', paymentSucceeded: 'ILLEGAL', paymentFailed: 'ILLEGAL', close: 'CLOSED' },
  PAYING: { createPlan: 'ORDER_PAYING', startPayment: 'PLAN_NOT_PAYABLE', paymentSucceeded: 'PAID', paymentFailed: 'CREATED', close: 'ORDER_PAYING' },
  PAID: { createPlan: 'ORDER_PAID', startPayment: 'ORDER_PAID', paymentSucceeded: 'ILLEGAL', paymentFailed: 'ILLEGAL', close: 'ORDER_PAID' },
  CLOSED: { createPlan: 'ORDER_CLOSED', startPayment: 'ORDER_CLOSED', paymentSucceeded: 'ILLEGAL', paymentFailed: 'ILLEGAL', close: 'CLOSED' },
};

/**
 * PENDING → PAYING → PAID | FAILED; a PENDING plan is SUPERSEDED by a newer plan or CANCELLED when its
 * order closes. A pay request on a finished plan (PAID, FAILED) returns it as it is.
 */
const PLAN_TABLE: Table<PlanStatus, PlanAction> = {
  PENDING: { pay: 'PAYING', supersede: 'SUPERSEDED', cancel: 'CANCELLED', succeed: 'ILLEGAL', fail: 'ILLEGAL' },
  PAYING: { pay: 'PAYING', supersede: 'ILLEGAL', cancel: 'ILLEGAL', succeed: 'PAID', fail: 'FAILED' },
  PAID: { pay: 'PAID', supersede: 'ILLEGAL', cancel: 'ILLEGAL', succeed: 'ILLEGAL', fail: 'ILLEGAL' },
  FAILED: { pay: 'FAILED', supersede: 'ILLEGAL', cancel: 'ILLEGAL', succeed: 'ILLEGAL', fail: 'ILLEGAL' },
  SUPERSEDED: { pay: 'PLAN_NOT_PAYABLE', supersede: 'ILLEGAL', cancel: 'ILLEGAL', succeed: 'ILLEGAL', fail: 'ILLEGAL' },
  CANCELLED: { pay: 'PLAN_NOT_PAYABLE', supersede: 'ILLEGAL', cancel: 'ILLEGAL', succeed: 'ILLEGAL', fail: 'ILLEGAL' },
};

const REFUSALS: ReadonlySet<string> = new Set<Refusal>(['ORDER_PAID', 'ORDER_CLOSED', 'ORDER_PAYING', 'PLAN_NOT_PAYABLE', 'ILLEGAL']);

function lookup<S extends string, A extends string>(table: Table<S, A>, from: S, action: A): Transition<S> {
  const to = table[from][action];
  return REFUSALS.has(to) ? { ok: false, refusal: to as Refusal } : { ok: true, to: to as S, changed: to !== from };
}

/** What `action` does to an order in status `from`. */
export const orderTransition = (from: OrderStatus, action: OrderAction): Transition<OrderStatus> => lookup(ORDER_TABLE, from, action);

/** What `action` does to a plan in status `from`. */
export const planTransition = (from: PlanStatus, action: PlanAction): Transition<PlanStatus> => lookup(PLAN_TABLE, from, action);

/** Actions that take money and so need an unexpired order. */
const NEEDS_UNEXPIRED: ReadonlySet<OrderAction> = new Set<OrderAction>(['createPlan', 'startPayment']);

/**
 * `orderTransition`, with the order's deadline: a plan is created and a payment started only before
 * `expiresAt` (ORDER_EXPIRED once the clock `now` has reached it). A status refusal comes first.
 */
export function orderTransitionAt(
  order: { status: OrderStatus; expiresAt: number },
  action: OrderAction,
  now: number,
): Transition<OrderStatus> | { ok: false; refusal: 'ORDER_EXPIRED' } {
  const t = orderTransition(order.status, action);
  if (t.ok && NEEDS_UNEXPIRED.has(action) && now >= order.expiresAt) return { ok: false, refusal: 'ORDER_EXPIRED' };
  return t;
}

/** What a background look at a plan (resume, query) does: carry a PAYING plan on, chase a FAILED plan's reversals, or nothing. */
export type FollowUp = 'carry-on' | 'reversals' | 'none';

export function followUpOf(status: PlanStatus): FollowUp {
  if (status === 'PAYING') return 'carry-on';
  return status === 'FAILED' ? 'reversals' : 'none';
}

/** What the order expiry does: close the order, nothing (paid, closed or gone), or try again later (a payment is under way). */
export type ExpiryStep = 'close' | 'done' | 'later';

export function expiryStepOf(status: OrderStatus | undefined): ExpiryStep {
  if (status === undefined) return 'done';
  const t = orderTransition(status, 'close');
  if (t.ok) return t.changed ? 'close' : 'done';
  return t.refusal === 'ORDER_PAYING' ? 'later' : 'done';
}
