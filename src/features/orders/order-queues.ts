import type { PaymentMethod, PlanRecord } from './order.types';

/** Delay-queue names of the orders module. */
export const EXPIRY_QUEUE = 'order-expiry';
/** Instructions with an unknown outcome, queried until the channel answers; id `<planId>:<index>`. */
export const QUERY_QUEUE = 'payment-queries';
/** Reversals owed by failed plans, queued before the plan is written FAILED and retried until confirmed; id `<planId>:<index>`. */
export const REVERSAL_QUEUE = 'payment-reversals';
/** One entry per PAYING plan, armed before every write that leaves it PAYING: resumes a run that died; id `<planId>`. */
export const RESUME_QUEUE = 'payment-resumes';

export interface PlanRef {
  planId: string;
}

export interface LegRef {
  planId: string;
  index: number;
}

/**
 * A reversal queue item: the leg, and what the channel needs to give its money back (method, reference, amount,
 * currency, payer), so that it runs whether or not its plan is still stored (a dead letter re-driven after the
 * order's retention ended). Items queued by earlier versions carry the leg only, and need the plan.
 */
export interface ReversalRef extends LegRef {
  method?: PaymentMethod;
  ref?: string;
  amount?: number;
  currency?: string;
  accountId?: string;
}

/** A reversal item that carries its leg's channel call (as every item queued since they do). */
export type SelfSufficientReversal = Required<ReversalRef>;

export const isSelfSufficient = (r: ReversalRef): r is SelfSufficientReversal =>
  typeof r.method === 'string' &&
  typeof r.ref === 'string' &&
  typeof r.amount === 'number' &&
  typeof r.currency === 'string' &&
  typeof r.accountId === 'string';

/** The stable id of one instruction within its order's life: the delay-queue id of its query and reversal. */
export const legId = (planId: string, index: number) => `${planId}:${index}`;

/**
 * The reference sent to the channel for one instruction: its id and the plan's `legStamp`, so a
 * merchantOrderNo used again once its order's retention is over (the same order id, the same plan ids)
 * never pays with, queries or reverses the earlier order's references (a wallet's references never
 * expire). A plan stored without a stamp keeps the bare id.
 */
export const legReference = (plan: { planId: string; legStamp: string }, index: number) =>
  plan.legStamp ? `${legId(plan.planId, index)}:${plan.legStamp}` : legId(plan.planId, index);

/** The reversal item of the plan's leg `index`: everything its channel call needs. */
export const reversalOf = (plan: PlanRecord, index: number): SelfSufficientReversal => {
  const ins = plan.instructions[index];
  return {
    planId: plan.planId,
    index,
    method: ins.method,
    ref: legReference(plan, index),
    amount: ins.amount,
    currency: plan.currency,
    accountId: plan.accountId,
  };
};
