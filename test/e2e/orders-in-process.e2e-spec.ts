import type Redis from 'ioredis';
import { DelayQueueService } from '../../src/engines/delay-queue/delay-queue.service';
import { ChannelGateway } from '../../src/features/orders/channels/channel-gateway';
import type { CreateOrderForBuyerCommand } from '../../src/features/orders/order.commands';
import { orderKeys, orderNumberKeyOf } from '../../src/features/orders/order.keys';
import { EXPIRY_QUEUE } from '../../src/features/orders/order-queues';
import { OrdersService } from '../../src/features/orders/orders.service';
import { PaymentPlansService } from '../../src/features/orders/payment-plans.service';
import { PaymentRunner } from '../../src/features/orders/payment-runner.service';
import { KeyBuilder } from '../../src/platform/redis/key-builder';
import { rejection, TWO_LEGS } from '../support/orders-fixture';
import { InvalidArgumentError } from '../../src/platform/core/domain.error';
import { OrderConflictError, OrderNotFoundError } from '../../src/features/orders/order.errors';
import { CREDS, TestApp } from '../support/test-app';
import { useOrdersApp } from '../support/orders-app';

/**
 * The orders module's in-process API for the modules that build on it, against
 * a real redis-server: createForBuyer (idempotent like the HTTP create, the
 * order bound to its payer), findById (no scope), and the order expiry owned by
 * OrdersService alone.
 */
const MERCHANT = CREDS.merchantId;

