import type Redis from 'ioredis';
import { InvalidArgumentError } from '../../src/platform/core/domain.error';
import { LockContendedError } from '../../src/engines/locks/lock.errors';
import { OrderConflictError, OrderNotFoundError } from '../../src/features/orders/order.errors';
import { LockService } from '../../src/engines/locks/lock.service';
import { KeyBuilder } from '../../src/platform/redis/key-builder';
import { ChannelGateway } from '../../src/features/orders/channels/channel-gateway';
import type { ChannelSettings } from '../../src/features/orders/channels/payment-channel';
import type { CreateOrderCommand } from '../../src/features/orders/order.commands';
import type { OrderEvent } from '../../src/features/orders/order.events';
import { OrderEventsService } from '../../src/features/orders/order-events.service';
import { orderIndexKey, orderKeys, orderNumberKeyOf } from '../../src/features/orders/order.keys';
import { orderIdOf } from '../support/orders-fixture';
import type { PaymentMethod } from '../../src/features/orders/order.types';
import { OrdersMetrics } from '../../src/features/orders/orders.metrics';
import { OrdersService } from '../../src/features/orders/orders.service';
import { OrdersStore } from '../../src/features/orders/orders.store';
import { PaymentPlansService } from '../../src/features/orders/payment-plans.service';
import { PaymentRunner } from '../../src/features/orders/payment-runner.service';
import { waitUntil } from '../harness/redis-process';
import { ledgerOf, type Legs, netHeld, orderWithPlan as newOrderWithPlan, rejection } from '../support/orders-fixture';
import { CREDS, TestApp } from '../support/test-app';
import { useOrdersApp } from '../support/orders-app';
import { setTimeout as sleep } from 'node:timers/promises';

/**
 * Master orders and payment plans against a real redis-server and the real
 * lock engine: idempotent creation under concurrency, one active plan per
 * order, one execution per plan, the failure / unknown / query paths
 * with reversals, pay racing close, fencing tokens and versions on
 * every state write, who may see what, and the event streams with their
 * consumer groups. The simulated channels count their calls, so "exactly one
 * execution" is checked by what reached the channels.
 */

const MERCHANT = CREDS.merchantId;
const QUERY_DELAY_MS = 50;

