import Redis from 'ioredis';
import request from 'supertest';
import { ORDER_ID_RE } from '../../src/platform/core/ids';
import { orderKeys, orderNumberKeyOf } from '../../src/features/orders/order.keys';
import { KeyBuilder } from '../../src/platform/redis/key-builder';
import { rawConnection } from '../harness/redis-process';
import { RedisServerHandle, startRedisServer } from '../harness/redis-server';
import { CREDS, merchantHeaders, startTestApp, TestApp, userToken } from '../support/test-app';

/**
 * Orders and payment plans over HTTP on the whole app: merchants (signed
 * requests) create, read and close orders; app users create plans and pay;
 * ops force channel outcomes. Status codes, error codes, bad input (400
 * naming the field, nothing stored), who may see what, concurrent pays
 * counted at the channels, the OpenAPI document, the metrics, and a Redis
 * outage (503; the locks fail closed).
 */

const ADMIN = { 'x-admin-key': CREDS.adminKey };
const asUser = (accountId: string) => ({ authorization: `Bearer ${userToken(accountId)}` });
let seq = 0;
const orderNo = () => `e2e-${process.pid}-${++seq}`;

function sample(text: string, name: string, labels = ''): number {
  const head = labels ? `${name}{${labels}} ` : `${name} `;
  const line = text.split('\n').find((l) => l.startsWith(head));
  return line ? Number(line.slice(head.length)) : 0;
}

