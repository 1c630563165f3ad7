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
