import request from 'supertest';
import { waitUntil } from '../harness/redis-process';
import { rainBody } from '../support/red-envelopes';
import { activityBody } from '../support/seckill';
import { CREDS, merchantHeaders, useAppOnOwnRedis, userToken } from '../support/test-app';

/**
 * Text shown to people (message titles and contents, broadcast texts, order subjects, flash-sale and rain titles,
 * reminder templates, wallet memos) never holds a control character or a bidirectional override: each is a 400
 * naming the field, and nothing is stored. Tab, line breaks, emoji (joiners included) and right-to-left scripts
 * are text like any other.
 */
const ctx = useAppOnOwnRedis();

const ADMIN = { 'x-admin-key': CREDS.adminKey };
const SERVICE = { 'x-service-token': CREDS.serviceToken };

/** Every key but the rate-limit windows and merchant nonces, which the guards write before validation. */
async function stored(): Promise<string[]> {
  const keys = await ctx.raw.keys('*');
  // Left out: rate-limit windows, merchant nonces, and the flash-sale sweep's lease (a background job's, whenever it runs).
  return keys.filter((k) => !/:rate-limit:|:auth:\{m:|:seckill:\{i\}:sweep$/.test(k)).sort();
}

let n = 0;
/** One request per display field, with `text` in that field. */
const SENDERS: Array<[string, string, (text: string) => request.Test]> = [
  [
    'POST /messages',
    'title',
    (text) =>
      request(ctx.t.server)
        .post('/messages')
        .set(SERVICE)
        .send({ accountId: 'acc_text', bizType: 'PAYMENT_SUCCESS', outerBizId: `o-${++n}`, title: text, content: 'paid' }),
  ],
  [
    'POST /messages',
    'content',
    (text) =>
      request(ctx.t.server)
        .post('/messages')
        .set(SERVICE)
        .send({ accountId: 'acc_text', bizType: 'PAYMENT_SUCCESS', outerBizId: `o-${++n}`, title: 'Paid', content: text }),
  ],
  [
    'POST /admin/messages/broadcast',
    'title',
    (text) =>
      request(ctx.t.server)
        .post('/admin/messages/broadcast')
        .set(ADMIN)
        .send({ title: text, content: 'c', audience: ['acc_text'] }),
  ],
  [
    'POST /merchant/orders',
    'subject',
    (text) => {
      const body = JSON.stringify({ merchantOrderNo: `text-${++n}`, amount: 100, currency: 'CNY', subject: text });
      return request(ctx.t.server)
        .post('/merchant/orders')
        .set(merchantHeaders('POST', '/merchant/orders', body))
        .send(body);
    },
  ],
  [
    'POST /admin/seckill/activities',
    'title',
    (text) =>
      request(ctx.t.server)
        .post('/admin/seckill/activities')
        .set(ADMIN)
        .send(activityBody(`sk-${++n}`, [{ productId: 'p', stock: 1 }], { title: text })),
  ],
  [
    'POST /admin/seckill/activities',
    'products[0].title',
    (text) => {
      const body = activityBody(`sk-${++n}`, [{ productId: 'p', stock: 1 }]);
      body.products[0].title = text;
      return request(ctx.t.server).post('/admin/seckill/activities').set(ADMIN).send(body);
    },
  ],
  [
    'POST /admin/red-envelopes/activities',
    'title',
    (text) =>
      request(ctx.t.server)
        .post('/admin/red-envelopes/activities')
        .set(ADMIN)
        .send(rainBody(`rn-${++n}`, { title: text })),
  ],
  [
    'PUT /admin/close-reminder/merchants/{merchantId}',
    'content',
    (text) =>
      request(ctx.t.server)
        .put(`/admin/close-reminder/merchants/m_text${++n}`)
        .set(ADMIN)
        .send({ enabled: true, leadSeconds: 600, title: 'Pay {subject}', content: text }),
  ],
  [
    'POST /admin/wallets/{ownerId}/top-ups',
    'memo',
    (text) =>
      request(ctx.t.server)
        .post('/admin/wallets/account:acc_text/top-ups')
        .set(ADMIN)
        .send({ amount: 100, currency: 'CNY', reference: `t-${++n}`, memo: text }),
  ],
];

const HIDDEN: Array<[string, string]> = [
  ['NUL', 'Coffee\u0000beans'],
  ['escape', 'Coffee \u001b[31mbeans'],
  ['DEL', 'Coffee\u007f'],
  ['a C1 control (NEL)', 'Coffee\u0085beans'],
  ['a right-to-left override', 'invoice\u202Efdp.exe'],
  ['a left-to-right isolate', 'Coffee \u2066beans\u2069'],
];

describe('text shown to people', () => {
  beforeAll(async () => {
    // The rain's sponsor can fund every rain the valid-text cases create.
    const funded = await request(ctx.t.server)
      .post(`/admin/wallets/merchant:${CREDS.merchantId}/top-ups`)
      .set(ADMIN)
      .send({ amount: 1_000_000, currency: 'CNY', reference: 'display-text-fund' });
    expect(funded.status).toBeLessThan(300);
  });

  describe.each(SENDERS)('%s %s', (_route, field, send) => {
    it.each(HIDDEN)('with %s: 400 naming the field, nothing stored', async (_what, text) => {
      const before = await stored();
      const res = await send(text);
      expect(res.status).toBe(400);
      const named = (res.body.details as Array<{ field: string; errors: string[] }>).find((d) => d.field === field);
      expect(named?.errors).toContain(`${field.replace(/^.*\./, '')} must not hold control characters or bidirectional overrides`);
      expect(await stored()).toEqual(before);
    });

    it('with tab, line breaks, an emoji joined by ZWJ and Arabic: taken', async () => {
      const res = await send('Line one\tand\r\nline two 👩‍💻 مرحبا');
      expect(res.status).toBeLessThan(300);
      // A rain loads in the background: wait for it, so that the cases after this one see no key change of its.
      if (res.status === 202) {
        const id = res.body.activityId as string;
        await waitUntil(
          'the rain to load',
          async () => ['READY', 'OPEN'].includes((await request(ctx.t.server).get(`/admin/red-envelopes/activities/${id}`).set(ADMIN)).body.state as string),
          20_000,
          50,
        );
      }
    });
  });

  it.each(SENDERS.filter(([, field]) => field !== 'memo'))(
    '%s %s of invisible characters only (zero-width space, Hangul filler): 400 "must not be blank"',
    async (_route, field, send) => {
      const before = await stored();
      const res = await send('\u200B\u3164\u200B');
      expect(res.status).toBe(400);
      const named = (res.body.details as Array<{ field: string; errors: string[] }>).find((d) => d.field === field);
      expect(named?.errors).toContain(`${field.replace(/^.*\./, '')} must not be blank`);
      expect(await stored()).toEqual(before);
    },
  );

  it.each([
    ['a right-to-left override', 'https://pay.example.com/\u202Egpj.exe'],
    ['NUL', 'redispay://orders/o-1\u0000x'],
    ['quotes and angle brackets', 'https://pay.example.com/"><script>'],
    ['a space', 'redispay://orders/o 1'],
  ])('a message link with %s: 400 naming url, nothing stored; percent-encoded it is taken', async (_what, url) => {
    const before = await stored();
    const write = (link: string) =>
      request(ctx.t.server)
        .post('/messages')
        .set(SERVICE)
        .send({ accountId: 'acc_link', bizType: 'PAYMENT_SUCCESS', outerBizId: `l-${++n}`, title: 'Paid', content: 'paid', url: link });
    const res = await write(url);
    expect(res.status).toBe(400);
    expect((res.body.details as Array<{ field: string }>).map((d) => d.field)).toEqual(['url']);
    expect(await stored()).toEqual(before);
    const encoded = url.replace(/^([a-z]+:\/\/)(.*)$/, (_m, scheme: string, rest: string) => scheme + encodeURI(rest).replace(/["<>]/g, encodeURIComponent));
    expect((await write(encoded)).status).toBe(201);
  });

  it('a message batch refuses only the item that holds one', async () => {
    const res = await request(ctx.t.server)
      .post('/messages/batch')
      .set(SERVICE)
      .send({
        messages: [
          { accountId: 'acc_batch', bizType: 'PAYMENT_SUCCESS', outerBizId: 'b-1', title: 'Paid', content: 'ok' },
          { accountId: 'acc_batch', bizType: 'PAYMENT_SUCCESS', outerBizId: 'b-2', title: 'Paid\u0007', content: 'bell' },
        ],
      });
    expect(res.status).toBeLessThan(300);
    const statuses = (res.body.results as Array<{ status: number }>).map((r) => r.status);
    expect(statuses).toEqual([201, 400]);
    const inbox = await request(ctx.t.server)
      .get('/messages')
      .set({ authorization: `Bearer ${userToken('acc_batch')}` });
    expect((inbox.body.messages as Array<{ outerBizId: string }>).map((m) => m.outerBizId)).toEqual(['b-1']);
  });
});
