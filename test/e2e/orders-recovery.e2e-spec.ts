import { Logger } from '@nestjs/common';
import request from 'supertest';
import { DelayQueueService } from '../../src/engines/delay-queue/delay-queue.service';
import { DelayQueueStore } from '../../src/engines/delay-queue/delay-queue.store';
import { ChannelGateway } from '../../src/features/orders/channels/channel-gateway';
import type { ChannelSettings } from '../../src/features/orders/channels/payment-channel';
import { orderIndexKey, orderKeys, orderNumberKeyOf } from '../../src/features/orders/order.keys';
import { orderLockName, planLockName } from '../../src/features/orders/order-locks';
import { EXPIRY_QUEUE, legId, legReference, QUERY_QUEUE, RESUME_QUEUE, REVERSAL_QUEUE } from '../../src/features/orders/order-queues';
import type { Instruction, PaymentMethod } from '../../src/features/orders/order.types';
import { OrdersService } from '../../src/features/orders/orders.service';
import { OrdersStore, type WriteRequest } from '../../src/features/orders/orders.store';
import { PaymentPlansService } from '../../src/features/orders/payment-plans.service';
import { PaymentRunner } from '../../src/features/orders/payment-runner.service';
import { LockService } from '../../src/engines/locks/lock.service';
import type { LockHandle } from '../../src/engines/locks/lock.types';
import { KeyBuilder } from '../../src/platform/redis/key-builder';
import { RedisUnavailableError } from '../../src/platform/redis/redis-unavailable.error';
import { waitUntil } from '../harness/redis-process';
import { ledgerOf, type Legs, netHeld, orderWithPlan as newOrderWithPlan } from '../support/orders-fixture';
import { CREDS, TestApp } from '../support/test-app';
import { useOrdersApp } from '../support/orders-app';
import type Redis from 'ioredis';
import { setTimeout as sleep } from 'node:timers/promises';

/**
 * Recovery of payment plans whose run stopped part-way (a process killed, or a
 * Redis error between two steps), against a real redis-server. A death is
 * simulated by making one call reject at a chosen point, as a killed process
 * or a command timeout would leave it; what is checked is that the background
 * entries finish the plan and give every owed refund back, and the money as
 * the simulated channels' ledgers record it (each ref charged at most once,
 * reversed at most once, net zero after a failed plan).
 */