describe(OrdersService.name, () => {
  let raw: Redis;
  let t: TestApp;
  let orders: OrdersService;
  let plans: PaymentPlansService;
  let runner: PaymentRunner;
  let channels: ChannelGateway;
  let store: OrdersStore;
  let keyBuilder: KeyBuilder;
  let seq = 0;

  const orderNo = () => `it-${process.pid}-${++seq}`;
  const createOrder = (no: string, extra: Partial<CreateOrderCommand> = {}) =>
    orders.create({ merchantId: MERCHANT, merchantOrderNo: no, amount: 12800, currency: 'CNY', subject: 'Coffee beans', ...extra });
  const channelCalls = (method: PaymentMethod) => channels.channel(method).calls;
  const configure = (method: PaymentMethod, s: Partial<ChannelSettings>) => channels.configure(method, s);
  const ledger = (plan: { planId: string; legStamp: string }, legs?: Legs) => ledgerOf(channels, plan, legs);
  const net = async (plan: { planId: string; legStamp: string }, legs?: Legs) => netHeld(await ledger(plan, legs));
  /** Every event of the order in its shard stream, oldest first. */
  const eventsOf = async (orderId: string) => {
    const entries = await raw.xrange(orderKeys(keyBuilder, orderId)[2], '-', '+');
    return entries
      .map(([, f]) => f)
      .filter((f) => f[f.indexOf('orderId') + 1] === orderId)
      .map((f) => f[f.indexOf('type') + 1]);
  };
  /** A new order with one PENDING plan for `account`. */
  const orderWithPlan = (account: string, legs?: Legs) => newOrderWithPlan(orders, plans, MERCHANT, orderNo(), account, legs);

  const app = useOrdersApp({
    ORDERS_QUERY_DELAY_MS: String(QUERY_DELAY_MS),
    CHANNEL_LATENCY_MS: '5',
    LOCK_POLICIES: 'order:5000:0,payment-plan:5000:0',
  });
  beforeAll(() => {
    ({ raw, t, orders, plans, runner, channels, store, keys: keyBuilder } = app);
  });

  describe('order ids', () => {
    it('are not derivable from (merchant, merchantOrderNo): random, indexed in the same step, and a new one for each life of a number', async () => {
      const no = orderNo();
      const { order } = await createOrder(no);
      const numberKey = orderNumberKeyOf(MERCHANT, no);
      expect(order.orderId).not.toBe(numberKey);
      expect(await orders.findById(numberKey)).toBeUndefined();
      expect(await raw.get(orderIndexKey(keyBuilder, numberKey))).toBe(order.orderId);
      expect((await orders.get(MERCHANT, no)).orderId).toBe(order.orderId);
      // The index lives as long as the order: renewed by its writes.
      await raw.pexpire(orderIndexKey(keyBuilder, numberKey), 60_000);
      await orders.close(MERCHANT, no);
      expect(await raw.pttl(orderIndexKey(keyBuilder, numberKey))).toBeGreaterThan(60_000);
      // Its number made again once the order and its index are gone: another id.
      await raw.del(orderKeys(keyBuilder, order.orderId)[0], orderIndexKey(keyBuilder, numberKey));
      const again = await createOrder(no);
      expect([again.created, again.order.orderId === order.orderId]).toEqual([true, false]);
    });

    it('an order stored before the index (its id the number key) is still found by its number, and its number is still taken', async () => {
      const no = orderNo();
      const numberKey = orderNumberKeyOf(MERCHANT, no);
      const stored = await createOrder(no);
      // As the previous version stored it: under the number key, with no index entry.
      const [legacyKey] = orderKeys(keyBuilder, numberKey);
      await raw.copy(orderKeys(keyBuilder, stored.order.orderId)[0], legacyKey);
      await raw.hset(legacyKey, 'orderId', numberKey);
      await raw.del(orderKeys(keyBuilder, stored.order.orderId)[0], orderIndexKey(keyBuilder, numberKey));
      expect((await orders.get(MERCHANT, no)).orderId).toBe(numberKey);
      expect(await orders.orderIdOf(MERCHANT, no)).toBe(numberKey);
      const again = await createOrder(no);
      expect([again.created, again.order.orderId]).toEqual([false, numberKey]);
      expect((await orders.close(MERCHANT, no)).status).toBe('CLOSED');
    });
  });

  describe('master orders', () => {
    it('50 concurrent identical creates make one order: one 201, 49 duplicates of it, one order.created event', async () => {
      const no = orderNo();
      const results = await Promise.all(Array.from({ length: 50 }, () => createOrder(no)));
      expect(results.filter((r) => r.created)).toHaveLength(1);
      const orderId = await orderIdOf(orders, MERCHANT, no);
      expect(new Set(results.map((r) => r.order.orderId))).toEqual(new Set([orderId]));
      expect(results.every((r) => r.order.status === 'CREATED' && r.order.version === 1)).toBe(true);
      expect(await eventsOf(orderId)).toEqual(['order.created']);
    });

    it('the same merchantOrderNo with another payload is ORDER_NO_REUSED (409) and changes nothing', async () => {
      const no = orderNo();
      const first = await createOrder(no);
      for (const change of [{ amount: 12801 }, { currency: 'USD' }, { subject: 'Tea' }, { expireMinutes: 31 }]) {
        expect((await rejection(createOrder(no, change), OrderConflictError)).code).toBe('ORDER_NO_REUSED');
      }
      expect(await orders.get(MERCHANT, no)).toEqual(first.order);
      // expireMinutes left out is the default 30: the same payload.
      expect((await createOrder(no, { expireMinutes: 30 })).created).toBe(false);
    });

    it("a merchant cannot read or close another merchant's order: 404", async () => {
      const no = orderNo();
      await createOrder(no);
      for (const p of [orders.get(CREDS.otherMerchantId, no), orders.close(CREDS.otherMerchantId, no)]) await rejection(p, OrderNotFoundError);
      expect((await orders.get(MERCHANT, no)).status).toBe('CREATED');
    });

    it('close: CREATED → CLOSED with an event, idempotent, and the pending plan is cancelled; a paid order cannot be closed', async () => {
      const a = await orderWithPlan('acc-close');
      const closed = await orders.close(MERCHANT, a.merchantOrderNo);
      expect(closed).toMatchObject({ status: 'CLOSED', closeReason: 'MERCHANT' });
      expect(await orders.close(MERCHANT, a.merchantOrderNo)).toEqual(closed);
      expect((await plans.get('acc-close', a.planId)).status).toBe('CANCELLED');
      expect((await rejection(runner.pay({ accountId: 'acc-close', planId: a.planId }), OrderConflictError)).code).toBe('PLAN_NOT_PAYABLE');
      expect(await eventsOf(a.orderId)).toEqual(['order.created', 'order.closed']);

      const b = await orderWithPlan('acc-close');
      expect((await runner.pay({ accountId: 'acc-close', planId: b.planId })).status).toBe('PAID');
      expect((await rejection(orders.close(MERCHANT, b.merchantOrderNo), OrderConflictError)).code).toBe('ORDER_PAID');
    });

    it('the expiry closes an unpaid order as EXPIRED, and leaves a paid one alone', async () => {
      const a = await orderWithPlan('acc-exp');
      await orders.expire(a.orderId);
      expect(await orders.get(MERCHANT, a.merchantOrderNo)).toMatchObject({ status: 'CLOSED', closeReason: 'EXPIRED' });
      const b = await orderWithPlan('acc-exp');
      await runner.pay({ accountId: 'acc-exp', planId: b.planId });
      await orders.expire(b.orderId);
      expect((await orders.get(MERCHANT, b.merchantOrderNo)).status).toBe('PAID');
    });

    it('an order past its expiresAt takes no plan and starts no payment (ORDER_EXPIRED)', async () => {
      const a = await orderWithPlan('acc-late');
      await raw.hset(orderKeys(keyBuilder, a.orderId)[0], 'expiresAt', String(Date.now() - 1000));
      const before = channelCalls('balance').pay;
      expect((await rejection(runner.pay({ accountId: 'acc-late', planId: a.planId }), OrderConflictError)).code).toBe('ORDER_EXPIRED');
      expect(
        (await rejection(plans.create({ accountId: 'acc-late', orderId: a.orderId, instructions: [{ method: 'points', amount: 12800 }] }), OrderConflictError))
          .code,
      ).toBe('ORDER_EXPIRED');
      expect(channelCalls('balance').pay).toBe(before);
      expect((await plans.get('acc-late', a.planId)).status).toBe('PENDING');
    });
  });

  describe('payment plans', () => {
    it('20 concurrent plan creations leave exactly one active plan, and the order points at it', async () => {
      const { order } = await createOrder(orderNo());
      const settled = await Promise.allSettled(
        Array.from({ length: 20 }, (_, i) =>
          plans.create({
            accountId: 'acc-plans',
            orderId: order.orderId,
            instructions: [
              { method: 'balance', amount: 100 + i },
              { method: 'points', amount: 12700 - i },
            ],
          }),
        ),
      );
      const made = settled.flatMap((s) => (s.status === 'fulfilled' ? [s.value.plan.planId] : []));
      const refused = settled.flatMap((s) => (s.status === 'rejected' ? [s.reason] : []));
      expect(made.length).toBeGreaterThanOrEqual(1);
      for (const err of refused) expect(err).toBeInstanceOf(LockContendedError);
      const snap = await store.read(order.orderId);
      const statuses = await Promise.all(made.map(async (id) => (await store.readPlan(id)).plan!.status));
      expect(statuses.filter((s) => s === 'PENDING')).toHaveLength(1);
      expect(made[statuses.indexOf('PENDING')]).toBe(snap.order!.activePlan);
      expect(snap.order!.planSeq).toBe(made.length);
    });

    it('the same instructions again return the PENDING plan; other instructions supersede it', async () => {
      const { order } = await createOrder(orderNo());
      const ins = [{ method: 'quickpay' as const, amount: 12800 }];
      const first = await plans.create({ accountId: 'acc-same', orderId: order.orderId, instructions: ins });
      const again = await plans.create({ accountId: 'acc-same', orderId: order.orderId, instructions: ins });
      expect([first.created, again.created, again.plan.planId]).toEqual([true, false, first.plan.planId]);
      const other = await plans.create({ accountId: 'acc-same', orderId: order.orderId, instructions: [{ method: 'ebanking', amount: 12800 }] });
      expect(other.created).toBe(true);
      expect((await plans.get('acc-same', first.plan.planId)).status).toBe('SUPERSEDED');
      expect((await rejection(runner.pay({ accountId: 'acc-same', planId: first.plan.planId }), OrderConflictError)).code).toBe('PLAN_NOT_PAYABLE');
      expect((await runner.pay({ accountId: 'acc-same', planId: other.plan.planId })).status).toBe('PAID');
    });

    it('amounts that do not add up to the order amount are a 400 naming instructions, and nothing is stored', async () => {
      const { order } = await createOrder(orderNo());
      const err = await rejection(
        plans.create({
          accountId: 'acc-sum',
          orderId: order.orderId,
          instructions: [
            { method: 'balance', amount: 100 },
            { method: 'points', amount: 200 },
          ],
        }),
        InvalidArgumentError,
      );
      expect((err.details as Array<{ field: string }>)[0].field).toBe('instructions');
      const snap = await store.read(order.orderId);
      expect([snap.order!.planSeq, snap.order!.accountId, snap.order!.version]).toEqual([0, '', 1]);
    });

    it('the first plan binds the order: another account gets 404 for the order, its plans, paying and a new plan', async () => {
      const a = await orderWithPlan('acc-owner');
      const intruder = 'acc-intruder';
      for (const p of [
        orders.checkout(intruder, a.orderId),
        plans.get(intruder, a.planId),
        runner.pay({ accountId: intruder, planId: a.planId }),
        plans.create({ accountId: intruder, orderId: a.orderId, instructions: [{ method: 'points', amount: 12800 }] }),
      ]) {
        await rejection(p, OrderNotFoundError);
      }
      expect((await plans.get('acc-owner', a.planId)).status).toBe('PENDING');
      expect((await orders.checkout('acc-owner', a.orderId)).activePlanId).toBe(a.planId);
    });
  });

  describe('paying', () => {
    it('10 concurrent pays of one plan: one execution (each instruction reaches its channel once), the rest LOCK_CONTENDED', async () => {
      const a = await orderWithPlan('acc-pay');
      const before = [channelCalls('balance').pay, channelCalls('quickpay').pay];
      const settled = await Promise.allSettled(Array.from({ length: 10 }, () => runner.pay({ accountId: 'acc-pay', planId: a.planId })));
      const paid = settled.filter((s) => s.status === 'fulfilled' && s.value.status === 'PAID');
      const refused = settled.flatMap((s) => (s.status === 'rejected' ? [s.reason] : []));
      expect(paid.length).toBeGreaterThanOrEqual(1);
      expect(paid.length + refused.length).toBe(10);
      expect(refused.length).toBeGreaterThan(0);
      for (const err of refused) expect(err).toBeInstanceOf(LockContendedError);
      expect([channelCalls('balance').pay - before[0], channelCalls('quickpay').pay - before[1]]).toEqual([1, 1]);
      expect((await ledger(a)).map((e) => [e?.state, e?.payCalls, e?.refunds])).toEqual([
        ['paid', 1, 0],
        ['paid', 1, 0],
      ]);
      expect(await net(a)).toBe(12800);
      expect(await orders.get(MERCHANT, a.merchantOrderNo)).toMatchObject({ status: 'PAID', paidPlanId: a.planId });
      expect(await eventsOf(a.orderId)).toEqual(['order.created', 'order.paid']);
      // Paying a paid plan again runs nothing.
      expect((await runner.pay({ accountId: 'acc-pay', planId: a.planId })).status).toBe('PAID');
      expect(channelCalls('balance').pay - before[0]).toBe(1);
    });

    it('failure: the plan FAILS, the instruction already paid is reversed, and the order is payable again with a new plan', async () => {
      const a = await orderWithPlan('acc-fail');
      configure('quickpay', { pay: 'failure' });
      const reversesBefore = channelCalls('balance').reverse;
      const failed = await runner.pay({ accountId: 'acc-fail', planId: a.planId });
      expect(failed.status).toBe('FAILED');
      expect(failed.instructions.map((i) => [i.method, i.status, i.reversal])).toEqual([
        ['balance', 'SUCCEEDED', 'REVERSED'],
        ['quickpay', 'FAILED', undefined],
      ]);
      expect(channelCalls('balance').reverse - reversesBefore).toBe(1);
      expect((await ledger(a)).map((e) => [e?.state, e?.refunds])).toEqual([
        ['paid', 1],
        ['declined', 0],
      ]);
      expect(await net(a)).toBe(0);
      const order = await orders.checkout('acc-fail', a.orderId);
      expect([order.status, order.activePlanId]).toEqual(['CREATED', undefined]);

      configure('quickpay', { pay: 'success' });
      const again = await plans.create({ accountId: 'acc-fail', orderId: a.orderId, instructions: [{ method: 'quickpay', amount: 12800 }] });
      expect(again.created).toBe(true);
      expect((await runner.pay({ accountId: 'acc-fail', planId: again.plan.planId })).status).toBe('PAID');
      expect(await eventsOf(a.orderId)).toEqual(['order.created', 'order.paid']);
    });

    it('a later instruction is skipped after a failure; an unconfirmed reversal is retried from the queue until the channel confirms', async () => {
      const a = await orderWithPlan('acc-rev', [
        { method: 'balance', amount: 2800 },
        { method: 'points', amount: 5000 },
        { method: 'ebanking', amount: 5000 },
      ]);
      configure('points', { pay: 'failure' });
      configure('balance', { reverse: 'unknown' });
      const ebankingPays = channelCalls('ebanking').pay;
      const failed = await runner.pay({ accountId: 'acc-rev', planId: a.planId });
      expect(failed.instructions.map((i) => [i.status, i.reversal])).toEqual([
        ['SUCCEEDED', 'PENDING'],
        ['FAILED', undefined],
        ['SKIPPED', undefined],
      ]);
      configure('balance', { reverse: 'success' });
      await waitUntil('the reversal confirmed', async () => (await plans.get('acc-rev', a.planId)).instructions[0].reversal === 'REVERSED', 10_000);
      expect(channelCalls('ebanking').pay).toBe(ebankingPays);
      expect((await ledger(a, a.instructions)).map((e) => e && [e.state, e.refunds])).toEqual([['paid', 1], ['declined', 0], undefined]);
      expect(await net(a, a.instructions)).toBe(0);
    });

    it.each([
      ['success', 'PAID'],
      ['failure', 'FAILED'],
    ] as const)('unknown: the instruction is queried in the background; a query answering %s leaves the plan %s', async (answer, planStatus) => {
      const a = await orderWithPlan('acc-unknown');
      configure('quickpay', { pay: 'unknown', query: answer });
      const before = channelCalls('quickpay');
      const parked = await runner.pay({ accountId: 'acc-unknown', planId: a.planId });
      expect([parked.status, parked.instructions.map((i) => i.status)]).toEqual(['PAYING', ['SUCCEEDED', 'UNKNOWN']]);
      expect((await orders.get(MERCHANT, a.merchantOrderNo)).status).toBe('PAYING');
      // Paying again meanwhile runs nothing: the query decides.
      expect((await runner.pay({ accountId: 'acc-unknown', planId: a.planId })).status).toBe('PAYING');
      // A failed plan is written FAILED first and reversed right after: wait for both.
      await waitUntil(
        'the query resolved the plan',
        async () => {
          const p = await plans.get('acc-unknown', a.planId);
          return p.status === planStatus && (planStatus === 'PAID' || p.instructions[0].reversal === 'REVERSED');
        },
        10_000,
      );
      const after = channelCalls('quickpay');
      expect(after.pay - before.pay).toBe(1);
      expect(after.query - before.query).toBeGreaterThanOrEqual(1);
      const order = await orders.get(MERCHANT, a.merchantOrderNo);
      expect(order.status).toBe(planStatus === 'PAID' ? 'PAID' : 'CREATED');
      if (planStatus === 'FAILED') expect((await plans.get('acc-unknown', a.planId)).instructions[0].reversal).toBe('REVERSED');
      // Once the channel answered, what it holds is what the plan says: everything, or nothing.
      expect(await net(a)).toBe(planStatus === 'PAID' ? 12800 : 0);
      expect((await ledger(a)).map((e) => e?.payCalls)).toEqual([1, 1]);
    });

    it('a query that stays unknown is retried with backoff until the channel knows', async () => {
      const a = await orderWithPlan('acc-retry', [{ method: 'ebanking', amount: 12800 }]);
      configure('ebanking', { pay: 'unknown', query: 'unknown' });
      const before = channelCalls('ebanking');
      await runner.pay({ accountId: 'acc-retry', planId: a.planId });
      await waitUntil('two unknown answers', async () => channelCalls('ebanking').query - before.query >= 2, 10_000);
      expect((await plans.get('acc-retry', a.planId)).status).toBe('PAYING');
      configure('ebanking', { query: 'success' });
      await waitUntil('paid after the channel knows', async () => (await plans.get('acc-retry', a.planId)).status === 'PAID', 10_000);
      expect(channelCalls('ebanking').pay - before.pay).toBe(1);
    });

    it('pay racing close, 30 times: each order ends PAID or CLOSED, never both, and a closed order reached no channel', async () => {
      const outcomes: string[] = [];
      for (let i = 0; i < 30; i++) {
        const a = await orderWithPlan('acc-race', [{ method: 'points', amount: 12800 }]);
        const before = channelCalls('points').pay;
        const [pay, close] = await Promise.allSettled([runner.pay({ accountId: 'acc-race', planId: a.planId }), orders.close(MERCHANT, a.merchantOrderNo)]);
        const order = await orders.get(MERCHANT, a.merchantOrderNo);
        const events = await eventsOf(a.orderId);
        expect(['PAID', 'CLOSED']).toContain(order.status);
        expect(events.filter((e) => e !== 'order.created')).toEqual([order.status === 'PAID' ? 'order.paid' : 'order.closed']);
        expect(pay.status === 'fulfilled' && pay.value.status === 'PAID').toBe(order.status === 'PAID');
        expect(close.status === 'fulfilled').toBe(order.status === 'CLOSED');
        expect(channelCalls('points').pay - before).toBe(order.status === 'PAID' ? 1 : 0);
        outcomes.push(order.status);
      }
      expect(outcomes).toHaveLength(30);
    });
  });

  describe('state writes: versions and fencing tokens', () => {
    it('a stale lock holder is refused: after its lease ran out and another took the lock, its write is STALE_TOKEN and changes nothing', async () => {
      const locks = t.app.get(LockService);
      const a = await orderWithPlan('acc-fence');
      const name = `plan:${a.planId}`;
      const stale = await locks.acquire(name, { leaseMs: 100, watchdog: false });
      await new Promise((r) => setTimeout(r, 250));
      const fresh = await locks.acquire(name, { leaseMs: 5000 });
      expect(fresh.fencingToken).toBeGreaterThan(stale.fencingToken);
      try {
        const s = await store.readPlan(a.planId);
        const ok = await store.write({
          orderId: a.orderId,
          planId: a.planId,
          guard: { lock: 'plan', token: fresh.fencingToken },
          plan: { version: s.plan!.version, set: { failureReason: 'fresh holder' } },
        });
        expect(ok.status).toBe('OK');
        const refused = await store.write({
          orderId: a.orderId,
          planId: a.planId,
          guard: { lock: 'plan', token: stale.fencingToken },
          plan: { version: ok.planVersion, set: { status: 'PAID' } },
        });
        expect(refused.status).toBe('STALE_TOKEN');
        const after = await store.readPlan(a.planId);
        expect([after.plan!.status, after.plan!.version, after.plan!.failureReason]).toEqual(['PENDING', ok.planVersion, 'fresh holder']);
      } finally {
        await fresh.release();
        await stale.release().catch(() => undefined);
      }
    });

    it('a write with a version older than the stored one is VERSION and changes nothing (no lost update)', async () => {
      const a = await orderWithPlan('acc-version');
      const s = await store.read(a.orderId);
      const first = await store.write({
        orderId: a.orderId,
        guard: { lock: 'order', token: Number.MAX_SAFE_INTEGER },
        order: { version: s.order!.version, set: { subject: 'first' } },
      });
      const second = await store.write({
        orderId: a.orderId,
        guard: { lock: 'order', token: Number.MAX_SAFE_INTEGER },
        order: { version: s.order!.version, set: { subject: 'second' } },
      });
      expect([first.status, second.status]).toEqual(['OK', 'VERSION']);
      expect((await store.read(a.orderId)).order!.subject).toBe('first');
      // The order's fence is now above any token the lock engine issues: every real holder of the order lock is refused from here on.
      expect((await rejection(orders.close(MERCHANT, a.merchantOrderNo), OrderConflictError)).code).toBe('STALE_LOCK_HOLDER');
    });
  });

  describe('retention', () => {
    it("a plan written alone renews its order's retention too: a plan never outlives its order", async () => {
      // Otherwise a plan written after its order's last write (a reversal confirmed hours later) outlived the order, and the
      // merchantOrderNo, made again once the order was gone, got the same order id while its first plan id was still taken.
      const a = await orderWithPlan('acc-retention');
      const [orderKey, planKey] = orderKeys(keyBuilder, a.orderId, a.planId);
      // The order's last write long ago: a minute of its retention left.
      await raw.pexpire(orderKey, 60_000);
      const s = await store.readPlan(a.planId);
      const w = await store.write({ orderId: a.orderId, planId: a.planId, plan: { version: s.plan!.version, set: { failureReason: 'written alone' } } });
      expect(w.status).toBe('OK');
      const [orderTtl, planTtl] = [await raw.pttl(orderKey), await raw.pttl(planKey)];
      expect(planTtl).toBeGreaterThan(86_400_000);
      expect(orderTtl).toBeGreaterThanOrEqual(planTtl - 1000);
    });
  });

  describe('events', () => {
    it('a consumer group gets created, paid and closed events from every shard, each once, and acks them', async () => {
      const events = t.app.get(OrderEventsService);
      const seen: OrderEvent[] = [];
      const consumer = await events.consume('it-group-1', async (e) => void seen.push(e), { consumer: 'c1', pollMs: 20, startFrom: 'now' });
      const paidOrders = await Promise.all(Array.from({ length: 6 }, () => orderWithPlan('acc-events', [{ method: 'balance', amount: 12800 }])));
      await Promise.all(paidOrders.map((a) => runner.pay({ accountId: 'acc-events', planId: a.planId })));
      const closed = await createOrder(orderNo());
      await orders.close(MERCHANT, closed.order.merchantOrderNo);
      const mine = (e: OrderEvent) => [...paidOrders.map((a) => a.orderId), closed.order.orderId].includes(e.orderId);
      // 7 created, 6 paid, 1 closed.
      await waitUntil('14 events', async () => seen.filter(mine).length >= 14 || `${seen.filter(mine).length}`, 10_000);
      await new Promise((r) => setTimeout(r, 100));
      await consumer.stop();
      const got = seen.filter(mine);
      expect(got).toHaveLength(14);
      expect(new Set(got.map((e) => `${e.stream}/${e.id}`)).size).toBe(14);
      expect(
        got
          .filter((e) => e.type === 'order.paid')
          .map((e) => e.orderId)
          .sort(),
      ).toEqual(paidOrders.map((a) => a.orderId).sort());
      expect(got.find((e) => e.type === 'order.closed')).toMatchObject({
        orderId: closed.order.orderId,
        status: 'CLOSED',
        closeReason: 'MERCHANT',
        merchantId: MERCHANT,
        amount: 12800,
      });
      expect(got.find((e) => e.type === 'order.paid')).toMatchObject({ status: 'PAID', accountId: 'acc-events', currency: 'CNY' });
      expect(new Set(got.map((e) => e.stream)).size).toBeGreaterThan(1);
      for (const stream of events.streams()) expect((await raw.xpending(stream, 'it-group-1'))[0]).toBe(0);
    });

    it('an event whose handler failed, or whose consumer stopped before the ack, is handed over again', async () => {
      const events = t.app.get(OrderEventsService);
      let failures = 0;
      const delivered: string[] = [];
      const flaky = await events.consume(
        'it-group-2',
        async (e) => {
          if (failures++ < 1) throw new Error('handler failed once');
          delivered.push(e.orderId);
        },
        { consumer: 'flaky', pollMs: 20, retry: { visibilityMs: 200 }, startFrom: 'now' },
      );
      const { order } = await createOrder(orderNo());
      await waitUntil('the event after a retry', async () => delivered.includes(order.orderId), 10_000);
      expect(failures).toBeGreaterThanOrEqual(2);
      await flaky.stop();

      // A consumer that reads an event and dies without acking: another one in the group takes it over.
      const stream = orderKeys(keyBuilder, order.orderId)[2];
      const second = await createOrder(orderNo());
      const secondStream = orderKeys(keyBuilder, second.order.orderId)[2];
      const read = (await raw.xreadgroup('GROUP', 'it-group-2', 'dead-consumer', 'COUNT', 100, 'STREAMS', secondStream, '>')) as Array<
        [string, Array<[string, string[]]>]
      >;
      expect(read[0][1].length).toBeGreaterThanOrEqual(1);
      const takeover: string[] = [];
      const heir = await events.consume('it-group-2', async (e) => void takeover.push(e.orderId), {
        consumer: 'heir',
        pollMs: 20,
        retry: { visibilityMs: 200 },
      });
      await waitUntil("the dead consumer's event", async () => takeover.includes(second.order.orderId), 10_000);
      await heir.stop();
      expect(stream).toMatch(/:events$/);
      expect((await raw.xpending(secondStream, 'it-group-2'))[0]).toBe(0);
    });

    it('a shard whose reads fail does not let the next round start on another shard while its handler runs; stop() waits for it', async () => {
      const events = t.app.get(OrderEventsService);
      const [broken, busy] = events.streams();
      let running = 0;
      let overlapped = false;
      const handled: string[] = [];
      const consumer = await events.consume(
        'it-group-3',
        async (e) => {
          if (e.stream !== busy) return;
          if (++running > 1) overlapped = true;
          await sleep(300);
          running--;
          handled.push(e.id);
        },
        { consumer: 'c3', pollMs: 20, startFrom: 'now' },
      );
      // Every read of the first shard fails from now on (its group is gone): its round rejects at once.
      await raw.xgroup('DESTROY', broken, 'it-group-3');
      const first = await raw.xadd(busy, '*', 'type', 'order.created', 'orderId', 'ord_first');
      await waitUntil('the first handler running', async () => running === 1, 5000);
      await raw.xadd(busy, '*', 'type', 'order.created', 'orderId', 'ord_second');
      await sleep(150);
      await consumer.stop();
      expect({ overlapped, runningAfterStop: running, handled }).toEqual({ overlapped: false, runningAfterStop: 0, handled: [first] });
    });

    it('failing events do not hide the pending ones behind them: the takeover follows its cursor', async () => {
      const events = t.app.get(OrderEventsService);
      const stream = events.streams()[2];
      const attempts = new Map<string, number>();
      let delivered = false;
      const consumer = await events.consume(
        'it-group-4',
        async (e) => {
          if (e.stream !== stream) return;
          const n = (attempts.get(e.id) ?? 0) + 1;
          attempts.set(e.id, n);
          if (e.orderId !== 'ord_good' || n === 1) throw new Error('handler failed');
          delivered = true;
        },
        { consumer: 'c4', pollMs: 10, retry: { visibilityMs: 100, attempts: 1000 }, batchSize: 1, startFrom: 'now' },
      );
      // Four events that always fail, then one that fails once: with a takeover of one entry per round always
      // starting over, the failing ones (idle long enough again by turns, ahead of it) would be all it ever takes.
      for (const o of ['ord_bad1', 'ord_bad2', 'ord_bad3', 'ord_bad4', 'ord_good']) await raw.xadd(stream, '*', 'type', 'order.created', 'orderId', o);
      await waitUntil('the good event handled', async () => delivered || `${JSON.stringify([...attempts.values()])}`, 5000);
      await consumer.stop();
    });

    it('with concurrency, a consumer handles several events of one shard at once, each once, and acks them all', async () => {
      const events = t.app.get(OrderEventsService);
      const stream = events.streams()[4];
      const seen: string[] = [];
      let running = 0;
      let maxRunning = 0;
      const consumer = await events.consume(
        'it-group-6',
        async (e) => {
          if (e.stream !== stream) return;
          maxRunning = Math.max(maxRunning, ++running);
          await sleep(10);
          running--;
          seen.push(e.orderId);
        },
        { consumer: 'c6', concurrency: 8, startFrom: 'now' },
      );
      const pipe = raw.pipeline();
      for (let i = 0; i < 40; i++) pipe.xadd(stream, '*', 'type', 'order.created', 'orderId', `ord_c${i}`);
      await pipe.exec();
      await waitUntil('40 events acked', async () => (seen.length >= 40 && (await raw.xpending(stream, 'it-group-6'))[0] === 0) || `${seen.length}`, 5000);
      await consumer.stop();
      expect(seen.sort()).toEqual(Array.from({ length: 40 }, (_, i) => `ord_c${i}`).sort());
      expect(maxRunning).toBeGreaterThan(1);
      expect(maxRunning).toBeLessThanOrEqual(8);
    });

    it('refuses a concurrency outside 1..1000, naming it', async () => {
      const events = t.app.get(OrderEventsService);
      for (const concurrency of [0, 1001, 2.5, Number.NaN]) {
        const err = (await events
          .consume('it-group-7', async () => undefined, { consumer: 'c7', concurrency })
          .catch((e: unknown) => e)) as InvalidArgumentError;
        expect(err).toBeInstanceOf(InvalidArgumentError);
        expect(err.details).toEqual([{ field: 'concurrency', errors: ['concurrency must be an integer from 1 to 1000'] }]);
      }
    });

    it('an event whose handler keeps failing is given up after retry.attempts deliveries: acked, counted, and kept on the dead stream', async () => {
      const events = t.app.get(OrderEventsService);
      const metrics = t.app.get(OrdersMetrics);
      const deadCount = async () =>
        (await metrics.eventsHandled.get()).values.find((v) => v.labels.group === 'it-group-5' && v.labels.outcome === 'dead')?.value ?? 0;
      const stream = events.streams()[3];
      let calls = 0;
      const consumer = await events.consume(
        'it-group-5',
        async (e) => {
          if (e.stream !== stream) return;
          calls++;
          throw new Error('poison');
        },
        { consumer: 'c5', pollMs: 10, retry: { visibilityMs: 100, attempts: 3 }, startFrom: 'now' },
      );
      const id = await raw.xadd(stream, '*', 'type', 'order.paid', 'orderId', 'ord_poison');
      await waitUntil('the event given up', async () => calls > 0 && (await raw.xpending(stream, 'it-group-5'))[0] === 0, 5000);
      await sleep(400);
      await consumer.stop();
      expect(calls).toBe(3);
      expect(await deadCount()).toBe(1);
      const dead = (await raw.xrange(events.deadStreams()[3], '-', '+')).map(([, f]) =>
        Object.fromEntries(Array.from({ length: f.length / 2 }, (_, i) => [f[2 * i], f[2 * i + 1]])),
      );
      expect(dead.filter((d) => d.group === 'it-group-5')).toEqual([
        expect.objectContaining({ eventId: id, deliveries: '3', error: 'poison', type: 'order.paid', orderId: 'ord_poison' }),
      ]);
    });
  });
});
