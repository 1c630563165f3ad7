import type { CheckoutOrderDto, OrderDto } from './dto/order.dto';
import type { PlanDto } from './dto/payment-plan.dto';
import type { OrderRecord, PlanRecord } from './order.types';

const iso = (ms: number) => new Date(ms).toISOString();

/** A master order for in-process callers (other modules): no merchant or account scope; times are epoch ms. */
export type OrderView = Pick<
  OrderRecord,
  'orderId' | 'merchantId' | 'merchantOrderNo' | 'amount' | 'currency' | 'subject' | 'status' | 'version' | 'createdAt' | 'expiresAt'
> & {
  /** The payer named at creation: only that account may pay the order. */
  payerAccountId?: string;
  /** The account the order is bound to (the named payer, or the account of its first plan). */
  accountId?: string;
  /** The plan that may run now. */
  activePlanId?: string;
  paidAt?: number;
  paidPlanId?: string;
  closedAt?: number;
  closeReason?: string;
};

/** The fields an OrderSummary is made of, as stored. */
export const SUMMARY_FIELDS = ['orderId', 'merchantId', 'amount', 'currency', 'subject', 'status', 'version', 'expiresAt', 'accountId'] as const;

/** The fields of an order that decide whether, and what, to tell its payer (OrdersService.findSummaryById). */
export type OrderSummary = Pick<OrderView, (typeof SUMMARY_FIELDS)[number]>;

/** The order as an in-process caller sees it. */
export function orderView(o: OrderRecord): OrderView {
  return {
    orderId: o.orderId,
    merchantId: o.merchantId,
    merchantOrderNo: o.merchantOrderNo,
    amount: o.amount,
    currency: o.currency,
    subject: o.subject,
    status: o.status,
    version: o.version,
    createdAt: o.createdAt,
    expiresAt: o.expiresAt,
    ...(o.payerAccountId ? { payerAccountId: o.payerAccountId } : {}),
    ...(o.accountId ? { accountId: o.accountId } : {}),
    ...(o.activePlan ? { activePlanId: o.activePlan } : {}),
    ...(o.paidAt ? { paidAt: o.paidAt, paidPlanId: o.paidPlan } : {}),
    ...(o.closedAt ? { closedAt: o.closedAt, closeReason: o.closeReason } : {}),
  };
}

/** The order as its merchant sees it. */
export function merchantView(o: OrderRecord): OrderDto {
  return {
    orderId: o.orderId,
    merchantOrderNo: o.merchantOrderNo,
    amount: o.amount,
    currency: o.currency,
    subject: o.subject,
    status: o.status,
    version: o.version,
    createdAt: iso(o.createdAt),
    expiresAt: iso(o.expiresAt),
    ...(o.payerAccountId ? { payerAccountId: o.payerAccountId } : {}),
    ...(o.paidAt ? { paidAt: iso(o.paidAt), paidPlanId: o.paidPlan } : {}),
    ...(o.closedAt ? { closedAt: iso(o.closedAt), closeReason: o.closeReason } : {}),
  };
}

/** The order as the paying user sees it. */
export function checkoutView(o: OrderRecord): CheckoutOrderDto {
  return {
    orderId: o.orderId,
    merchantId: o.merchantId,
    subject: o.subject,
    amount: o.amount,
    currency: o.currency,
    status: o.status,
    expiresAt: iso(o.expiresAt),
    ...(o.payerAccountId ? { payerAccountId: o.payerAccountId } : {}),
    ...(o.activePlan ? { activePlanId: o.activePlan } : {}),
  };
}

export function planView(p: PlanRecord): PlanDto {
  return {
    planId: p.planId,
    orderId: p.orderId,
    status: p.status,
    amount: p.amount,
    currency: p.currency,
    instructions: p.instructions.map((i, index) => ({
      index,
      method: i.method,
      amount: i.amount,
      status: i.status,
      ...(i.reversal ? { reversal: i.reversal } : {}),
    })),
    version: p.version,
    createdAt: iso(p.createdAt),
    ...(p.failureReason ? { failureReason: p.failureReason } : {}),
  };
}

/**
 * True when `accountId` may see and pay the order: nobody is bound to it yet, or it is this account. An order
 * created for a named payer is bound to that payer from the start.
 */
export function payableBy(o: OrderRecord | null, accountId: string): o is OrderRecord {
  return !!o && (o.accountId === '' || o.accountId === accountId);
}
