import Redis from 'ioredis';
import request from 'supertest';
import { setTimeout as sleep } from 'node:timers/promises';
import { OrdersService } from '../../src/features/orders/orders.service';
import { TestApp, CREDS, merchantHeaders, userToken, useAppOnOwnRedis } from '../support/test-app';

/**
 * Close reminders over HTTP on the whole app: ops opt a merchant in (admin
 * key), the merchant creates orders for named payers (signed), the payer pulls
 * the reminder and pays (bearer token). Orders expire after one minute and the
 * lead is 50 s, so every reminder of this suite falls due 10 s after its order
 * is created: the suite creates every order first, waits once, then checks.
 */

const ADMIN = { 'x-admin-key': CREDS.adminKey };
const asUser = (accountId: string) => ({ authorization: `Bearer ${userToken(accountId)}` });
const LEAD_S = 50;
let seq = 0;
const orderNo = () => `cr-${process.pid}-${++seq}`;

interface Pulled {
  msgId: string;
  bizType: string;
  outerBizId: string;
  title: string;
  content: string;
  url?: string;
}

describe('close reminders over HTTP', () => {
  let t: TestApp;
  let raw: Redis;
  // The shortest lead is then 15 s (CLOSE_REMINDER_MIN_LEFT_SECONDS + the visibility timeout), under the 50 s used here.
  const suite = useAppOnOwnRedis({
    RATE_LIMIT_ENABLED: 'false',
    CHANNEL_LATENCY_MS: '5',
    CLOSE_REMINDER_MIN_LEFT_SECONDS: '10',
    CLOSE_REMINDER_VISIBILITY_TIMEOUT_SECONDS: '5',
  });

  const signed = (method: 'GET' | 'POST', path: string, body?: unknown, merchantId = CREDS.merchantId) => {
    const text = body === undefined ? '' : JSON.stringify(body);
    const secret = merchantId === CREDS.merchantId ? CREDS.merchantSecret : CREDS.otherMerchantSecret;
    const req = method === 'GET' ? request(t.server).get(path) : request(t.server).post(path);
    return req.set(merchantHeaders(method, path, text, { merchantId, secret })).send(text || undefined);
  };
  const putSettings = (merchantId: string, body: unknown) =>
    request(t.server)
      .put(`/admin/close-reminder/merchants/${merchantId}`)
      .set(ADMIN)
      .send(body as object);
  const status = async (orderId: string) => {
    const res = await request(t.server).get(`/admin/close-reminder/orders/${orderId}`).set(ADMIN);
    expect(res.status).toBe(200);
    return res.body as { state: string; reason?: string; msgId?: string; dueAt?: string; sentAt?: string; cause?: string };
  };
  const reminders = async (accountId: string): Promise<Pulled[]> => {
    const res = await request(t.server).get('/messages?limit=100').set(asUser(accountId));
    expect(res.status).toBe(200);
    return (res.body.messages as Pulled[]).filter((m) => m.bizType === 'CLOSE_REMINDER');
  };
  const createOrder = async (payer: string | undefined, merchantId = CREDS.merchantId) => {
    const res = await signed(
      'POST',
      '/merchant/orders',
      { merchantOrderNo: orderNo(), amount: 12800, currency: 'CNY', subject: 'Coffee beans', expireMinutes: 1, ...(payer ? { payerAccountId: payer } : {}) },
      merchantId,
    );
    expect(res.status).toBe(201);
    return res.body.orderId as string;
  };
  const pay = async (accountId: string, orderId: string) => {
    const plan = await request(t.server)
      .post(`/orders/${orderId}/payment-plans`)
      .set(asUser(accountId))
      .send({ instructions: [{ method: 'quickpay', amount: 12800 }] });
    expect(plan.status).toBe(201);
    const paid = await request(t.server).post(`/payment-plans/${plan.body.planId}/pay`).set(asUser(accountId)).send();
    expect(paid.body.status).toBe('PAID');
  };
  const until = async <T>(what: () => Promise<T>, ok: (v: T) => boolean, ms = 20_000): Promise<T> => {
    const end = Date.now() + ms;
    for (;;) {
      const v = await what();
      if (ok(v) || Date.now() > end) return v;
      await sleep(100);
    }
  };
  const expect400 = (res: request.Response, field: string) => {
    expect({ status: res.status, error: res.body.error }).toEqual({ status: 400, error: 'VALIDATION_FAILED' });
    expect((res.body.details as Array<{ field: string }>).map((d) => d.field)).toContain(field);
  };

  /** The orders of the flow, created before any test runs (one wait for all of them). */
  const o: Record<string, string> = {};

  beforeAll(async () => {
    ({ t, raw } = suite);
    expect(
      (
        await putSettings(CREDS.merchantId, {
          enabled: true,
          leadSeconds: LEAD_S,
          title: '[Payment reminder] {subject}',
          content: 'Your order for {subject} ({amount}) closes in {minutes} minutes',
        })
      ).status,
    ).toBe(201);
    o.flow = await createOrder('cr_payer');
    o.paidEarly = await createOrder('cr_early');
    o.closedEarly = await createOrder('cr_closed');
    o.noPayer = await createOrder(undefined);
    o.notOptedIn = await createOrder('cr_other', CREDS.otherMerchantId);
    // m_paused has no signing credentials: its order comes in process, as other modules create orders.
    expect((await putSettings('m_paused', { enabled: true, leadSeconds: LEAD_S })).status).toBe(201);
    const paused = await t.app.get(OrdersService).createForBuyer({
      merchantId: 'm_paused',
      merchantOrderNo: orderNo(),
      amount: 500,
      currency: 'JPY',
      subject: 'Tea',
      expireMinutes: 1,
      payerAccountId: 'cr_disabled',
    });
    o.disabled = paused.order.orderId;
    // Before anything is due (10 s after creation): pay one, close one, disable m_paused once its reminder is scheduled.
    await pay('cr_early', o.paidEarly);
    expect((await signed('POST', `/merchant/orders/${await merchantOrderNo(o.closedEarly)}/close`)).status).toBe(200);
    expect(
      (
        await until(
          () => status(o.disabled),
          (v) => v.state === 'scheduled',
        )
      ).state,
    ).toBe('scheduled');
    expect((await putSettings('m_paused', { enabled: false })).status).toBe(200);
  }, 30_000);

  describe('one order, end to end', () => {
    it('is scheduled lead seconds before its close', async () => {
      const s = await until(
        () => status(o.flow),
        (v) => v.state !== 'none',
      );
      expect(s.state).toMatch(/scheduled|sent/);
      const order = await signed('GET', `/merchant/orders/${await merchantOrderNo(o.flow)}`);
      expect(Date.parse(order.body.expiresAt) - Date.parse(s.dueAt!)).toBe(LEAD_S * 1000);
    });

    it('the payer pulls exactly one reminder when it is due, with the rendered text and a link to pay', async () => {
      const s = await until(
        () => status(o.flow),
        (v) => v.state === 'sent',
      );
      expect(s.state).toBe('sent');
      expect(Date.parse(s.sentAt!) - Date.parse(s.dueAt!)).toBeLessThan(2000);
      const pulled = await reminders('cr_payer');
      expect(pulled).toEqual([
        expect.objectContaining({
          msgId: s.msgId,
          outerBizId: o.flow,
          title: '[Payment reminder] Coffee beans',
          content: 'Your order for Coffee beans (CN¥128.00) closes in 1 minute',
          url: `redispay://orders/${o.flow}/pay`,
        }),
      ]);
    }, 30_000);

    it('paying the order withdraws the reminder from the inbox and the unread count', async () => {
      await pay('cr_payer', o.flow);
      const s = await until(
        () => status(o.flow),
        (v) => v.state === 'withdrawn',
      );
      expect(s).toMatchObject({ state: 'withdrawn', cause: 'paid' });
      expect(await reminders('cr_payer')).toEqual([]);
      expect((await request(t.server).get('/messages/unread-count').set(asUser('cr_payer'))).body).toEqual({ unread: 0 });
    });
  });

  describe('no reminder', () => {
    it('for an order paid before it was due', async () => {
      expect(
        await until(
          () => status(o.paidEarly),
          (v) => v.state === 'cancelled',
        ),
      ).toMatchObject({ state: 'cancelled', cause: 'paid' });
    });

    it('for an order closed before it was due', async () => {
      expect(
        await until(
          () => status(o.closedEarly),
          (v) => v.state === 'cancelled',
        ),
      ).toMatchObject({ state: 'cancelled', cause: 'closed' });
    });

    it('for a merchant disabled while its reminder was pending (checked when it fires)', async () => {
      const s = await until(
        () => status(o.disabled),
        (v) => v.state === 'skipped',
      );
      expect(s).toMatchObject({ state: 'skipped', reason: 'merchant-disabled' });
      expect(await reminders('cr_disabled')).toEqual([]);
    }, 30_000);

    it('for an order with no payer when it is due (counted as skipped)', async () => {
      const s = await until(
        () => status(o.noPayer),
        (v) => v.state === 'skipped',
      );
      expect(s).toMatchObject({ state: 'skipped', reason: 'no-payer' });
      const metrics = (await request(t.server).get('/metrics').set(ADMIN)).text;
      expect(metrics).toMatch(/close_reminders_skipped_total\{reason="no-payer"\} [1-9]/);
    }, 30_000);

    it('for a merchant that never opted in, even after its due time passed', async () => {
      await until(
        () => status(o.flow),
        (v) => v.state !== 'scheduled' && v.state !== 'none',
      );
      expect(await status(o.notOptedIn)).toEqual({ orderId: o.notOptedIn, state: 'none' });
      expect(await reminders('cr_other')).toEqual([]);
      expect(await reminders('cr_early')).toEqual([]);
      expect(await reminders('cr_closed')).toEqual([]);
    });
  });

  describe('settings', () => {
    it('PUT fills in defaults; GET, the paged list and the merchant’s own signed GET show them; DELETE removes them', async () => {
      const put = await putSettings('m_defaults', { enabled: true });
      expect(put.status).toBe(201);
      expect(put.body).toMatchObject({ merchantId: 'm_defaults', enabled: true, leadSeconds: 1200 });
      expect(put.body.content).toContain('{subject}');
      expect((await request(t.server).get('/admin/close-reminder/merchants/m_defaults').set(ADMIN)).body).toEqual(put.body);
      const first = await request(t.server).get('/admin/close-reminder/merchants?limit=1').set(ADMIN);
      expect(first.body.items).toHaveLength(1);
      const ids: string[] = [first.body.items[0].merchantId];
      let next = first.body.next as string | undefined;
      while (next) {
        const page = await request(t.server).get(`/admin/close-reminder/merchants?limit=1&after=${next}`).set(ADMIN);
        ids.push(...page.body.items.map((i: { merchantId: string }) => i.merchantId));
        next = page.body.next;
      }
      expect(ids).toEqual([...ids].sort());
      expect(ids).toEqual(expect.arrayContaining(['m_defaults', 'm_paused', CREDS.merchantId]));
      // The whole list as one full page: it is the last one, so it has no next.
      const whole = await request(t.server).get(`/admin/close-reminder/merchants?limit=${ids.length}`).set(ADMIN);
      expect(whole.body.items.map((i: { merchantId: string }) => i.merchantId)).toEqual(ids);
      expect(whole.body).not.toHaveProperty('next');

      const own = await signed('GET', '/merchant/close-reminder');
      expect(own.body).toMatchObject({ merchantId: CREDS.merchantId, enabled: true, leadSeconds: LEAD_S });
      expect((await signed('GET', '/merchant/close-reminder', undefined, CREDS.otherMerchantId)).status).toBe(404);
      expect((await request(t.server).get('/merchant/close-reminder')).status).toBe(401);

      expect((await request(t.server).delete('/admin/close-reminder/merchants/m_defaults').set(ADMIN)).status).toBe(204);
      expect((await request(t.server).delete('/admin/close-reminder/merchants/m_defaults').set(ADMIN)).status).toBe(404);
      expect((await request(t.server).get('/admin/close-reminder/merchants/m_defaults').set(ADMIN)).status).toBe(404);
    });

    it.each([
      [{ enabled: true, leadSeconds: 29 }, 'leadSeconds'],
      // Above the DTO's floor, below what this service's settings honour (10 + 5).
      [{ enabled: true, leadSeconds: 14 }, 'leadSeconds'],
      [{ enabled: true, leadSeconds: 86_401 }, 'leadSeconds'],
      [{ enabled: true, leadSeconds: 60.5 }, 'leadSeconds'],
      [{ enabled: 'yes' }, 'enabled'],
      [{ leadSeconds: 60 }, 'enabled'],
      [{ enabled: true, title: 'Hi {name}' }, 'title'],
      [{ enabled: true, content: 'Pay {amount} by {closeAt} or {deadline}' }, 'content'],
      [{ enabled: true, title: 'x'.repeat(101) }, 'title'],
      [{ enabled: true, content: 'x'.repeat(1001) }, 'content'],
      [{ enabled: true, title: '' }, 'title'],
      [{ enabled: true, title: null }, 'title'],
      [{ enabled: true, title: '   ' }, 'title'],
      [{ enabled: true, content: '\n' }, 'content'],
      // Half of a surrogate pair (valid JSON, not valid text): the settings script's JSON decoder refused it with a 500.
      [{ enabled: true, title: 'Pay \ud83d now' }, 'title'],
      [{ enabled: true, content: 'Pay {amount} \udc00' }, 'content'],
    ])('refuses %j with a 400 naming %s, and stores nothing', async (body, field) => {
      const res = await putSettings('m_bad', body);
      expect400(res, field);
      expect((await request(t.server).get('/admin/close-reminder/merchants/m_bad').set(ADMIN)).status).toBe(404);
    });

    it('names unknown placeholders in the message', async () => {
      const res = await putSettings('m_bad', { enabled: true, content: 'Hi {name}' });
      expect(res.body.message).toContain('{name}');
    });

    it.each([
      ['/admin/close-reminder/merchants/..', 'merchantId'],
      ['/admin/close-reminder/merchants/has%20space', 'merchantId'],
      ['/admin/close-reminder/orders/ord_xyz', 'orderId'],
      ['/admin/close-reminder/merchants?limit=0', 'limit'],
      ['/admin/close-reminder/merchants?limit=501', 'limit'],
      ['/admin/close-reminder/merchants?after=a%20b', 'after'],
    ])('GET %s is a 400 naming %s', async (path, field) => {
      expect400(await request(t.server).get(path).set(ADMIN), field);
    });

    it('needs the admin key', async () => {
      expect((await request(t.server).put('/admin/close-reminder/merchants/m_x').send({ enabled: true })).status).toBe(401);
      expect((await request(t.server).get('/admin/close-reminder/merchants').set(asUser('cr_payer'))).status).toBe(403);
      expect((await request(t.server).get('/admin/close-reminder/merchants/m_x').set(ADMIN)).status).toBe(404);
    });
  });

  /** The merchantOrderNo of an order, read from its hash (found by the key builder's shape). */
  async function merchantOrderNo(orderId: string): Promise<string> {
    const [key] = await raw.keys(`${t.config.redis.keyPrefix}:orders:*:order:${orderId}`);
    return (await raw.hget(key, 'merchantOrderNo'))!;
  }
});