describe('orders and payments over HTTP', () => {
  let redis: RedisServerHandle;
  let raw: Redis;
  let t: TestApp;

  const merchant = (method: 'GET' | 'POST', path: string, body?: unknown, merchantId = CREDS.merchantId) => {
    const text = body === undefined ? '' : JSON.stringify(body);
    const secret = merchantId === CREDS.merchantId ? CREDS.merchantSecret : CREDS.otherMerchantSecret;
    const req = method === 'GET' ? request(t.server).get(path) : request(t.server).post(path);
    return req.set(merchantHeaders(method, path, text, { merchantId, secret })).send(text || undefined);
  };
  const createOrder = (body: Record<string, unknown>) => merchant('POST', '/merchant/orders', body);
  const user = (accountId: string) => ({
    checkout: (orderId: string) => request(t.server).get(`/orders/${orderId}`).set(asUser(accountId)),
    createPlan: (orderId: string, instructions: unknown) =>
      request(t.server).post(`/orders/${orderId}/payment-plans`).set(asUser(accountId)).send({ instructions }),
    plan: (planId: string) => request(t.server).get(`/payment-plans/${planId}`).set(asUser(accountId)),
    pay: (planId: string) => request(t.server).post(`/payment-plans/${planId}/pay`).set(asUser(accountId)).send(),
  });
  const channels = () => request(t.server).get('/admin/channels').set(ADMIN);
  const setChannel = (method: string, body: Record<string, unknown>) => request(t.server).put(`/admin/channels/${method}`).set(ADMIN).send(body);
  const payCalls = async (method: string) =>
    ((await channels()).body as Array<{ method: string; calls: { pay: number } }>).find((c) => c.method === method)!.calls.pay;

  /** A new order (12800 CNY) with a PENDING plan of balance 2800 + quickpay 10000 for `account`. */
  async function orderWithPlan(account: string) {
    const no = orderNo();
    const created = await createOrder({ merchantOrderNo: no, amount: 12800, currency: 'CNY', subject: 'Coffee beans' });
    expect(created.status).toBe(201);
    const plan = await user(account).createPlan(created.body.orderId, [
      { method: 'balance', amount: 2800 },
      { method: 'quickpay', amount: 10000 },
    ]);
    expect(plan.status).toBe(201);
    return { no, orderId: created.body.orderId as string, planId: plan.body.planId as string };
  }

  function expectError(res: request.Response, status: number, code: string, field?: string) {
    expect({ status: res.status, error: res.body.error }).toEqual({ status, error: code });
    expect(typeof res.body.requestId).toBe('string');
    if (field !== undefined) expect(res.body.details.map((d: { field: string }) => d.field)).toContain(field);
  }

  beforeAll(async () => {
    redis = await startRedisServer();
    raw = rawConnection(redis);
    t = await startTestApp(redis.url, { RATE_LIMIT_ENABLED: 'false', CHANNEL_LATENCY_MS: '5', ORDERS_QUERY_DELAY_MS: '50' });
  });

  beforeEach(async () => {
    for (const m of ['balance', 'quickpay', 'points', 'ebanking'])
      expect((await setChannel(m, { latencyMs: 5, pay: 'success', query: 'success', reverse: 'success' })).status).toBe(200);
  });

  afterAll(async () => {
    await t?.close();
    raw?.disconnect();
    await redis?.destroy();
  });

  describe('merchants', () => {
    it.each(['.', '..'])('refuses merchantOrderNo %j, which no URL could address afterwards', async (no) => {
      expectError(await createOrder({ merchantOrderNo: no, amount: 100, currency: 'CNY', subject: 'Dots' }), 400, 'VALIDATION_FAILED', 'merchantOrderNo');
    });

    it('refuses text holding a lone UTF-16 surrogate with 400 naming the field, storing nothing; a surrogate pair (emoji) is fine', async () => {
      const keys = async () => (await raw.keys(`${t.config.redis.keyPrefix}:*`)).filter((k) => !k.includes(':nonce:')).sort();
      const before = await keys();
      for (const subject of ['\ud800', 'a\udfffb', 'x\ud83d']) {
        const res = await createOrder({ merchantOrderNo: orderNo(), amount: 100, currency: 'CNY', subject });
        expectError(res, 400, 'VALIDATION_FAILED', 'subject');
        expect(res.body.message).toContain('subject');
      }
      expect(await keys()).toEqual(before);
      const emoji = await createOrder({ merchantOrderNo: orderNo(), amount: 100, currency: 'CNY', subject: 'Beans \ud83d\ude00' });
      expect([emoji.status, emoji.body.subject]).toEqual([201, 'Beans 😀']);
    });

    it('a subject of 128 characters is taken however many UTF-16 units they use; 129 is a 400 (128 emoji were refused as over 128)', async () => {
      const subject = '☕😀'.repeat(64);
      const ok = await createOrder({ merchantOrderNo: orderNo(), amount: 100, currency: 'CNY', subject });
      expect([ok.status, ok.body.subject]).toEqual([201, subject]);
      const no = orderNo();
      expectError(await createOrder({ merchantOrderNo: no, amount: 100, currency: 'CNY', subject: `${subject}😀` }), 400, 'VALIDATION_FAILED', 'subject');
      expectError(await merchant('GET', `/merchant/orders/${no}`), 404, 'NOT_FOUND');
    });

    it('closing an order that does not exist is a 404 that leaves nothing in Redis (no lock, no fencing counter)', async () => {
      const before = (await raw.keys(`${t.config.redis.keyPrefix}:*`)).sort();
      expectError(await merchant('POST', `/merchant/orders/${orderNo()}/close`), 404, 'NOT_FOUND');
      expect((await raw.keys(`${t.config.redis.keyPrefix}:*`)).sort().filter((k) => !k.includes(':nonce:'))).toEqual(
        before.filter((k) => !k.includes(':nonce:')),
      );
    });

    it('POST creates (201), the same again is 200 with the same order, another payload is 409; GET and close', async () => {
      const no = orderNo();
      const body = { merchantOrderNo: no, amount: 12800, currency: 'CNY', subject: 'Coffee beans', expireMinutes: 15 };
      const first = await createOrder(body);
      expect(first.status).toBe(201);
      expect(first.body).toMatchObject({
        orderId: expect.stringMatching(ORDER_ID_RE),
        merchantOrderNo: no,
        amount: 12800,
        currency: 'CNY',
        status: 'CREATED',
        version: 1,
      });
      expect(Date.parse(first.body.expiresAt) - Date.parse(first.body.createdAt)).toBe(15 * 60_000);
      const again = await createOrder(body);
      expect([again.status, again.body]).toEqual([200, first.body]);
      expectError(await createOrder({ ...body, amount: 99 }), 409, 'ORDER_NO_REUSED');

      expect((await merchant('GET', `/merchant/orders/${no}`)).body).toEqual(first.body);
      expectError(await merchant('GET', `/merchant/orders/${no}`, undefined, CREDS.otherMerchantId), 404, 'NOT_FOUND');
      expectError(await merchant('POST', `/merchant/orders/${no}/close`, undefined, CREDS.otherMerchantId), 404, 'NOT_FOUND');
      const closed = await merchant('POST', `/merchant/orders/${no}/close`);
      expect([closed.status, closed.body.status, closed.body.closeReason]).toEqual([200, 'CLOSED', 'MERCHANT']);
      expect((await merchant('GET', `/merchant/orders/${no}`)).body.status).toBe('CLOSED');
    });

    it.each([
      ['amount', { amount: -100 }],
      ['amount', { amount: 0 }],
      ['amount', { amount: 12.5 }],
      ['amount', { amount: 10_000_000_001 }],
      ['amount', { amount: '12800' }],
      ['currency', { currency: 'cny' }],
      ['currency', { currency: 'QQQ' }],
      ['subject', { subject: '' }],
      ['subject', { subject: ' \t\n ' }],
      ['subject', { subject: 'x'.repeat(129) }],
      ['expireMinutes', { expireMinutes: 0 }],
      ['expireMinutes', { expireMinutes: 1441 }],
      ['merchantOrderNo', { merchantOrderNo: 'has space' }],
      ['merchantOrderNo', { merchantOrderNo: 'x'.repeat(65) }],
      ['payerAccountId', { payerAccountId: null }],
      ['payerAccountId', { payerAccountId: '' }],
      ['payerAccountId', { payerAccountId: '..' }],
      ['payerAccountId', { payerAccountId: 'has space' }],
      ['payerAccountId', { payerAccountId: 'x'.repeat(65) }],
      ['payerAccountId', { payerAccountId: 42 }],
      ['extra', { extra: 1 }],
    ])('a bad %s is a 400 naming it, and nothing is stored (%j)', async (field, change) => {
      const no = orderNo();
      const res = await createOrder({ merchantOrderNo: no, amount: 12800, currency: 'CNY', subject: 'Coffee beans', ...change });
      expectError(res, 400, 'VALIDATION_FAILED', field);
      expect(await raw.exists(orderKeys(t.app.get(KeyBuilder), orderNumberKeyOf(CREDS.merchantId, no))[0])).toBe(0);
      expectError(await merchant('GET', `/merchant/orders/${no}`), 404, 'NOT_FOUND');
    });

    it('payerAccountId: stored and returned; only that user may see, plan and pay the order (404 for others); another payer under the same number is 409', async () => {
      const no = orderNo();
      const body = { merchantOrderNo: no, amount: 12800, currency: 'CNY', subject: 'Coffee beans', payerAccountId: 'acc-payer' };
      const created = await createOrder(body);
      expect([created.status, created.body.payerAccountId]).toEqual([201, 'acc-payer']);
      const { orderId } = created.body as { orderId: string };
      expect((await createOrder(body)).status).toBe(200);
      expectError(await createOrder({ ...body, payerAccountId: 'acc-someone' }), 409, 'ORDER_NO_REUSED');
      expectError(await createOrder({ ...body, payerAccountId: undefined }), 409, 'ORDER_NO_REUSED');
      expect((await merchant('GET', `/merchant/orders/${no}`)).body.payerAccountId).toBe('acc-payer');

      const legs = [
        { method: 'balance', amount: 2800 },
        { method: 'quickpay', amount: 10000 },
      ];
      const intruder = user('acc-intruder');
      expectError(await intruder.checkout(orderId), 404, 'NOT_FOUND');
      expectError(await intruder.createPlan(orderId, legs), 404, 'NOT_FOUND');
      expect((await user('acc-payer').checkout(orderId)).body).toMatchObject({ orderId, payerAccountId: 'acc-payer', status: 'CREATED' });
      const plan = await user('acc-payer').createPlan(orderId, legs);
      expect(plan.status).toBe(201);
      expectError(await intruder.pay(plan.body.planId), 404, 'NOT_FOUND');
      expectError(await intruder.plan(plan.body.planId), 404, 'NOT_FOUND');
      const paid = await user('acc-payer').pay(plan.body.planId);
      expect([paid.status, paid.body.status]).toEqual([200, 'PAID']);
      expect((await merchant('GET', `/merchant/orders/${no}`)).body).toMatchObject({ status: 'PAID', payerAccountId: 'acc-payer' });
    });

    it('app users and service tokens cannot use merchant routes (403), nor merchants app routes', async () => {
      expect((await request(t.server).get('/merchant/orders/x1').set(asUser('acc-x'))).status).toBe(403);
      const { orderId } = await orderWithPlan('acc-x');
      const path = `/orders/${orderId}`;
      expect(
        (
          await request(t.server)
            .get(path)
            .set(merchantHeaders('GET', path, ''))
        ).status,
      ).toBe(403);
    });
  });

  describe('app users', () => {
    it('plan 201, the same again 200; pay 200 PAID; the merchant sees it PAID and cannot close it', async () => {
      const { no, orderId, planId } = await orderWithPlan('acc-flow');
      const same = await user('acc-flow').createPlan(orderId, [
        { method: 'balance', amount: 2800 },
        { method: 'quickpay', amount: 10000 },
      ]);
      expect([same.status, same.body.planId, same.body.status]).toEqual([200, planId, 'PENDING']);
      expect((await user('acc-flow').checkout(orderId)).body).toMatchObject({
        orderId,
        merchantId: CREDS.merchantId,
        amount: 12800,
        status: 'CREATED',
        activePlanId: planId,
      });
      const paid = await user('acc-flow').pay(planId);
      expect([paid.status, paid.body.status, paid.body.instructions.map((i: { status: string }) => i.status)]).toEqual([
        200,
        'PAID',
        ['SUCCEEDED', 'SUCCEEDED'],
      ]);
      expect((await merchant('GET', `/merchant/orders/${no}`)).body).toMatchObject({ status: 'PAID', paidPlanId: planId });
      expectError(await merchant('POST', `/merchant/orders/${no}/close`), 409, 'ORDER_PAID');
      expectError(await user('acc-flow').createPlan(orderId, [{ method: 'points', amount: 12800 }]), 409, 'ORDER_PAID');
    });

    it('8 concurrent pays of one plan over HTTP: each instruction reaches its channel once; the others are 409 LOCK_CONTENDED', async () => {
      const { planId } = await orderWithPlan('acc-conc');
      const before = [await payCalls('balance'), await payCalls('quickpay')];
      const results = await Promise.all(Array.from({ length: 8 }, () => user('acc-conc').pay(planId)));
      const codes = results.map((r) => r.status);
      expect(codes.filter((c) => c === 200).length).toBeGreaterThanOrEqual(1);
      expect(codes.filter((c) => c !== 200).every((c) => c === 409)).toBe(true);
      for (const r of results.filter((x) => x.status === 409)) expect(r.body.error).toBe('LOCK_CONTENDED');
      expect([(await payCalls('balance')) - before[0], (await payCalls('quickpay')) - before[1]]).toEqual([1, 1]);
    });

    it('a channel failure (set by ops) gives 200 FAILED with the paid instruction reversed; unknown gives 202', async () => {
      expect((await setChannel('quickpay', { pay: 'failure' })).body).toMatchObject({ method: 'quickpay', pay: 'failure', query: 'success' });
      const a = await orderWithPlan('acc-fail');
      const failed = await user('acc-fail').pay(a.planId);
      expect([failed.status, failed.body.status, failed.body.instructions[0].reversal, failed.body.failureReason]).toEqual([
        200,
        'FAILED',
        'REVERSED',
        'quickpay declined the payment',
      ]);
      expect((await user('acc-fail').checkout(a.orderId)).body.status).toBe('CREATED');

      await setChannel('quickpay', { pay: 'unknown', query: 'success' });
      const b = await orderWithPlan('acc-unknown');
      const parked = await user('acc-unknown').pay(b.planId);
      expect([parked.status, parked.body.status, parked.body.instructions[1].status]).toEqual([202, 'PAYING', 'UNKNOWN']);
      let status = '';
      for (let i = 0; i < 100 && status !== 'PAID'; i++) {
        status = (await user('acc-unknown').plan(b.planId)).body.status;
        if (status !== 'PAID') await new Promise((r) => setTimeout(r, 50));
      }
      expect(status).toBe('PAID');
    });

    it('an order takes at most 100 plans: the next is 409 PLAN_LIMIT and stores nothing; the last plan stays payable', async () => {
      // Unbounded, one user made plan keys at line rate for the retention time, and the millionth plan got an id
      // (…_p1000000) that GET and pay refuse with a 400.
      const { orderId } = await orderWithPlan('acc-many');
      const u = user('acc-many');
      const legs = (i: number) => [
        { method: 'balance', amount: i },
        { method: 'quickpay', amount: 12800 - i },
      ];
      for (let i = 2; i <= 100; i++) expect((await u.createPlan(orderId, legs(i))).status).toBe(201);
      const [orderKey] = orderKeys(t.app.get(KeyBuilder), orderId);
      const before = { order: await raw.hgetall(orderKey), keys: (await raw.keys(`*${orderId}*`)).sort() };
      const refused = await u.createPlan(orderId, legs(101));
      expectError(refused, 409, 'PLAN_LIMIT');
      expect({ order: await raw.hgetall(orderKey), keys: (await raw.keys(`*${orderId}*`)).sort() }).toEqual(before);
      // The 100th plan is still the order's: asked for again it is the same plan (200), and it pays.
      const again = await u.createPlan(orderId, legs(100));
      expect([again.status, again.body.planId]).toEqual([200, `${orderId}_p100`]);
      expect((await u.pay(again.body.planId)).body.status).toBe('PAID');
    });

    it('another account gets 404 for a bound order and its plan; a malformed id is a 400 naming it', async () => {
      const { orderId, planId } = await orderWithPlan('acc-owner');
      const other = user('acc-other');
      for (const res of [
        await other.checkout(orderId),
        await other.plan(planId),
        await other.pay(planId),
        await other.createPlan(orderId, [{ method: 'points', amount: 12800 }]),
      ]) {
        expectError(res, 404, 'NOT_FOUND');
      }
      expectError(await other.checkout('ord_nothex'), 400, 'VALIDATION_FAILED', 'orderId');
      expectError(await other.pay('ord_3f9a0c1b2d4e5f60718293a4'), 400, 'VALIDATION_FAILED', 'planId');
      expectError(await other.checkout(orderNumberKeyOf(CREDS.merchantId, 'never-created')), 404, 'NOT_FOUND');
    });

    it.each([
      [
        'a negative amount',
        'instructions[0].amount',
        [
          { method: 'balance', amount: -2800 },
          { method: 'quickpay', amount: 15600 },
        ],
      ],
      [
        'a zero amount',
        'instructions[0].amount',
        [
          { method: 'balance', amount: 0 },
          { method: 'quickpay', amount: 12800 },
        ],
      ],
      [
        'five instructions (at most four)',
        'instructions',
        [
          { method: 'balance', amount: 1 },
          { method: 'quickpay', amount: 1 },
          { method: 'points', amount: 1 },
          { method: 'ebanking', amount: 1 },
          { method: 'balance', amount: 12796 },
        ],
      ],
      [
        'amounts that do not add up',
        'instructions',
        [
          { method: 'balance', amount: 2800 },
          { method: 'quickpay', amount: 2800 },
        ],
      ],
      ['an unknown method', 'instructions[0].method', [{ method: 'cash', amount: 12800 }]],
      [
        'a method twice',
        'instructions',
        [
          { method: 'balance', amount: 6400 },
          { method: 'balance', amount: 6400 },
        ],
      ],
      ['no instructions', 'instructions', []],
      ['not a list', 'instructions', 'balance'],
    ])('a plan with %s is a 400 naming %s, and the order stays unbound with no plan', async (_case, field, instructions) => {
      const created = await createOrder({ merchantOrderNo: orderNo(), amount: 12800, currency: 'CNY', subject: 'Coffee beans' });
      expectError(await user('acc-bad').createPlan(created.body.orderId, instructions), 400, 'VALIDATION_FAILED', field);
      // Still unbound: another account sees it, without a plan.
      const seen = await user('acc-someone-else').checkout(created.body.orderId);
      expect([seen.status, seen.body.activePlanId]).toEqual([200, undefined]);
    });

    it('a plan whose instruction is an array is a 400 saying so (it was taken as an instruction and answered "amounts add up to NaN")', async () => {
      const created = await createOrder({ merchantOrderNo: orderNo(), amount: 12800, currency: 'CNY', subject: 'Coffee beans' });
      const cases: Array<[unknown[], string, string]> = [
        [[[]], 'instructions[0] must be an object', 'instructions[0]'],
        [[{ method: 'quickpay', amount: 12800 }, []], 'instructions[1] must be an object', 'instructions[1]'],
        [[null], 'instructions[0] must not be null', 'instructions[0]'],
      ];
      for (const [instructions, message, field] of cases) {
        const res = await user('acc-bad').createPlan(created.body.orderId, instructions);
        expectError(res, 400, 'VALIDATION_FAILED', field);
        // One entry for the element, none for the list.
        expect(res.body.details.map((d: { field: string }) => d.field)).toEqual([field]);
        expect(res.body.message).toContain(message);
        expect(res.body.message).not.toContain('NaN');
      }
      const seen = await user('acc-someone-else').checkout(created.body.orderId);
      expect([seen.status, seen.body.activePlanId]).toEqual([200, undefined]);
    });

    it('ops settings are validated: unknown method or outcome is a 400, and only the admin key may change them', async () => {
      expectError(await setChannel('cash', { pay: 'failure' }), 400, 'VALIDATION_FAILED', 'method');
      expectError(await setChannel('quickpay', { pay: 'maybe' }), 400, 'VALIDATION_FAILED', 'pay');
      expectError(await setChannel('quickpay', { latencyMs: -1 }), 400, 'VALIDATION_FAILED', 'latencyMs');
      expect((await request(t.server).put('/admin/channels/quickpay').set(asUser('acc-x')).send({ pay: 'failure' })).status).toBe(403);
      expect((await channels()).body.find((c: { method: string }) => c.method === 'quickpay').pay).toBe('success');
    });
  });

  describe('documents and counts', () => {
    it('documents every route with its security scheme and schemas', async () => {
      const { paths } = (await request(t.server).get('/docs/openapi.json')).body;
      const ops: Array<[string, string, string, string[]]> = [
        ['post', '/merchant/orders', 'MerchantId', ['200', '201', '400', '409', '503']],
        ['get', '/merchant/orders/{merchantOrderNo}', 'MerchantId', ['200', '404']],
        ['post', '/merchant/orders/{merchantOrderNo}/close', 'MerchantId', ['200', '404', '409']],
        ['get', '/orders/{orderId}', 'AppUserJwt', ['200', '404']],
        ['post', '/orders/{orderId}/payment-plans', 'AppUserJwt', ['200', '201', '400', '404', '409']],
        ['get', '/payment-plans/{planId}', 'AppUserJwt', ['200', '404']],
        ['post', '/payment-plans/{planId}/pay', 'AppUserJwt', ['200', '202', '404', '409', '503']],
        ['get', '/admin/channels', 'AdminKey', ['200']],
        ['put', '/admin/channels/{method}', 'AdminKey', ['200', '400']],
      ];
      for (const [method, path, scheme, codes] of ops) {
        const op = paths[path]?.[method];
        expect({ path, method, has: !!op }).toEqual({ path, method, has: true });
        expect(JSON.stringify(op.security)).toContain(scheme);
        for (const code of codes) expect({ path, code, has: !!op.responses[code] }).toEqual({ path, code, has: true });
      }
      expect(JSON.stringify(paths['/orders/{orderId}/payment-plans'].post.requestBody)).toContain('CreatePlanDto');
      // Every 409 a pay can answer is listed, including the ones of a request that lost its lock or raced a writer.
      const payConflicts = paths['/payment-plans/{planId}/pay'].post.responses['409'].description as string;
      for (const code of [
        'LOCK_CONTENDED',
        'PLAN_NOT_PAYABLE',
        'ORDER_CLOSED',
        'ORDER_PAID',
        'ORDER_EXPIRED',
        'ORDER_CHANGED',
        'STALE_LOCK_HOLDER',
        'LOCK_LOST',
      ])
        expect({ code, listed: payConflicts.includes(code) }).toEqual({ code, listed: true });
    });

    it('counts orders, plans, pays by outcome and channel calls', async () => {
      const metrics = async () => (await request(t.server).get('/metrics').set(ADMIN)).text;
      const before = await metrics();
      const { planId } = await orderWithPlan('acc-metrics');
      await user('acc-metrics').pay(planId);
      const after = await metrics();
      const delta = (name: string, labels = '') => sample(after, name, labels) - sample(before, name, labels);
      expect(delta('orders_created_total')).toBe(1);
      expect(delta('payment_plans_created_total')).toBe(1);
      expect(delta('orders_paid_total')).toBe(1);
      expect(delta('payment_pays_total', 'outcome="paid"')).toBe(1);
      expect(delta('payment_channel_calls_total', 'method="quickpay",op="pay",outcome="success"')).toBe(1);
    });
  });

  describe('Redis down', () => {
    it('paying and creating answer 503 (the locks fail closed) and work again once Redis is back', async () => {
      const { planId } = await orderWithPlan('acc-down');
      const pays = await payCalls('balance');
      await redis.stop();
      try {
        const res = await user('acc-down').pay(planId);
        expect([res.status, res.body.error]).toEqual([503, 'REDIS_UNAVAILABLE']);
        expect(res.headers['retry-after']).toBe('1');
        expect((await user('acc-down').createPlan('ord_3f9a0c1b2d4e5f60718293a4', [{ method: 'points', amount: 1 }])).status).toBe(503);
      } finally {
        await redis.start();
      }
      expect(await payCalls('balance')).toBe(pays);
      let status = 0;
      for (let i = 0; i < 50 && status !== 200; i++) {
        status = (await user('acc-down').pay(planId)).status;
        if (status !== 200) await new Promise((r) => setTimeout(r, 100));
      }
      expect(status).toBe(200);
      expect((await user('acc-down').plan(planId)).body.status).toBe('PAID');
    });
  });
});