describe('orders: in-process API', () => {
  let raw: Redis;
  let t: TestApp;
  let orders: OrdersService;
  let plans: PaymentPlansService;
  let runner: PaymentRunner;
  let channels: ChannelGateway;
  let queue: DelayQueueService;
  let seq = 0;

  const orderNo = () => `ip-${process.pid}-${++seq}`;
  const forBuyer = (payerAccountId: string, extra: Partial<CreateOrderForBuyerCommand> = {}): CreateOrderForBuyerCommand => ({
    merchantId: MERCHANT,
    merchantOrderNo: orderNo(),
    amount: 12800,
    currency: 'CNY',
    subject: 'Seckill: coffee beans',
    payerAccountId,
    ...extra,
  });

  const app = useOrdersApp({ ORDERS_QUERY_DELAY_MS: '50', CHANNEL_LATENCY_MS: '5', LOCK_POLICIES: 'order:5000:0,payment-plan:5000:0' });
  beforeAll(() => {
    ({ raw, t, orders, plans, runner, channels, queue } = app);
  });

  describe('createForBuyer', () => {
    it('20 concurrent identical calls make one order for the payer: one created, the others the same order', async () => {
      const command = forBuyer('buyer-1');
      const results = await Promise.all(Array.from({ length: 20 }, () => orders.createForBuyer(command)));
      expect(results.filter((r) => r.created)).toHaveLength(1);
      const orderId = results[0].order.orderId;
      expect(await orders.orderIdOf(MERCHANT, command.merchantOrderNo)).toBe(orderId);
      expect(new Set(results.map((r) => r.order.orderId))).toEqual(new Set([orderId]));
      expect(results[0].order).toMatchObject({
        merchantId: MERCHANT,
        payerAccountId: 'buyer-1',
        accountId: 'buyer-1',
        status: 'CREATED',
        version: 1,
        amount: 12800,
      });
      // It is a merchant's order like any other: the merchant reads it, with its payer.
      expect(await orders.get(MERCHANT, command.merchantOrderNo)).toMatchObject({ orderId, payerAccountId: 'buyer-1', status: 'CREATED' });
      // Its expiry is armed at its expiresAt.
      expect((await queue.get(EXPIRY_QUEUE, orderId))?.at).toBe(results[0].order.expiresAt);
    });

    it('the same merchantOrderNo with another payer, or with none, is ORDER_NO_REUSED and changes nothing', async () => {
      const command = forBuyer('buyer-2');
      const { order } = await orders.createForBuyer(command);
      for (const p of [
        orders.createForBuyer({ ...command, payerAccountId: 'buyer-3' }),
        orders.create({ merchantId: MERCHANT, merchantOrderNo: command.merchantOrderNo, amount: 12800, currency: 'CNY', subject: command.subject }),
      ]) {
        expect((await rejection(p, OrderConflictError)).code).toBe('ORDER_NO_REUSED');
      }
      expect(await orders.findById(order.orderId)).toEqual(order);
      // The HTTP create with the same payer is the same payload.
      const { merchantOrderNo, amount, currency, subject, payerAccountId } = command;
      expect((await orders.create({ merchantId: MERCHANT, merchantOrderNo, amount, currency, subject, payerAccountId })).created).toBe(false);
    });

    it('only the payer sees, plans and pays the order; every other account gets the 404 of an order it cannot see', async () => {
      const { order } = await orders.createForBuyer(forBuyer('buyer-4'));
      const other = 'buyer-5';
      for (const p of [orders.checkout(other, order.orderId), plans.create({ accountId: other, orderId: order.orderId, instructions: [...TWO_LEGS] })]) {
        expect((await rejection(p, OrderNotFoundError)).message).toBe('No such order');
      }
      const { plan } = await plans.create({ accountId: 'buyer-4', orderId: order.orderId, instructions: [...TWO_LEGS] });
      await rejection(runner.pay({ accountId: other, planId: plan.planId }), OrderNotFoundError);
      expect((await orders.checkout('buyer-4', order.orderId)).payerAccountId).toBe('buyer-4');
      expect((await runner.pay({ accountId: 'buyer-4', planId: plan.planId })).status).toBe('PAID');
      expect(await orders.findById(order.orderId)).toMatchObject({ status: 'PAID', paidPlanId: plan.planId, payerAccountId: 'buyer-4' });
    });

    it.each([
      ['payerAccountId', { payerAccountId: '' }],
      ['payerAccountId', { payerAccountId: '..' }],
      ['payerAccountId', { payerAccountId: 'has space' }],
      ['payerAccountId', { payerAccountId: 'x'.repeat(65) }],
      ['payerAccountId', { payerAccountId: 'a{b}' }],
      ['payerAccountId', { payerAccountId: undefined }],
      ['merchantId', { merchantId: '' }],
      ['amount', { amount: 0 }],
      ['amount', { amount: 1.5 }],
      ['currency', { currency: 'XYZ' }],
      ['subject', { subject: '' }],
      ['expireMinutes', { expireMinutes: 0 }],
    ])('refuses a bad %s with a 400 naming it, and stores nothing (%j)', async (field, change) => {
      const command = { ...forBuyer('buyer-x'), ...change } as CreateOrderForBuyerCommand;
      const expiriesBefore = (await queue.stats(EXPIRY_QUEUE)).pending;
      const err = await rejection(orders.createForBuyer(command), InvalidArgumentError);
      expect([err.code, (err.details as Array<{ field: string }>)[0].field]).toEqual(['VALIDATION_FAILED', field]);
      expect(await orders.orderIdOf(command.merchantId, command.merchantOrderNo)).toBeUndefined();
      const orderId = orderNumberKeyOf(command.merchantId, command.merchantOrderNo);
      expect(await raw.exists(orderKeys(t.app.get(KeyBuilder), orderId)[0])).toBe(0);
      expect((await queue.stats(EXPIRY_QUEUE)).pending).toBe(expiriesBefore);
    });
  });

  describe('findById', () => {
    it('reads any order by id with no merchant or account scope; an unknown id is undefined', async () => {
      const no = orderNo();
      const { order } = await orders.create({ merchantId: CREDS.otherMerchantId, merchantOrderNo: no, amount: 500, currency: 'USD', subject: 'Tea' });
      const found = await orders.findById(order.orderId);
      expect(found).toEqual({
        orderId: order.orderId,
        merchantId: CREDS.otherMerchantId,
        merchantOrderNo: no,
        amount: 500,
        currency: 'USD',
        subject: 'Tea',
        status: 'CREATED',
        version: 1,
        createdAt: Date.parse(order.createdAt),
        expiresAt: Date.parse(order.expiresAt),
      });
      expect(await orders.findById(orderNumberKeyOf(MERCHANT, `never-${orderNo()}`))).toBeUndefined();
      for (const malformed of ['', 'ord_', 'x', `${order.orderId}_p1`, 'ord_{s:1}aaaaaaaaaaaaaaaaaaa'])
        expect(await orders.findById(malformed)).toBeUndefined();
    });
  });

  describe('the order expiry has one owner', () => {
    it('every order-expiry entry is scheduled or cancelled through OrdersService.armExpiry / disarmExpiry, the payment runner included', async () => {
      let inOwner = 0;
      const elsewhere: string[] = [];
      const owned = { armExpiry: [] as unknown[][], disarmExpiry: [] as unknown[][] };
      // Each owner method records its calls and marks the queue calls made inside it as its own.
      for (const name of ['armExpiry', 'disarmExpiry'] as const) {
        const original = (orders[name] as (...a: unknown[]) => Promise<void>).bind(orders);
        jest.spyOn(orders, name).mockImplementation((async (...args: unknown[]) => {
          owned[name].push(args);
          inOwner++;
          try {
            return await original(...args);
          } finally {
            inOwner--;
          }
        }) as never);
      }
      for (const method of ['schedule', 'cancel', 'reschedule'] as const) {
        const original = (queue[method] as (...a: unknown[]) => Promise<unknown>).bind(queue);
        jest.spyOn(queue, method).mockImplementation(((q: string, ...rest: unknown[]) => {
          if (q === EXPIRY_QUEUE && inOwner === 0) elsewhere.push(`${method} ${String(rest[0])}`);
          return original(q, ...rest);
        }) as never);
      }

      // Paid: created (armed), paid (cancelled by the runner's request).
      const paid = await orders.createForBuyer(forBuyer('buyer-6'));
      const paidPlan = await plans.create({ accountId: 'buyer-6', orderId: paid.order.orderId, instructions: [...TWO_LEGS] });
      expect((await runner.pay({ accountId: 'buyer-6', planId: paidPlan.plan.planId })).status).toBe('PAID');
      expect(await queue.get(EXPIRY_QUEUE, paid.order.orderId)).toBeNull();

      // Failed: the runner has the expiry re-armed (replacing the entry), and the order is payable again.
      const failed = await orders.createForBuyer(forBuyer('buyer-7'));
      const failedPlan = await plans.create({ accountId: 'buyer-7', orderId: failed.order.orderId, instructions: [...TWO_LEGS] });
      channels.configure('quickpay', { pay: 'failure' });
      expect((await runner.pay({ accountId: 'buyer-7', planId: failedPlan.plan.planId })).status).toBe('FAILED');
      expect((await queue.get(EXPIRY_QUEUE, failed.order.orderId))?.at).toBe(failed.order.expiresAt);

      // Closed by the merchant: cancelled.
      await orders.close(MERCHANT, failed.order.merchantOrderNo);
      expect(await queue.get(EXPIRY_QUEUE, failed.order.orderId)).toBeNull();

      expect(elsewhere).toEqual([]);
      expect(owned.armExpiry).toEqual([
        // Armed before the order is written, for its life; the order's expiresAt is the entry's due time.
        [paid.order.orderId, { delayMs: 30 * 60_000 }, 'keep'],
        [failed.order.orderId, { delayMs: 30 * 60_000 }, 'keep'],
        [failed.order.orderId, failed.order.expiresAt, 'replace'],
      ]);
      expect(owned.disarmExpiry).toEqual([[paid.order.orderId], [failed.order.orderId]]);
    });

    it('expire() decides from the order state: closes a CREATED order, leaves a PAID one, retries a PAYING one later, ignores an unknown one', async () => {
      const open = await orders.createForBuyer(forBuyer('buyer-8'));
      await orders.expire(open.order.orderId);
      expect(await orders.findById(open.order.orderId)).toMatchObject({ status: 'CLOSED', closeReason: 'EXPIRED' });

      const paid = await orders.createForBuyer(forBuyer('buyer-9'));
      const { plan } = await plans.create({ accountId: 'buyer-9', orderId: paid.order.orderId, instructions: [...TWO_LEGS] });
      await runner.pay({ accountId: 'buyer-9', planId: plan.planId });
      await expect(orders.expire(paid.order.orderId)).resolves.toBeUndefined();
      expect((await orders.findById(paid.order.orderId))?.status).toBe('PAID');

      const paying = await orders.createForBuyer(forBuyer('buyer-10'));
      const payingPlan = await plans.create({ accountId: 'buyer-10', orderId: paying.order.orderId, instructions: [...TWO_LEGS] });
      channels.configure('quickpay', { pay: 'unknown', query: 'unknown' });
      expect((await runner.pay({ accountId: 'buyer-10', planId: payingPlan.plan.planId })).status).toBe('PAYING');
      await expect(orders.expire(paying.order.orderId)).rejects.toThrow(/being paid/);
      expect((await orders.findById(paying.order.orderId))?.status).toBe('PAYING');

      await expect(orders.expire(orderNumberKeyOf(MERCHANT, `never-${orderNo()}`))).resolves.toBeUndefined();
    });
  });
});
