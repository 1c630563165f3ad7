/** Payment methods, each served by its own channel. */
export const PAYMENT_METHODS = ['balance', 'quickpay', 'points', 'ebanking'] as const;
export type PaymentMethod = (typeof PAYMENT_METHODS)[number];

/** CREATED → PAYING → PAID, or CREATED → CLOSED; PAYING → CREATED when a plan fails (payable again). */
export const ORDER_STATUSES = ['CREATED', 'PAYING', 'PAID', 'CLOSED'] as const;
export type OrderStatus = (typeof ORDER_STATUSES)[number];

/**
 * PENDING → PAYING → PAID | FAILED. A PENDING plan is SUPERSEDED by a newer plan of the same order,
 * or CANCELLED when the order closes.
 */
export const PLAN_STATUSES = ['PENDING', 'PAYING', 'PAID', 'FAILED', 'SUPERSEDED', 'CANCELLED'] as const;
export type PlanStatus = (typeof PLAN_STATUSES)[number];

/**
 * One instruction's payment leg: PENDING → SENT (the channel call is under way) → SUCCEEDED | FAILED |
 * UNKNOWN (resolved later by a query) ; SKIPPED when an earlier instruction failed.
 */
export const INSTRUCTION_STATUSES = ['PENDING', 'SENT', 'SUCCEEDED', 'FAILED', 'UNKNOWN', 'SKIPPED'] as const;
export type InstructionStatus = (typeof INSTRUCTION_STATUSES)[number];

/** A succeeded leg of a failed plan is reversed: PENDING until the channel confirms, then REVERSED. */
export const REVERSAL_STATUSES = ['PENDING', 'REVERSED'] as const;
export type ReversalStatus = (typeof REVERSAL_STATUSES)[number];

export interface Instruction {
  method: PaymentMethod;
  /** Minor units. */
  amount: number;
  status: InstructionStatus;
  reversal?: ReversalStatus;
}

export interface OrderRecord {
  orderId: string;
  merchantId: string;
  merchantOrderNo: string;
  amount: number;
  currency: string;
  subject: string;
  expireMinutes: number;
  /** sha256 of the create request's payload: the same merchantOrderNo with another payload is a 409. */
  fingerprint: string;
  status: OrderStatus;
  version: number;
  createdAt: number;
  expiresAt: number;
  updatedAt: number;
  /** The paying account: the payer named at creation, else bound by the first plan ('' until then). */
  accountId: string;
  /** The payer named when the order was created ('' when none was): only that account may pay it. */
  payerAccountId: string;
  /** The plan that may run now ('' when none). */
  activePlan: string;
  /** Plans created so far (the last plan's number). */
  planSeq: number;
  paidPlan: string;
  paidAt: number;
  closedAt: number;
  closeReason: string;
}

export interface PlanRecord {
  planId: string;
  orderId: string;
  accountId: string;
  status: PlanStatus;
  version: number;
  amount: number;
  currency: string;
  fingerprint: string;
  instructions: Instruction[];
  createdAt: number;
  updatedAt: number;
  failureReason: string;
  /**
   * Its order's `createdAt` (epoch ms) when the plan was made, in every channel reference of its legs
   * (`legReference`): unique to this order's life, while the plan id comes back with its merchantOrderNo
   * after the retention time. '' for plans stored without one.
   */
  legStamp: string;
}

/** Events on the shard streams. */
export const ORDER_EVENT_TYPES = ['order.created', 'order.paid', 'order.closed'] as const;
export type OrderEventType = (typeof ORDER_EVENT_TYPES)[number];
