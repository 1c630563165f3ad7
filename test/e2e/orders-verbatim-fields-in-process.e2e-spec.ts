import type Redis from 'ioredis';
import { newOrderId, noIndexKey, orderKeys, planIdFor } from '../../src/features/orders/order.keys';
import { OrdersService } from '../../src/features/orders/orders.service';
import { OrdersStore, serverNow } from '../../src/features/orders/orders.store';
import { PaymentPlansService } from '../../src/features/orders/payment-plans.service';
import { PaymentRunner } from '../../src/features/orders/payment-runner.service';
import { KeyBuilder } from '../../src/platform/redis/key-builder';
import { ScriptRegistry } from '../../src/platform/scripts/script-registry.service';
import { rawConnection } from '../harness/redis-process';
import { RedisServerHandle, startRedisServer } from '../harness/redis-server';
import { CREDS, startTestApp, TestApp } from '../support/test-app';

/**
 * lua/features/orders/write-4.lua against a real redis-server: field values are stored
 * exactly as given. It once turned any value `$now` or `$now+<ms>` into the
 * Redis clock, so a merchant's subject `$now` was stored as a timestamp; the
 * fields that take the clock now come in an argument list of their own.
 */

const MERCHANT = CREDS.merchantId;
/** What the write once read as the Redis clock, and neighbours of it. */
const CLOCK_LOOKALIKES = ['$now', '$now+1000', '$now+0', '$now+', '$NOW', ' $now', '$now+1000 '];

