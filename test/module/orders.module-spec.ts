import { DelayQueueService } from '../../src/engines/delay-queue/delay-queue.service';
import { OrderEventsService, OrdersModule, OrdersService } from '../../src/features/orders';
import { ChannelGateway } from '../../src/features/orders/channels/channel-gateway';
import { OrderConflictError, OrderNotFoundError } from '../../src/features/orders/order.errors';
import { EXPIRY_QUEUE, legReference } from '../../src/features/orders/order-queues';
import { PaymentPlansService } from '../../src/features/orders/payment-plans.service';
import { PaymentRunner } from '../../src/features/orders/payment-runner.service';
import { InvalidArgumentError } from '../../src/platform/core/domain.error';
import { buildModule, eventually, type FailureMode, FakeWallet, fakeWalletModule, rejection, useModuleRedis } from '../support/module-tier';
import { type Legs, ledgerOf, netHeld, TWO_LEGS } from '../support/orders-fixture';

/**
 * The orders module built alone against a real redis-server: OrdersModule with the platform, the delay queue, locks
 * and streams, and the wallet (the `balance` channel's money) replaced by FakeWallet at WalletService. Orders are
 * idempotent on their number, plans pay to PAID moving exactly the order's amount, a failed plan gives back what it
 * took, the expiry closes an unpaid order, refusals are typed errors, and a wallet that fails mid-payment leaves
 * the money and the order consistent.
 */
const MERCHANT = 'm_module';
const BUYER = 'buyer-1';
const BUYER_WALLET = { kind: 'account' as const, id: BUYER };
const BALANCE_ONLY: Legs = [{ method: 'balance', amount: 2800 }];
const redis = useModuleRedis();

async function setup() {
  const wallet = new FakeWallet();
  const m = await buildModule(redis, {
    feature: OrdersModule,
    env: { BALANCE_CHANNEL: 'wallet', ORDERS_QUERY_DELAY_MS: '50', CHANNEL_LATENCY_MS: '0' },
    fakes: [fakeWalletModule(wallet)],
  });
  const orders = m.get(OrdersService);
  const plans = m.get(PaymentPlansService);
  const runner = m.get(PaymentRunner);
  const channels = m.get(ChannelGateway);
  let n = 0;
  const newOrder = async (legs: Legs = TWO_LEGS, extra: { expireMinutes?: number } = {}) => {
    const amount = legs.reduce((s, l) => s + l.amount, 0);
    const { order } = await orders.create({ merchantId: MERCHANT, merchantOrderNo: `no-${++n}`, amount, currency: 'CNY', subject: 'Coffee beans', ...extra });
    return order;
  };
  const newPlan = async (orderId: string, legs: Legs = TWO_LEGS) => (await plans.create({ accountId: BUYER, orderId, instructions: [...legs] })).plan;
  const statusOf = async (orderId: string) => (await orders.findById(orderId))?.status;
  /** The order's events on its shard stream, by type. */
  const eventsOf = async (orderId: string) => {
    const types: string[] = [];
    for (const stream of m.get(OrderEventsService).streams()) {
      for (const [, fields] of await redis.raw.xrange(stream, '-', '+')) {
        const f = Object.fromEntries(fields.flatMap((v, i) => (i % 2 === 0 ? [[v, fields[i + 1]]] : [])));
        if (f.orderId === orderId) types.push(f.type);
      }
    }
    return types;
  };
  /** A balance-only order and plan of BUYER (wallet 5000), paid while the wallet fails `mode` its debit: the pay answers PAYING. */
  const payFailing = async (mode: FailureMode) => {
    wallet.topUp(BUYER_WALLET, 'CNY', 5000);
    const order = await newOrder(BALANCE_ONLY);
    const plan = await newPlan(order.orderId, BALANCE_ONLY);
    wallet.failures.fail('debit', mode);
    expect((await runner.pay({ accountId: BUYER, planId: plan.planId })).status).toBe('PAYING');
    return { order, plan };
  };
  return { m, wallet, orders, plans, runner, channels, queue: m.get(DelayQueueService), newOrder, newPlan, statusOf, eventsOf, payFailing };
}

