import { DomainError, InvalidArgumentError } from '../../platform/core/domain.error';
import type { OrderAction, PlanAction, Refusal } from './order-state';
import type { PlanStatus } from './order.types';
import type { WriteResult } from './orders.store';

/** The stable codes of the orders' conflicts: which state stopped the operation. */
export type OrderConflictCode =
  | 'ORDER_PAID'
  | 'ORDER_CLOSED'
  | 'ORDER_PAYING'
  | 'ORDER_EXPIRED'
  | 'ORDER_CHANGED'
  | 'STALE_LOCK_HOLDER'
  | 'ORDER_NO_REUSED'
  | 'PLAN_NOT_PAYABLE'
  | 'PLAN_LIMIT';

/** An order or plan that does not exist or is not the caller's: the two are not told apart (404). */
export class OrderNotFoundError extends DomainError {
  readonly kind = 'not-found';

  constructor(what: 'order' | 'payment plan') {
    super('NOT_FOUND', `No such ${what}`);
  }
}

/** An operation the order's or plan's state refuses (409), with its stable code. */
export class OrderConflictError extends DomainError {
  readonly kind = 'conflict';
  declare readonly code: OrderConflictCode;

  constructor(code: OrderConflictCode, message: string, details?: unknown) {
    super(code, message, details);
  }
}

/** An action the state machines never allow in that state, asked for anyway: a bug, not an answer (500). */
export class IllegalTransitionError extends Error {
  constructor(what: string) {
    super(`illegal state transition: ${what}`);
    this.name = 'IllegalTransitionError';
  }
}

export const orderNotFound = () => new OrderNotFoundError('order');
export const planNotFound = () => new OrderNotFoundError('payment plan');

export const orderConflict = (code: OrderConflictCode, message: string, details?: unknown) => new OrderConflictError(code, message, details);

/** A bad field from an in-process caller: 400 naming it, in the shape of the validation pipe's errors. */
export const invalidField = (field: string, message: string) => new InvalidArgumentError(`${field}: ${message}`, field, message);

/** What the state machines' refusal means to the caller, worded for the action refused. */
export function refusalError(
  refusal: Refusal | 'ORDER_EXPIRED',
  action: OrderAction | PlanAction,
  context: { planStatus?: PlanStatus; activePlan?: string } = {},
): OrderConflictError | IllegalTransitionError {
  switch (refusal) {
    case 'ORDER_PAID':
      return orderConflict('ORDER_PAID', action === 'close' ? 'The order is paid; it cannot be closed' : 'The order is already paid');
    case 'ORDER_CLOSED':
      return orderConflict('ORDER_CLOSED', 'The order is closed');
    case 'ORDER_PAYING':
      return action === 'close'
        ? orderConflict('ORDER_PAYING', 'A payment of this order is under way; it cannot be closed now')
        : orderConflict('ORDER_PAYING', 'A plan of this order is being paid', { planId: context.activePlan });
    case 'ORDER_EXPIRED':
      return orderConflict('ORDER_EXPIRED', 'The order has expired');
    case 'PLAN_NOT_PAYABLE':
      return context.planStatus
        ? orderConflict('PLAN_NOT_PAYABLE', `The plan is ${context.planStatus.toLowerCase()}; create a new one`)
        : orderConflict('PLAN_NOT_PAYABLE', 'This is not the order’s current plan');
    case 'ILLEGAL':
      return new IllegalTransitionError(`${action}${context.planStatus ? ` of a ${context.planStatus} plan` : ''}`);
  }
}

/** Throws when write-4 refused: a record changed meanwhile, a newer lock holder wrote, or the order expired. */
export function expectWritten(r: WriteResult): void {
  if (r.status === 'OK') return;
  if (r.status === 'VERSION') throw orderConflict('ORDER_CHANGED', 'The order changed while this request ran; read it again and retry');
  if (r.status === 'STALE_TOKEN') throw orderConflict('STALE_LOCK_HOLDER', 'A newer holder of the lock has written; this request lost its lock');
  throw orderConflict('ORDER_EXPIRED', 'The order has expired');
}
