import type { ChannelGateway } from '../../src/features/orders/channels/channel-gateway';
import type { LedgerEntry } from '../../src/features/orders/channels/channel-ledger';
import { orderNumberKeyOf } from '../../src/features/orders/order.keys';
import { legReference } from '../../src/features/orders/order-queues';
import { PAYMENT_METHODS, type PaymentMethod } from '../../src/features/orders/order.types';
import type { OrdersService } from '../../src/features/orders/orders.service';
import type { PaymentPlansService } from '../../src/features/orders/payment-plans.service';

/** A plan's instructions as the tests write them. */
export type Legs = ReadonlyArray<{ method: PaymentMethod; amount: number }>;

/** The plan most tests pay: balance 2800 + quickpay 10000 (an order of 12800). */
export const TWO_LEGS: Legs = [
  { method: 'balance', amount: 2800 },
  { method: 'quickpay', amount: 10000 },
];

/** Every simulated channel back to a quick success for pay, query and reverse. */
export function resetChannels(channels: ChannelGateway): void {
  for (const m of PAYMENT_METHODS) channels.configure(m, { latencyMs: 5, pay: 'success', query: 'success', reverse: 'success' });
}

/**
 * The id of the order (merchant, merchantOrderNo) names (ids are random: only the orders module knows it); when
 * there is none, an id that names no order.
 */
export const orderIdOf = async (orders: OrdersService, merchantId: string, merchantOrderNo: string): Promise<string> =>
  (await orders.orderIdOf(merchantId, merchantOrderNo)) ?? orderNumberKeyOf(merchantId, merchantOrderNo);

/** A new order of `merchant` (its amount the sum of `legs`) with one PENDING plan of `legs` for `account`. */
export async function orderWithPlan(
  orders: OrdersService,
  plans: PaymentPlansService,
  merchant: string,
  merchantOrderNo: string,
  account: string,
  legs: Legs = TWO_LEGS,
) {
  const amount = legs.reduce((s, l) => s + l.amount, 0);
  const { order } = await orders.create({ merchantId: merchant, merchantOrderNo, amount, currency: 'CNY', subject: 'Coffee beans' });
  const { plan } = await plans.create({ accountId: account, orderId: order.orderId, instructions: [...legs] });
  return { orderId: order.orderId, merchantOrderNo: order.merchantOrderNo, planId: plan.planId, legStamp: plan.legStamp, instructions: legs };
}

/** What each channel's ledger holds for the plan's instructions (under their channel references), in order. */
export const ledgerOf = (channels: ChannelGateway, plan: { planId: string; legStamp: string }, legs: ReadonlyArray<{ method: PaymentMethod }> = TWO_LEGS) =>
  Promise.all(legs.map((l, i) => channels.channel(l.method).ledger(legReference(plan, i))));

/** Money the channels hold over these entries: charged and not given back. */
export const netHeld = (entries: Array<LedgerEntry | undefined>) => entries.reduce((s, e) => s + (e?.state === 'paid' ? e.amount * (1 - e.refunds) : 0), 0);

/**
 * The error a call rejected with, which must be a `type` (a typed domain error, e.g. `OrderConflictError`);
 * fails when the call resolved or rejected with anything else.
 */
export async function rejection<E extends Error>(p: Promise<unknown>, type: abstract new (...args: never[]) => E): Promise<E> {
  let caught: unknown;
  try {
    await p;
  } catch (err) {
    caught = err;
  }
  if (caught === undefined) throw new Error('expected the call to be refused');
  expect(caught).toBeInstanceOf(type);
  return caught as E;
}