describe('orders module', () => {
  it('create is idempotent on (merchant, merchantOrderNo): 20 concurrent creates make one order, its expiry armed once', async () => {
    const { orders, queue, eventsOf } = await setup();
    const cmd = { merchantId: MERCHANT, merchantOrderNo: 'same', amount: 12800, currency: 'CNY', subject: 'Coffee beans' };
    const results = await Promise.all(Array.from({ length: 20 }, () => orders.create(cmd)));
    expect(results.filter((r) => r.created)).toHaveLength(1);
    const orderId = results[0].order.orderId;
    expect(new Set(results.map((r) => r.order.orderId))).toEqual(new Set([orderId]));
    expect(await orders.orderIdOf(MERCHANT, 'same')).toBe(orderId);
    expect((await queue.get(EXPIRY_QUEUE, orderId))?.at).toBe((await orders.findById(orderId))?.expiresAt);
    expect(await eventsOf(orderId)).toEqual(['order.created']);

    // The number with another payload: a typed conflict, and the order is as it was.
    const err = await rejection(orders.create({ ...cmd, amount: 100 }));
    expect(err).toBeInstanceOf(OrderConflictError);
    expect((err as OrderConflictError).code).toBe('ORDER_NO_REUSED');
    expect(await orders.get(MERCHANT, 'same')).toMatchObject({ orderId, amount: 12800, version: 1, status: 'CREATED' });
  });

  it('a plan pays to PAID: the legs move exactly the order amount, once, however often pay is called', async () => {
    const { wallet, runner, channels, queue, newOrder, newPlan, statusOf, eventsOf } = await setup();
    wallet.topUp(BUYER_WALLET, 'CNY', 5000);
    const order = await newOrder();
    const plan = await newPlan(order.orderId);
    const paid = await Promise.allSettled(Array.from({ length: 5 }, () => runner.pay({ accountId: BUYER, planId: plan.planId })));
    expect(paid.filter((p) => p.status === 'fulfilled').length).toBeGreaterThanOrEqual(1);
    expect((await runner.pay({ accountId: BUYER, planId: plan.planId })).status).toBe('PAID');
    expect(await statusOf(order.orderId)).toBe('PAID');

    // The money: the wallet gave the balance leg once, the simulated channel holds the rest once; together the amount.
    expect(wallet.entriesOf('payment', BUYER_WALLET)).toEqual([expect.objectContaining({ amount: -2800, reference: legReference(plan, 0) })]);
    expect(wallet.balanceOf(BUYER_WALLET, 'CNY')).toBe(5000 - 2800);
    const [, quickpay] = await ledgerOf(channels, plan);
    expect(quickpay).toMatchObject({ state: 'paid', amount: 10000, payCalls: 1, refunds: 0 });
    expect(2800 + netHeld([quickpay])).toBe(order.amount);

    expect(await queue.get(EXPIRY_QUEUE, order.orderId)).toBeNull();
    expect(await eventsOf(order.orderId)).toEqual(['order.created', 'order.paid']);
    const again = await rejection(newPlan(order.orderId));
    expect(again).toBeInstanceOf(OrderConflictError);
    expect((again as OrderConflictError).code).toBe('ORDER_PAID');
  });

  it('a leg the wallet declines fails the plan: what was paid is given back, the order is payable again, and a new plan pays it', async () => {
    const { wallet, runner, channels, newOrder, newPlan, orders } = await setup();
    wallet.topUp(BUYER_WALLET, 'CNY', 1000);
    const legs: Legs = [
      { method: 'quickpay', amount: 10000 },
      { method: 'balance', amount: 2800 },
    ];
    const order = await newOrder(legs);
    const plan = await newPlan(order.orderId, legs);
    expect((await runner.pay({ accountId: BUYER, planId: plan.planId })).status).toBe('FAILED');
    expect(await orders.findById(order.orderId)).toMatchObject({ status: 'CREATED' });
    expect(await orders.findById(order.orderId)).not.toHaveProperty('activePlanId');
    const [quickpay] = await ledgerOf(channels, plan, legs);
    expect(quickpay).toMatchObject({ state: 'paid', refunds: 1 });
    expect(netHeld([quickpay])).toBe(0);
    expect(wallet.balanceOf(BUYER_WALLET, 'CNY')).toBe(1000);

    wallet.topUp(BUYER_WALLET, 'CNY', 5000);
    const second = await newPlan(order.orderId, legs);
    expect((await runner.pay({ accountId: BUYER, planId: second.planId })).status).toBe('PAID');
    expect(wallet.balanceOf(BUYER_WALLET, 'CNY')).toBe(6000 - 2800);
    expect(netHeld(await ledgerOf(channels, second, legs))).toBe(10000);
  });

  it('the expiry closes an unpaid order through the delay queue; a closed order takes no plan, and closes again as it is', async () => {
    const { orders, newOrder, newPlan, statusOf } = await setup();
    const order = await newOrder();
    await newPlan(order.orderId);
    await orders.armExpiry(order.orderId, Date.now(), 'replace');
    await eventually('the order closed', async () => (await statusOf(order.orderId)) === 'CLOSED', 5000);
    expect(await orders.findById(order.orderId)).toMatchObject({ closeReason: 'EXPIRED' });
    const err = await rejection(newPlan(order.orderId));
    expect(err).toBeInstanceOf(OrderConflictError);
    expect((err as OrderConflictError).code).toBe('ORDER_CLOSED');
    expect(await orders.close(MERCHANT, order.merchantOrderNo)).toMatchObject({ status: 'CLOSED', version: (await orders.findById(order.orderId))?.version });
  });

  it('refusals are typed: not found, another account, a paid order closed, bad input with nothing stored', async () => {
    const { wallet, orders, runner, plans, newOrder, newPlan } = await setup();
    await expect(orders.get(MERCHANT, 'never')).rejects.toBeInstanceOf(OrderNotFoundError);
    await expect(orders.close(MERCHANT, 'never')).rejects.toBeInstanceOf(OrderNotFoundError);
    const order = await newOrder();
    const plan = await newPlan(order.orderId);
    await expect(plans.get('someone-else', plan.planId)).rejects.toBeInstanceOf(OrderNotFoundError);
    await expect(runner.pay({ accountId: 'someone-else', planId: plan.planId })).rejects.toBeInstanceOf(OrderNotFoundError);
    await expect(plans.create({ accountId: BUYER, orderId: order.orderId, instructions: [{ method: 'quickpay', amount: 1 }] })).rejects.toBeInstanceOf(
      InvalidArgumentError,
    );

    wallet.topUp(BUYER_WALLET, 'CNY', 5000);
    await runner.pay({ accountId: BUYER, planId: plan.planId });
    const closing = await rejection(orders.close(MERCHANT, order.merchantOrderNo));
    expect(closing).toBeInstanceOf(OrderConflictError);
    expect((closing as OrderConflictError).code).toBe('ORDER_PAID');

    const bad = orders.createForBuyer({ merchantId: MERCHANT, merchantOrderNo: 'bad', amount: -5, currency: 'CNY', subject: 'x', payerAccountId: BUYER });
    await expect(bad).rejects.toBeInstanceOf(InvalidArgumentError);
    expect(await orders.orderIdOf(MERCHANT, 'bad')).toBeUndefined();
  });

  it('the wallet failing before the debit: the leg is unknown, its query voids it, the plan fails with no money moved', async () => {
    const { wallet, runner, newPlan, orders, payFailing } = await setup();
    const { order, plan } = await payFailing('before');
    await eventually('the query failed the plan', async () => (await orders.findById(order.orderId))?.status === 'CREATED', 5000);
    expect(wallet.balanceOf(BUYER_WALLET, 'CNY')).toBe(5000);
    // The voided reference can never be taken, even by a run that stalled mid-call.
    await expect(wallet.debit({ owner: BUYER_WALLET, currency: 'CNY', amount: 2800, reference: legReference(plan, 0), kind: 'payment' })).rejects.toThrow();
    const second = await newPlan(order.orderId, BALANCE_ONLY);
    expect((await runner.pay({ accountId: BUYER, planId: second.planId })).status).toBe('PAID');
    expect(wallet.balanceOf(BUYER_WALLET, 'CNY')).toBe(5000 - 2800);
  });

  it('the wallet reply lost after the debit: the query finds the debit and the plan is PAID, debited once', async () => {
    const { wallet, statusOf, payFailing } = await setup();
    const { order } = await payFailing('after');
    await eventually('the query settled the plan', async () => (await statusOf(order.orderId)) === 'PAID', 5000);
    expect(wallet.failures.thrown('debit', 'after')).toBe(1);
    expect(wallet.entriesOf('payment', BUYER_WALLET)).toHaveLength(1);
    expect(wallet.balanceOf(BUYER_WALLET, 'CNY')).toBe(5000 - 2800);
  });
});
