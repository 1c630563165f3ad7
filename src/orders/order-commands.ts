import { codePoints } from '../common/text';
import { ACCOUNT_ID_RE, MERCHANT_ORDER_NO_RE, ORDER_COMMAND_MERCHANT_ID_RE } from '../kernel/ids';
import { CURRENCIES, CURRENCY_RE, MAX_AMOUNT } from '../kernel/money';
import type { PaymentMethod } from './order.types';
import { hasHiddenCharacter, hiddenCharacterMessage } from '../http/display-text';

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

const isIntIn = (v: unknown, min: number, max: number) => Number.isSafeInteger(v) && (v as number) >= min && (v as number) <= max;
const idRule = (field: string) => `${field} must be 1-64 characters of A-Z a-z 0-9 _ . : -, not "." or ".."`;

/**
 * The first field of an order command that breaks the rules the HTTP create enforces (the DTO's), as
 * `{field, message}`; undefined when it is sound. In-process callers get no validation pipe: this keeps a
 * bad value of theirs from being stored.
 */
export function orderCommandProblem(c: CreateOrderCommand): { field: string; message: string } | undefined {
  const checks: Array<[string, boolean, string]> = [
    [
      'merchantId',
      typeof c.merchantId === 'string' && ORDER_COMMAND_MERCHANT_ID_RE.test(c.merchantId),
      'merchantId must be 1-64 characters of A-Z a-z 0-9 _ . : -',
    ],
    ['merchantOrderNo', typeof c.merchantOrderNo === 'string' && MERCHANT_ORDER_NO_RE.test(c.merchantOrderNo), idRule('merchantOrderNo')],
    ['amount', isIntIn(c.amount, 1, MAX_AMOUNT), `amount must be an integer from 1 to ${MAX_AMOUNT} (minor units)`],
    [
      'currency',
      typeof c.currency === 'string' && CURRENCY_RE.test(c.currency) && CURRENCIES.includes(c.currency),
      'currency must be an ISO 4217 currency code',
    ],
    [
      'subject',
      typeof c.subject === 'string' && c.subject.length >= 1 && codePoints(c.subject) <= MAX_SUBJECT_LENGTH,
      `subject must be 1-${MAX_SUBJECT_LENGTH} characters`,
    ],
    ['subject', !hasHiddenCharacter(c.subject), hiddenCharacterMessage('subject')],
    [
      'expireMinutes',
      c.expireMinutes === undefined || isIntIn(c.expireMinutes, 1, MAX_EXPIRE_MINUTES),
      `expireMinutes must be an integer from 1 to ${MAX_EXPIRE_MINUTES}`,
    ],
    [
      'payerAccountId',
      c.payerAccountId === undefined || (typeof c.payerAccountId === 'string' && ACCOUNT_ID_RE.test(c.payerAccountId)),
      idRule('payerAccountId'),
    ],
  ];
  const bad = checks.find(([, ok]) => !ok);
  return bad ? { field: bad[0], message: bad[2] } : undefined;
}
