import request from 'supertest';
import { RedisServerHandle, startRedisServer } from '../harness/redis-server';
import { merchantHeaders, startTestApp, TestApp, userToken } from '../support/test-app';

/**
 * A merchant's free text over HTTP is stored and returned as sent. The order
 * write once turned any field value `$now` or `$now+<ms>` into the Redis
 * clock, so an order whose subject was `$now` came back with a timestamp for
 * a subject. The subject is the only free text of an order or a plan
 * (merchantOrderNo's rule has no `$`; the rest are ids, enums and numbers).
 */

const asUser = (accountId: string) => ({ authorization: `Bearer ${userToken(accountId)}` });
let seq = 0;
const orderNo = () => `e2e-verbatim-${process.pid}-${++seq}`;

describe('order subjects over HTTP', () => {
  let redis: RedisServerHandle;
  let t: TestApp;

  const merchant = (method: 'GET' | 'POST', path: string, body?: unknown) => {
    const text = body === undefined ? '' : JSON.stringify(body);
    const req = method === 'GET' ? request(t.server).get(path) : request(t.server).post(path);
    return req.set(merchantHeaders(method, path, text)).send(text || undefined);
  };

  beforeAll(async () => {
    redis = await startRedisServer();
    t = await startTestApp(redis.url, { RATE_LIMIT_ENABLED: 'false', CHANNEL_LATENCY_MS: '5' });
  });

  afterAll(async () => {
    await t?.close();
    await redis?.destroy();
  });

  it.each(['$now', '$now+1000'])('subject %j comes back verbatim from create, GET, checkout, pay and close', async (subject) => {
    const paidNo = orderNo();
    const created = await merchant('POST', '/merchant/orders', { merchantOrderNo: paidNo, amount: 12800, currency: 'CNY', subject, expireMinutes: 15 });
    expect([created.status, created.body.subject]).toEqual([201, subject]);
    expect(Date.parse(created.body.expiresAt) - Date.parse(created.body.createdAt)).toBe(15 * 60_000);
    const { orderId } = created.body as { orderId: string };
    expect((await merchant('GET', `/merchant/orders/${paidNo}`)).body.subject).toBe(subject);

    const checkout = await request(t.server).get(`/orders/${orderId}`).set(asUser('acc_verbatim'));
    expect([checkout.status, checkout.body.subject]).toEqual([200, subject]);
    const plan = await request(t.server)
      .post(`/orders/${orderId}/payment-plans`)
      .set(asUser('acc_verbatim'))
      .send({ instructions: [{ method: 'balance', amount: 12800 }] });
    expect(plan.status).toBe(201);
    const paid = await request(t.server).post(`/payment-plans/${plan.body.planId}/pay`).set(asUser('acc_verbatim')).send();
    expect([paid.status, paid.body.status]).toEqual([200, 'PAID']);
    const afterPay = await merchant('GET', `/merchant/orders/${paidNo}`);
    expect([afterPay.body.status, afterPay.body.subject]).toEqual(['PAID', subject]);

    const closedNo = orderNo();
    expect((await merchant('POST', '/merchant/orders', { merchantOrderNo: closedNo, amount: 500, currency: 'CNY', subject })).status).toBe(201);
    const closed = await merchant('POST', `/merchant/orders/${closedNo}/close`);
    expect([closed.status, closed.body.status, closed.body.subject, closed.body.closeReason]).toEqual([200, 'CLOSED', subject, 'MERCHANT']);
    // The same create again is the same order (200), not a conflict over a rewritten subject.
    const again = await merchant('POST', '/merchant/orders', { merchantOrderNo: closedNo, amount: 500, currency: 'CNY', subject });
    expect([again.status, again.body.subject]).toEqual([200, subject]);
  });
});
