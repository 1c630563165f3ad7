import type { PaymentMethod } from './order.types';

/**
 * Plain commands of the orders services. Controllers map their DTOs to these;
 * other modules build them in process. No HTTP type appears here.
 */

export const MAX_EXPIRE_MINUTES = 1440;
export const DEFAULT_EXPIRE_MINUTES = 30;
export const MAX_SUBJECT_LENGTH = 128;

/** A master order of `merchantId`; with the merchant, `merchantOrderNo` is the idempotency key. */
export interface CreateOrderCommand {
  merchantId: string;
  merchantOrderNo: string;
  /** Minor units. */
  amount: number;
  /** ISO 4217 code. */
  currency: string;
  subject: string;
  /** Minutes until the unpaid order closes by itself (default DEFAULT_EXPIRE_MINUTES). */
  expireMinutes?: number;
  /** The only app account that may pay the order; absent: the first account to create a plan. */
  payerAccountId?: string;
}

/** An order that another module creates for a known payer on behalf of a merchant. */
export interface CreateOrderForBuyerCommand extends CreateOrderCommand {
  payerAccountId: string;
}

/** The account's plan for an order: its instructions replace a PENDING plan's. */
export interface CreatePlanCommand {
  accountId: string;
  orderId: string;
  instructions: readonly PlanInstructionInput[];
}

/** The account pays its plan. */
export interface PayPlanCommand {
  accountId: string;
  planId: string;
}

/** One instruction of a payment plan, in the order they run. */
export interface PlanInstructionInput {
  method: PaymentMethod;
  /** Minor units. */
  amount: number;
}