const MERCHANT = CREDS.merchantId;
const PLAN_LEASE_MS = 1000;
const QUERY_DELAY_MS = 50;
describe('payment plans: recovery', () => {
  let raw: Redis;
  let t: TestApp;
  let orders: OrdersService;
  let plans: PaymentPlansService;
  let runner: PaymentRunner;
  let channels: ChannelGateway;
  let queue: DelayQueueService;
  let store: OrdersStore;
  let seq = 0;
  const configure = (m: PaymentMethod, s: Partial<ChannelSettings>) => channels.configure(m, s);

  const orderWithPlan = (account: string, legs?: Legs) => newOrderWithPlan(orders, plans, MERCHANT, `rc-${process.pid}-${++seq}`, account, legs);
  const ledger = (plan: { planId: string; legStamp: string }, legs: Legs) => ledgerOf(channels, plan, legs);
  /** Rejects the first state write matching `match`, as a Redis timeout (or a kill) at that point would. */
  const failWrite = (match: (w: WriteRequest) => boolean, after = false) => {
    const original = store.write.bind(store);
    let fired = false;
    return jest.spyOn(store, 'write').mockImplementation(async (w) => {
      if (fired || !match(w)) return original(w);
      fired = true;
      if (after) await original(w);
      throw new RedisUnavailableError(new Error('Command timed out'));
    });
  };
  const legWrite = (planId: string, index: number, status: Instruction['status']) => (w: WriteRequest) =>
    w.planId === planId &&
    Array.isArray(w.plan?.set.instructions) &&
    (w.plan.set.instructions as Instruction[])[index]?.status === status &&
    w.plan.set.status === undefined;

  const app = useOrdersApp({
    ORDERS_QUERY_DELAY_MS: String(QUERY_DELAY_MS),
    CHANNEL_LATENCY_MS: '5',
    LOCK_POLICIES: `order:2000:0,payment-plan:${PLAN_LEASE_MS}:0`,
  });
  beforeAll(() => {
    ({ raw, t, orders, plans, runner, channels, queue, store } = app);
  });

  /** Makes (queue, id) a dead letter, as a worker that used up its deliveries would: claimed here, failed with no tries left. */
  const deadLetter = async (q: string, id: string) => {
    const store = t.app.get(DelayQueueStore);
    const k = store.keys(q);
    await waitUntil(
      `${id} dead-lettered`,
      async () => {
        // The app's own worker retries the item too: a delivery it holds (whose reply it may never have read, on a
        // loaded machine) is failed with its own lease token; otherwise claim until this claim is the one that gets it.
        const lease = await raw.hget(k.keys[7], id);
        if (lease) await store.fail(k, id, Number(lease.split(':')[0]), 1, 0, 'the channel never confirmed the reversal');
        const { claimed } = await store.claim(k, 1, 60_000, 1000, 100);
        for (const d of claimed) {
          if (d.id === id) await store.fail(k, d.id, d.token, 1, 0, 'the channel never confirmed the reversal');
          else await store.release(k, d.id, d.token, 1000);
        }
        return (await queue.get(q, id))?.state === 'dead';
      },
      20_000,
      5,
    );
  };

  describe('a failed plan never loses a refund', () => {
    it('Redis fails while the reversal is being queued: nothing is FAILED yet, and the retried pay fails the plan and refunds once', async () => {
      const a = await orderWithPlan('acc-f4');
      configure('quickpay', { pay: 'failure' });
      const original = queue.schedule.bind(queue);
      jest.spyOn(queue, 'schedule').mockImplementation((q, id, when, payload, opts) => {
        if (q === REVERSAL_QUEUE) return Promise.reject(new RedisUnavailableError(new Error('Command timed out')));
        return original(q, id, when, payload, opts);
      });
      await expect(runner.pay({ accountId: 'acc-f4', planId: a.planId })).rejects.toBeInstanceOf(RedisUnavailableError);
      jest.restoreAllMocks();
      // The order was not made payable again while the refund was owed and not queued.
      expect((await orders.get(MERCHANT, a.merchantOrderNo)).status).toBe('PAYING');

      const again = await runner.pay({ accountId: 'acc-f4', planId: a.planId });
      await sleep(PLAN_LEASE_MS + 500);
      const plan = await plans.get('acc-f4', a.planId);
      const [balance, quickpay] = await ledger(a, a.instructions);
      expect({
        status: again.status,
        reversal: plan.instructions[0].reversal,
        balance: [balance?.state, balance?.refunds, balance?.payCalls],
        quickpay: [quickpay?.state, quickpay?.payCalls],
        net: netHeld([balance, quickpay]),
        queued: (await queue.get(REVERSAL_QUEUE, `${a.planId}:0`)) !== null,
        order: (await orders.get(MERCHANT, a.merchantOrderNo)).status,
      }).toEqual({ status: 'FAILED', reversal: 'REVERSED', balance: ['paid', 1, 1], quickpay: ['declined', 1], net: 0, queued: false, order: 'CREATED' });
    });

    it('the run dies right after the FAILED write: the reversal queued before it gives the money back', async () => {
      const a = await orderWithPlan('acc-f4-kill');
      configure('quickpay', { pay: 'failure' });
      // The FAILED write lands, then the process "dies" (the pay never gets to reverse inline).
      failWrite((w) => w.planId === a.planId && w.plan?.set.status === 'FAILED', true);
      await expect(runner.pay({ accountId: 'acc-f4-kill', planId: a.planId })).rejects.toBeInstanceOf(RedisUnavailableError);
      jest.restoreAllMocks();
      const failed = await plans.get('acc-f4-kill', a.planId);
      expect([failed.status, failed.instructions[0].reversal]).toEqual(['FAILED', 'PENDING']);
      expect(netHeld(await ledger(a, a.instructions))).toBe(2800);

      await waitUntil('the queued reversal ran', async () => (await plans.get('acc-f4-kill', a.planId)).instructions[0].reversal === 'REVERSED', 10_000);
      const [balance] = await ledger(a, a.instructions);
      expect([balance?.refunds, netHeld(await ledger(a, a.instructions))]).toEqual([1, 0]);
      // The worker acks the entry once its handler has returned, a moment after the REVERSED write.
      await waitUntil('the reversal entry was acked', async () => (await queue.get(REVERSAL_QUEUE, `${a.planId}:0`)) === null, 5_000);
      expect((await ledger(a, a.instructions))[0]?.refunds).toBe(1);
    });

    it('paying a FAILED plan queues again a reversal it still owes whose entry is gone', async () => {
      const a = await orderWithPlan('acc-f4-requeue');
      configure('quickpay', { pay: 'failure' });
      configure('balance', { reverse: 'unknown' });
      expect((await runner.pay({ accountId: 'acc-f4-requeue', planId: a.planId })).instructions[0].reversal).toBe('PENDING');
      // The entry is lost (say, a restore from an older snapshot); the channel now confirms reversals. Done under
      // the plan lock, so that no retry of the entry is half-way through meanwhile.
      const locks = t.app.get(LockService);
      let held: LockHandle | undefined;
      await waitUntil('the plan lock', async () => !!(held = await locks.acquire(`plan:${a.planId}`, { leaseMs: 5000 }).catch(() => undefined)), 5000);
      await queue.cancel(REVERSAL_QUEUE, `${a.planId}:0`);
      configure('balance', { reverse: 'success' });
      await held!.release();
      await sleep(300);
      expect((await plans.get('acc-f4-requeue', a.planId)).instructions[0].reversal).toBe('PENDING');

      expect((await runner.pay({ accountId: 'acc-f4-requeue', planId: a.planId })).status).toBe('FAILED');
      await waitUntil('the re-queued reversal ran', async () => (await plans.get('acc-f4-requeue', a.planId)).instructions[0].reversal === 'REVERSED', 10_000);
      expect(netHeld(await ledger(a, a.instructions))).toBe(0);
    });
  });

  describe('a plan whose run stopped is carried on', () => {
    it.each([0, 1])('the run stops just before instruction %i is sent: the resume entry pays the rest, each instruction charged once', async (index) => {
      const a = await orderWithPlan(`acc-f5-${index}`);
      failWrite(legWrite(a.planId, index, 'SENT'));
      await expect(runner.pay({ accountId: `acc-f5-${index}`, planId: a.planId })).rejects.toBeInstanceOf(RedisUnavailableError);
      jest.restoreAllMocks();
      const stopped = await plans.get(`acc-f5-${index}`, a.planId);
      expect([stopped.status, stopped.instructions[index].status]).toEqual(['PAYING', 'PENDING']);

      await waitUntil('the plan resumed', async () => (await plans.get(`acc-f5-${index}`, a.planId)).status === 'PAID', 10_000);
      expect((await orders.get(MERCHANT, a.merchantOrderNo)).status).toBe('PAID');
      expect((await ledger(a, a.instructions)).map((e) => [e?.state, e?.payCalls])).toEqual([
        ['paid', 1],
        ['paid', 1],
      ]);
      expect(netHeld(await ledger(a, a.instructions))).toBe(12800);
      expect(await queue.get(RESUME_QUEUE, a.planId)).toBeNull();
    });

    it('a query handler that stops after settling its instruction is delivered again and carries the plan on', async () => {
      const a = await orderWithPlan('acc-f5-query');
      configure('balance', { pay: 'unknown', query: 'unknown' });
      expect((await runner.pay({ accountId: 'acc-f5-query', planId: a.planId })).status).toBe('PAYING');
      // The resume entry has fired meanwhile, found the plan waiting for its query, and is gone.
      await waitUntil('the resume entry done', async () => (await queue.get(RESUME_QUEUE, a.planId)) === null, 10_000);
      // The query now settles instruction 0; the handler stops right after (the next step fails once).
      const original = queue.schedule.bind(queue);
      let failed = 0;
      jest.spyOn(queue, 'schedule').mockImplementation((q, id, when, payload, opts) => {
        if (q === RESUME_QUEUE && failed++ === 0) return Promise.reject(new RedisUnavailableError(new Error('Command timed out')));
        return original(q, id, when, payload, opts);
      });
      configure('balance', { query: 'success' });
      await waitUntil('the plan paid', async () => (await plans.get('acc-f5-query', a.planId)).status === 'PAID', 10_000);
      expect(failed).toBeGreaterThanOrEqual(1);
      expect((await ledger(a, a.instructions)).map((e) => e?.payCalls)).toEqual([1, 1]);
    });

    it('a SENT instruction whose pay never reached the channel is not taken as paid: the channel knows no such payment', async () => {
      const a = await orderWithPlan('acc-f6', [{ method: 'ebanking', amount: 5000 }]);
      // The process dies between the SENT write and the channel call.
      jest.spyOn(channels, 'pay').mockImplementationOnce(() => Promise.reject(new Error('process killed')));
      await expect(runner.pay({ accountId: 'acc-f6', planId: a.planId })).rejects.toThrow('process killed');
      jest.restoreAllMocks();
      const paysBefore = channels.channel('ebanking').calls.pay;
      const after = await runner.pay({ accountId: 'acc-f6', planId: a.planId });
      expect(channels.channel('ebanking').calls.pay).toBe(paysBefore);
      expect([after.status, after.instructions[0].status]).toEqual(['FAILED', 'FAILED']);
      expect(await ledger(a, a.instructions)).toEqual([undefined]);
      expect((await orders.get(MERCHANT, a.merchantOrderNo)).status).toBe('CREATED');
    });
  });

  describe('a reversal that outlives its order', () => {
    /** Deletes the order, its plan and its number index entry, as their expiry does once the retention is over. */
    const retentionEnds = async (a: { orderId: string; planId: string; merchantOrderNo: string }) => {
      const keys = t.app.get(KeyBuilder);
      const [orderKey, planKey] = orderKeys(keys, a.orderId, a.planId);
      expect(await raw.del(orderKey, planKey, orderIndexKey(keys, orderNumberKeyOf(MERCHANT, a.merchantOrderNo)))).toBe(3);
    };
    /** A failed plan of `account` whose balance leg is owed back (the channel does not confirm reversals): the plan and its reversal id. */
    const owingReversal = async (account: string, reverse: 'failure' | 'unknown') => {
      const a = await orderWithPlan(account);
      configure('quickpay', { pay: 'failure' });
      configure('balance', { reverse });
      expect((await runner.pay({ accountId: account, planId: a.planId })).instructions[0].reversal).toBe('PENDING');
      return { a, id: legId(a.planId, 0) };
    };
    const admin = { 'x-admin-key': CREDS.adminKey };
    const retryOverHttp = (id: string) =>
      request(t.server)
        .post(`/admin/delay-queues/${REVERSAL_QUEUE}/dead/${encodeURIComponent(id)}/retry`)
        .set(admin);

    it('a dead-lettered reversal re-driven after the order and plan are gone gives the money back once; again moves nothing', async () => {
      const { a, id } = await owingReversal('acc-outlive', 'failure');
      await deadLetter(REVERSAL_QUEUE, id);
      const item = (await queue.get(REVERSAL_QUEUE, id))!.payload;
      await retentionEnds(a);
      expect(netHeld(await ledger(a, a.instructions))).toBe(2800);

      // Ops re-drive the dead letter once the channel works again: the item alone gives the money back.
      configure('balance', { reverse: 'success' });
      expect((await retryOverHttp(id)).status).toBe(200);
      await waitUntil('the reversal entry acked', async () => (await queue.get(REVERSAL_QUEUE, id)) === null, 10_000);
      const [balance] = await ledger(a, a.instructions);
      expect([balance?.state, balance?.payCalls, balance?.refunds, netHeld(await ledger(a, a.instructions))]).toEqual(['paid', 1, 1, 0]);
      // Nothing was written for the plan: it stays gone.
      expect((await store.readPlan(a.planId)).plan).toBeNull();

      // Retrying again: no dead letter any more (404), and a second delivery of the same item moves nothing.
      expect((await retryOverHttp(id)).status).toBe(404);
      const reverses = channels.channel('balance').calls.reverse;
      await queue.schedule(REVERSAL_QUEUE, id, { delayMs: 0 }, item);
      await waitUntil('the second delivery acked', async () => (await queue.get(REVERSAL_QUEUE, id)) === null, 10_000);
      expect(channels.channel('balance').calls.reverse).toBeGreaterThan(reverses);
      expect((await ledger(a, a.instructions))[0]?.refunds).toBe(1);
      expect(netHeld(await ledger(a, a.instructions))).toBe(0);
    });

    it('an item queued by an earlier version (the leg only) still reverses while its plan exists', async () => {
      const { a, id } = await owingReversal('acc-legacy', 'unknown');
      expect((await queue.get<Record<string, unknown>>(REVERSAL_QUEUE, id))?.payload).toMatchObject({
        method: 'balance',
        amount: 2800,
        accountId: 'acc-legacy',
      });
      // As the previous version queued it: { planId, index } only.
      await queue.schedule(REVERSAL_QUEUE, id, { delayMs: 0 }, { planId: a.planId, index: 0 });
      configure('balance', { reverse: 'success' });
      await waitUntil('the reversal ran', async () => (await plans.get('acc-legacy', a.planId)).instructions[0].reversal === 'REVERSED', 10_000);
      expect([(await ledger(a, a.instructions))[0]?.refunds, netHeld(await ledger(a, a.instructions))]).toEqual([1, 0]);
    });

    it('an earlier-version item whose plan is gone does not vanish: it fails with the reason, logged at error, for ops', async () => {
      const errors: unknown[][] = [];
      jest.spyOn(Logger.prototype, 'error').mockImplementation((...args: unknown[]) => void errors.push(args));
      const { a, id } = await owingReversal('acc-legacy-gone', 'unknown');
      await retentionEnds(a);
      await queue.schedule(REVERSAL_QUEUE, id, { delayMs: 0 }, { planId: a.planId, index: 0 });
      await waitUntil('the item failed', async () => !!(await queue.get(REVERSAL_QUEUE, id))?.lastError, 10_000);
      expect((await queue.get(REVERSAL_QUEUE, id))?.lastError).toContain('reverse it by hand');
      expect(errors.some(([f]) => (f as { id?: string }).id === id)).toBe(true);
      expect(netHeld(await ledger(a, a.instructions))).toBe(2800);
      await queue.cancel(REVERSAL_QUEUE, id);
    });
    it.each([QUERY_QUEUE, RESUME_QUEUE])('a %s entry whose plan is gone fails with the reason instead of vanishing', async (q) => {
      const a = await orderWithPlan(`acc-gone-${q}`);
      await retentionEnds(a);
      const id = q === QUERY_QUEUE ? legId(a.planId, 0) : a.planId;
      await queue.schedule(q, id, { delayMs: 0 }, q === QUERY_QUEUE ? { planId: a.planId, index: 0 } : { planId: a.planId });
      await waitUntil('the entry failed', async () => !!(await queue.get(q, id))?.lastError, 10_000);
      expect((await queue.get(q, id))?.lastError).toContain('no longer stored');
      await queue.cancel(q, id);
    });
  });

  describe('a merchantOrderNo made again once its order is gone', () => {
    it("the new order's failed plan gets its own reversal while the earlier order's reversal lies dead-lettered: money back once", async () => {
      const no = `rc-${process.pid}-again`;
      const account = 'acc-again';
      configure('quickpay', { pay: 'failure' });
      configure('balance', { reverse: 'unknown' });
      const first = await newOrderWithPlan(orders, plans, MERCHANT, no, account);
      expect((await runner.pay({ accountId: account, planId: first.planId })).instructions[0].reversal).toBe('PENDING');
      // The channel never confirms the first order's reversal: its entry ends dead-lettered (and dead letters never expire).
      await deadLetter(REVERSAL_QUEUE, legId(first.planId, 0));
      // The first order's retention is over: its order, plan and number index entry are gone, as their expiry removes them.
      const keys = t.app.get(KeyBuilder);
      const [orderKey, planKey] = orderKeys(keys, first.orderId, first.planId);
      expect(await raw.del(orderKey, planKey, orderIndexKey(keys, orderNumberKeyOf(MERCHANT, no)))).toBe(3);

      // The number made again; its plan fails as well, and its inline reversal is not confirmed either.
      const second = await newOrderWithPlan(orders, plans, MERCHANT, no, account);
      const failed = await runner.pay({ accountId: account, planId: second.planId });
      expect([failed.status, failed.instructions[0].reversal]).toEqual(['FAILED', 'PENDING']);
      // The channel confirms reversals again: the new plan's own queued reversal gives its money back, once.
      configure('balance', { reverse: 'success' });
      await waitUntil('the new reversal ran', async () => (await plans.get(account, second.planId)).instructions[0].reversal === 'REVERSED', 10_000);
      const [balance] = await ledger(second, second.instructions);
      expect([balance?.payCalls, balance?.refunds, netHeld(await ledger(second, second.instructions))]).toEqual([1, 1, 0]);
      // The earlier order's dead letter is left as it was, for ops; its money is still held by the channel.
      expect((await queue.get(REVERSAL_QUEUE, legId(first.planId, 0)))?.state).toBe('dead');
      expect(netHeld(await ledger(first, first.instructions))).toBe(2800);

      // Every name a life of the number uses derives from its own random order id, so no two lives share one.
      const names = (o: { orderId: string; planId: string; legStamp: string }) => [
        o.planId,
        legId(o.planId, 0),
        legReference(o, 0),
        orderLockName(o.orderId),
        planLockName(o.planId),
      ];
      expect(second.orderId).not.toBe(first.orderId);
      for (const [name, earlier] of names(second).map((n, i) => [n, names(first)[i]])) {
        expect(name).toContain(second.orderId);
        expect(name).not.toContain(first.orderId);
        expect(earlier).toContain(first.orderId);
      }
    });
  });

  it('an order that a failed plan makes payable again after its expiresAt is closed, even when the expiry had given up', async () => {
    const a = await orderWithPlan('acc-late-fail');
    configure('quickpay', { pay: 'unknown', query: 'unknown' });
    expect((await runner.pay({ accountId: 'acc-late-fail', planId: a.planId })).status).toBe('PAYING');
    // The order expires while its payment is unknown, and the expiry job gives up (dead-lettered, here removed).
    await raw.hset(orderKeys(t.app.get(KeyBuilder), a.orderId)[0], 'expiresAt', String(Date.now() - 1000));
    await queue.cancel(EXPIRY_QUEUE, a.orderId);
    configure('quickpay', { query: 'failure' });
    await waitUntil('the plan failed', async () => (await plans.get('acc-late-fail', a.planId)).status === 'FAILED', 10_000);
    await waitUntil('the order closed', async () => (await orders.get(MERCHANT, a.merchantOrderNo)).status === 'CLOSED', 10_000);
    expect((await orders.get(MERCHANT, a.merchantOrderNo)).closeReason).toBe('EXPIRED');
    await waitUntil('the refund', async () => netHeld(await ledger(a, a.instructions)) === 0, 10_000);
  });
});