describe('orders/write stores field values verbatim', () => {
  let redis: RedisServerHandle;
  let raw: Redis;
  let t: TestApp;
  let store: OrdersStore;
  let keys: KeyBuilder;
  let seq = 0;
  const orderNo = () => `verbatim-${process.pid}-${++seq}`;
  const redisNow = async () => {
    const [s, us] = await raw.time();
    return Number(s) * 1000 + Math.floor(Number(us) / 1000);
  };

  beforeAll(async () => {
    redis = await startRedisServer();
    raw = rawConnection(redis);
    t = await startTestApp(redis.url, { CHANNEL_LATENCY_MS: '5' });
    store = t.app.get(OrdersStore);
    keys = t.app.get(KeyBuilder);
  });

  afterAll(async () => {
    await t?.close();
    raw?.disconnect();
    await redis?.destroy();
  });

  it.each(['$now', '$now+1000'])('an order created with subject %j keeps it, through the checkout, a plan and the payment', async (subject) => {
    const orders = t.app.get(OrdersService);
    const no = orderNo();
    const before = await redisNow();
    const { order, created } = await orders.create({ merchantId: MERCHANT, merchantOrderNo: no, amount: 12800, currency: 'CNY', subject, expireMinutes: 15 });
    expect({ created, subject: order.subject }).toEqual({ created: true, subject });
    // The clock fields still take the Redis clock.
    expect(Date.parse(order.createdAt)).toBeGreaterThanOrEqual(before);
    expect(Date.parse(order.expiresAt) - Date.parse(order.createdAt)).toBe(15 * 60_000);
    expect(await raw.hget(orderKeys(keys, order.orderId)[0], 'subject')).toBe(subject);

    // The same create again is a duplicate of it (its fingerprint holds the subject as sent), not a 409.
    expect((await orders.create({ merchantId: MERCHANT, merchantOrderNo: no, amount: 12800, currency: 'CNY', subject, expireMinutes: 15 })).created).toBe(
      false,
    );
    expect((await orders.checkout('acc_verbatim', order.orderId)).subject).toBe(subject);

    const { plan } = await t.app
      .get(PaymentPlansService)
      .create({ accountId: 'acc_verbatim', orderId: order.orderId, instructions: [{ method: 'balance', amount: 12800 }] });
    expect((await t.app.get(PaymentRunner).pay({ accountId: 'acc_verbatim', planId: plan.planId })).status).toBe('PAID');
    const paid = await orders.get(MERCHANT, no);
    expect({ status: paid.status, subject: paid.subject }).toEqual({ status: 'PAID', subject });
    expect(Date.parse(paid.paidAt!)).toBeGreaterThanOrEqual(Date.parse(order.createdAt));
    expect((await store.read(order.orderId)).order?.subject).toBe(subject);
  });

  it('every field of an order and of a plan is stored as sent, whatever it looks like, beside fields that take the clock', async () => {
    const orderId = newOrderId(MERCHANT, orderNo());
    const planId = planIdFor(orderId, 1);
    const texts = Object.fromEntries(CLOCK_LOOKALIKES.map((v, i) => [`text${i}`, v]));
    const before = await redisNow();
    const r = await store.write({
      orderId,
      planId,
      order: {
        version: 0,
        set: {
          ...texts,
          subject: '$now',
          merchantOrderNo: '$now+1000',
          closeReason: '$now',
          accountId: '$now+1000',
          at: serverNow(),
          later: serverNow(60_000),
        },
      },
      plan: { version: 0, set: { ...texts, failureReason: '$now+1000', accountId: '$now', createdAt: serverNow() } },
    });
    expect(r.status).toBe('OK');
    expect(r.now).toBeGreaterThanOrEqual(before);
    const [orderKey, planKey] = orderKeys(keys, orderId, planId);
    expect(await raw.hgetall(orderKey)).toEqual({
      ...texts,
      subject: '$now',
      merchantOrderNo: '$now+1000',
      closeReason: '$now',
      accountId: '$now+1000',
      at: String(r.now),
      later: String(r.now + 60_000),
      version: '1',
      updatedAt: String(r.now),
    });
    expect(await raw.hgetall(planKey)).toEqual({
      ...texts,
      failureReason: '$now+1000',
      accountId: '$now',
      createdAt: String(r.now),
      version: '1',
      updatedAt: String(r.now),
    });
    const s = await store.read(orderId, planId);
    expect([s.order?.subject, s.order?.closeReason, s.plan?.failureReason, s.plan?.accountId]).toEqual(['$now', '$now', '$now+1000', '$now']);
  });

  describe('the script itself', () => {
    const scripts = () => t.app.get(ScriptRegistry);
    /** write-4's arguments creating an order with `values` (a JSON object of strings) and clock pairs. */
    const create = (values: Record<string, string>, orderClock: Array<string | number> = [], planClock: Array<string | number> = []) => [
      '',
      0,
      0,
      JSON.stringify(values),
      '',
      '{}',
      '',
      1000,
      '',
      60_000,
      orderClock.length / 2,
      planClock.length / 2,
      ...orderClock,
      ...planClock,
    ];

    it('interprets no value: only the fields listed after the counts take the Redis clock', async () => {
      const orderId = newOrderId(MERCHANT, orderNo());
      const [orderKey] = orderKeys(keys, orderId);
      const [outcome, , , now] = await scripts().run<[number, number, number, number]>(
        'orders/write',
        [...orderKeys(keys, orderId), noIndexKey(keys, orderId)],
        create({ subject: '$now', note: '$now+1000', clock: '$now+5' }, ['createdAt', 0, 'expiresAt', 1000]),
      );
      expect(outcome).toBe(0); // written
      expect(await raw.hmget(orderKey, 'subject', 'note', 'clock', 'createdAt', 'expiresAt')).toEqual([
        '$now',
        '$now+1000',
        '$now+5',
        String(now),
        String(now + 1000),
      ]);
    });

    it.each([
      ['a count without its pairs', create({ subject: 'x' }).map((a, i) => (i === 10 ? 1 : a))],
      ['pairs beyond the counts', [...create({ subject: 'x' }), 'createdAt', 0]],
      ['a negative offset', create({ subject: 'x' }, ['createdAt', -5])],
      ['an offset that is no integer', create({ subject: 'x' }, ['createdAt', '$now'])],
      ['a count that is no integer', create({ subject: 'x' }).map((a, i) => (i === 11 ? 'x' : a))],
      ['no counts', create({ subject: 'x' }).slice(0, 10)],
    ])('refuses %s and writes nothing', async (_what, args) => {
      const orderId = newOrderId(MERCHANT, orderNo());
      await expect(scripts().run('orders/write', [...orderKeys(keys, orderId), noIndexKey(keys, orderId)], args)).rejects.toThrow(/ERR clock field/);
      expect(await raw.exists(orderKeys(keys, orderId)[0])).toBe(0);
    });
  });
});
