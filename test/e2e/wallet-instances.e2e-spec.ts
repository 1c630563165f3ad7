import request from 'supertest';
import { randomPrefix, RedisServerHandle, startRedisServer } from '../harness/redis-server';
import { CREDS, merchantHeaders, startTestApp, TestApp, userToken } from '../support/test-app';

/**
 * The balance payment method with two instances on one Redis: one payer whose wallet holds less than its orders
 * add up to, every plan paid through both instances at once. The wallet never goes below zero, each paid order is
 * debited once, the failed ones not at all, and the money adds up: balance = top-up − paid.
 */

const ADMIN = { 'x-admin-key': CREDS.adminKey };
const ENV = { BALANCE_CHANNEL: 'wallet', RATE_LIMIT_ENABLED: 'false', CHANNEL_LATENCY_MS: '2' };

describe('balance payments across instances', () => {
  let redis: RedisServerHandle;
  const apps: TestApp[] = [];

  beforeAll(async () => {
    redis = await startRedisServer();
    const prefix = randomPrefix();
    for (let i = 0; i < 2; i++) apps.push(await startTestApp(redis.url, { ...ENV, REDIS_KEY_PREFIX: prefix }));
  });
  afterAll(async () => {
    await Promise.all(apps.map((a) => a.close()));
    await redis?.destroy();
  });

  it('one payer, 120 orders paid twice at once (once per instance): never below zero, each paid once, balance = top-up − paid', async () => {
    const [a, b] = apps.map((x) => x.server);
    const payer = 'acc_payer_two';
    const auth = { authorization: `Bearer ${userToken(payer)}` };
    const TOP_UP = 20_000;
    const topUp = await request(a).post(`/admin/wallets/account:${payer}/top-ups`).set(ADMIN).send({ amount: TOP_UP, currency: 'CNY', reference: 'top-two' });
    expect(topUp.status).toBe(201);

    // 120 orders of 200..399: about 36,000 in all, so the wallet runs out part-way and the rest fail.
    const amounts = Array.from({ length: 120 }, (_, i) => 200 + ((i * 37) % 200));
    const plans = await Promise.all(
      amounts.map(async (amount, i) => {
        const body = JSON.stringify({ merchantOrderNo: `two-${i}`, amount, currency: 'CNY', subject: 'x', payerAccountId: payer });
        const server = i % 2 ? a : b;
        const order = await request(server)
          .post('/merchant/orders')
          .set(merchantHeaders('POST', '/merchant/orders', body))
          .send(body);
        expect(order.status).toBe(201);
        const plan = await request(server)
          .post(`/orders/${order.body.orderId}/payment-plans`)
          .set(auth)
          .send({ instructions: [{ method: 'balance', amount }] });
        expect(plan.status).toBe(201);
        return { amount, orderId: order.body.orderId as string, planId: plan.body.planId as string };
      }),
    );

    const pays = await Promise.all(plans.flatMap((p) => [a, b].map((server) => request(server).post(`/payment-plans/${p.planId}/pay`).set(auth))));
    for (const r of pays) expect([200, 409]).toContain(r.status);
    // A 409 is the other instance's request holding the plan (LOCK_CONTENDED); at least one of the two settled it.
    for (const r of pays) if (r.status === 409) expect(r.body.error).toBe('LOCK_CONTENDED');

    const statuses = await Promise.all(plans.map(async (p) => (await request(a).get(`/orders/${p.orderId}`).set(auth)).body.status as string));
    const paid = plans.filter((_, i) => statuses[i] === 'PAID');
    expect(paid.length).toBeGreaterThan(0);
    expect(paid.length).toBeLessThan(plans.length);
    for (const s of statuses) expect(['PAID', 'CREATED']).toContain(s);
    const paidTotal = paid.reduce((s, p) => s + p.amount, 0);

    const entries: { kind: string; amount: number; balanceAfter: number; reference: string }[] = [];
    let cursor: string | undefined;
    let balance: number | undefined;
    do {
      const w = await request(b)
        .get(`/admin/wallets/account:${payer}`)
        .query({ limit: 200, ...(cursor ? { cursor } : {}) })
        .set(ADMIN);
      expect(w.status).toBe(200);
      balance = w.body.balances.find((x: { currency: string }) => x.currency === 'CNY').balance;
      entries.push(...w.body.entries);
      cursor = w.body.next;
    } while (cursor);

    expect(balance).toBe(TOP_UP - paidTotal);
    expect(balance).toBeGreaterThanOrEqual(0);
    expect(Math.min(...entries.map((e) => e.balanceAfter))).toBeGreaterThanOrEqual(0);
    const payments = entries.filter((e) => e.kind === 'payment');
    expect(payments.length).toBe(paid.length);
    expect(new Set(payments.map((e) => e.reference)).size).toBe(payments.length);
    expect(payments.reduce((s, e) => s + e.amount, 0)).toBe(-paidTotal);
    // Nothing taken was given back: a failed plan took nothing, so there is nothing to reverse.
    expect(entries.filter((e) => e.kind === 'reversal')).toEqual([]);
  }, 60_000);
});
