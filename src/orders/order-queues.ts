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

/** The stable id of one instruction: the delay-queue id and the reference sent to the channel. */
export const legId = (planId: string, index: number) => `${planId}:${index}`;
