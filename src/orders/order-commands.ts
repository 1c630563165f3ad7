import type { PaymentMethod } from './order.types';

/**
 * Plain commands of the orders services. Controllers map their DTOs to these;
 * other modules build them in process. No HTTP type appears here.
 */

/** A master order's payload; with the merchant, `merchantOrderNo` is the idempotency key. */
export interface CreateOrderCommand {
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
  merchantId: string;
  payerAccountId: string;
}

/** One instruction of a payment plan, in the order they run. */
export interface PlanInstructionInput {
  method: PaymentMethod;
  /** Minor units. */
  amount: number;
}
