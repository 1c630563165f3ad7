import Redis from 'ioredis';
import request from 'supertest';
import { CREDS, TestApp, userToken, useAppOnOwnRedis } from '../support/test-app';

/**
 * Bad input to the message center over HTTP: every refusal is a 400 in the
 * standard error body naming the field (a 413 for a body over the limit), and
 * stores nothing: no key of the message center changes, the target inbox stays
 * empty (or as it was), and the same message sent correctly afterwards is new
 * (201), so no idempotency record was left behind either. Runs with the
 * default body limit (64 KiB) and without rate limits.
 */

const SERVICE = { 'x-service-token': CREDS.serviceToken };
const auth = (accountId: string) => ({ authorization: `Bearer ${userToken(accountId)}` });

/** A valid message with every field set. */
function valid(accountId: string, outerBizId: string): Record<string, unknown> {
  return {
    accountId,
    bizType: 'PAYMENT_SUCCESS',
    outerBizId,
    title: 'Payment successful',
    content: '¥128.00 paid to Coffee Corner',
    url: `redispay://orders/${outerBizId}`,
    logoUrl: 'https://static.example.com/logos/pay.png',
    needPush: false,
    createdAt: '2026-11-22T08:30:00.000Z',
  };
}

const without = (field: string) => (m: Record<string, unknown>) => Object.fromEntries(Object.entries(m).filter(([k]) => k !== field));
const setting = (field: string, value: unknown) => (m: Record<string, unknown>) => ({ ...m, [field]: value });

/** A 400 VALIDATION_FAILED in the standard body whose details and message name `field`. */
function expect400(res: request.Response, field: string): void {
  expect({ status: res.status, statusCode: res.body.statusCode, error: res.body.error }).toEqual({ status: 400, statusCode: 400, error: 'VALIDATION_FAILED' });
  expect(Object.keys(res.body).sort()).toEqual(['details', 'error', 'message', 'requestId', 'statusCode']);
  expect({ field, named: (res.body.details as Array<{ field: string }>).map((d) => d.field) }).toEqual({ field, named: expect.arrayContaining([field]) });
  expect(res.body.message).toContain(field);
}

describe('Message center: bad input', () => {
  let t: TestApp;
  let raw: Redis;
  /** The names of every message-center key: what "stores nothing" compares. */
  const snapshot = async () => (await raw.keys(`${t.config.redis.keyPrefix}:messages:*`)).sort();
  const inbox = async (accountId: string) => {
    const res = await request(t.server).get('/messages?limit=100').set(auth(accountId));
    expect(res.status).toBe(200);
    return res.body as { messages: Array<{ msgId: string; read: boolean }>; unread: number };
  };

  const suite = useAppOnOwnRedis({ RATE_LIMIT_ENABLED: 'false' });
  beforeAll(() => {
    ({ t, raw } = suite);
  });

  describe('POST /messages', () => {
    const cases: Array<[string, (m: Record<string, unknown>) => Record<string, unknown>, string]> = [
      ['content of 2001 characters', setting('content', 'x'.repeat(2001)), 'content'],
      ['empty content', setting('content', ''), 'content'],
      ['content that is not a string', setting('content', 42), 'content'],
      ['a title of 101 characters', setting('title', 'x'.repeat(101)), 'title'],
      ['an empty title', setting('title', ''), 'title'],
      ['an unknown field', setting('priority', 'high'), 'priority'],
      ['a msgId chosen by the writer', setting('msgId', '1795302000000000'), 'msgId'],
      ['no accountId', without('accountId'), 'accountId'],
      ['no bizType', without('bizType'), 'bizType'],
      ['no outerBizId', without('outerBizId'), 'outerBizId'],
      ['no title', without('title'), 'title'],
      ['no content', without('content'), 'content'],
      ['an accountId with a space', setting('accountId', 'acc 1'), 'accountId'],
      ['an accountId of 65 characters', setting('accountId', 'a'.repeat(65)), 'accountId'],
      ['an accountId with braces (a Redis hash tag)', setting('accountId', '{acc_v}'), 'accountId'],
      ['an accountId that is a number', setting('accountId', 1001), 'accountId'],
      ['a bizType with a space', setting('bizType', 'PAYMENT SUCCESS'), 'bizType'],
      ['a bizType of 33 characters', setting('bizType', 'B'.repeat(33)), 'bizType'],
      ['an outerBizId with a space', setting('outerBizId', 'order 1'), 'outerBizId'],
      ['an outerBizId of 65 characters', setting('outerBizId', 'o'.repeat(65)), 'outerBizId'],
      ['a url without a scheme', setting('url', 'orders/1'), 'url'],
      ['a javascript: url', setting('url', 'javascript://%0Aalert(document.cookie)'), 'url'],
      ['a data: url', setting('url', 'data:text/html,<script>alert(1)</script>'), 'url'],
      ['a url of 2049 characters', setting('url', `https://example.com/${'p'.repeat(2049 - 20)}`), 'url'],
      ['an http:// logoUrl', setting('logoUrl', 'http://static.example.com/logos/pay.png'), 'logoUrl'],
      ['a createdAt in words', setting('createdAt', 'yesterday'), 'createdAt'],
      ['a createdAt in a local format', setting('createdAt', '22/11/2026 08:30'), 'createdAt'],
      ['a createdAt that is epoch milliseconds', setting('createdAt', 1795302000000), 'createdAt'],
      ['a createdAt with month 13', setting('createdAt', '2026-13-01T00:00:00Z'), 'createdAt'],
      ['a createdAt as a week date', setting('createdAt', '2026-W48-3T10:00:00Z'), 'createdAt'],
      ['an expiresAt as an ordinal date', setting('expiresAt', '2026-332T10:00:00Z'), 'expiresAt'],
      ['a needPush that is a string', setting('needPush', 'true'), 'needPush'],
      ['a title holding a lone surrogate (not Unicode text)', setting('title', 'Paid \ud800'), 'title'],
      ['content holding a lone surrogate', setting('content', '\udfff'), 'content'],
      ['a blank title (white space only)', setting('title', '   '), 'title'],
      ['blank content (white space only)', setting('content', '\n\t '), 'content'],
      ['the bizType of broadcasts (BROADCAST)', setting('bizType', 'BROADCAST'), 'bizType'],
    ];

    it.each(cases.map(([what, change, field], i) => [what, change, field, i] as const))(
      'refuses %s: 400 naming the field, nothing stored',
      async (_what, change, field, i) => {
        const accountId = `acc_v${i}`;
        const outerBizId = `order-v${i}`;
        const before = await snapshot();
        expect400(
          await request(t.server)
            .post('/messages')
            .set(SERVICE)
            .send(change(valid(accountId, outerBizId))),
          field,
        );
        expect(await snapshot()).toEqual(before);
        expect(await inbox(accountId)).toMatchObject({ messages: [], unread: 0 });
        // The correct message with the same key is new: the refused one left no idempotency record.
        expect((await request(t.server).post('/messages').set(SERVICE).send(valid(accountId, outerBizId))).status).toBe(201);
      },
    );

    it.each<[string, string]>([
      ['a JSON array', JSON.stringify([valid('acc_vb', 'order-vb')])],
      ['JSON null', 'null'],
      ['a JSON string', '"hello"'],
      ['malformed JSON', '{"accountId":'],
    ])('refuses a body that is %s with 400 in the standard shape, nothing stored', async (_what, body) => {
      const before = await snapshot();
      const res = await request(t.server).post('/messages').set(SERVICE).set('content-type', 'application/json').send(body);
      expect({ status: res.status, statusCode: res.body.statusCode }).toEqual({ status: 400, statusCode: 400 });
      expect(typeof res.body.requestId).toBe('string');
      expect(await snapshot()).toEqual(before);
    });
  });

  describe('the bizType BROADCAST belongs to broadcasts', () => {
    it('a business system can neither write nor withdraw one (400 naming bizType, nothing stored): a list broadcast still reaches the inbox as sent', async () => {
      const accountId = 'acc_vbc';
      const key = { accountId, bizType: 'BROADCAST', outerBizId: 'promo-vbc' };
      const before = await snapshot();
      expect400(
        await request(t.server)
          .post('/messages')
          .set(SERVICE)
          .send({ ...key, title: 'Not from ops', content: 'c' }),
        'bizType',
      );
      expect400(await request(t.server).post('/messages/withdraw').set(SERVICE).send(key), 'bizType');
      const batch = await request(t.server)
        .post('/messages/batch')
        .set(SERVICE)
        .send({ messages: [{ ...key, title: 'Not from ops', content: 'c' }] });
      expect([batch.status, batch.body.invalid, batch.body.results[0].status]).toEqual([200, 1, 400]);
      expect(batch.body.results[0].error).toMatch(/^bizType /);
      expect(await snapshot()).toEqual(before);

      const sent = await request(t.server)
        .post('/admin/messages/broadcast')
        .set({ 'x-admin-key': CREDS.adminKey })
        .send({ audience: [accountId], requestId: 'promo-vbc', title: 'From ops', content: 'c' });
      expect([sent.status, sent.body.written, sent.body.duplicate]).toEqual([200, 1, false]);
      expect((await inbox(accountId)).messages).toEqual([expect.objectContaining({ bizType: 'BROADCAST', broadcastId: 'promo-vbc', title: 'From ops' })]);
    });
  });

  describe('the bizType CLOSE_REMINDER belongs to the close reminders', () => {
    it('a business system can neither write nor withdraw one (400 naming bizType, nothing stored), alone or in a batch', async () => {
      // The reminder of order X is (CLOSE_REMINDER, X) in the payer's inbox: written first by a business system, the
      // service's reminder would find it "already written"; withdrawn, the reminder would never show.
      const key = { accountId: 'acc_vcr', bizType: 'CLOSE_REMINDER', outerBizId: 'ord_0123456789abcdef01234567' };
      const before = await snapshot();
      expect400(
        await request(t.server)
          .post('/messages')
          .set(SERVICE)
          .send({ ...key, title: 'Your order closes soon', content: 'c' }),
        'bizType',
      );
      expect400(await request(t.server).post('/messages/withdraw').set(SERVICE).send(key), 'bizType');
      const batch = await request(t.server)
        .post('/messages/batch')
        .set(SERVICE)
        .send({ messages: [{ ...key, title: 'Your order closes soon', content: 'c' }] });
      expect([batch.status, batch.body.invalid, batch.body.results[0].status]).toEqual([200, 1, 400]);
      expect(await snapshot()).toEqual(before);
      // A bizType that only begins like it is the business system's.
      const own = await request(t.server)
        .post('/messages')
        .set(SERVICE)
        .send({ ...key, bizType: 'CLOSE_REMINDER_V2', title: 'Ours', content: 'c' });
      expect(own.status).toBe(201);
    });
  });

  describe('POST /admin/messages/broadcast', () => {
    it.each([['.'], ['..']])('refuses the requestId %j with a 400 naming requestId (not a field the caller never sent), nothing stored', async (requestId) => {
      const before = await snapshot();
      for (const audience of [['acc_vrq1', 'acc_vrq2'], 'all']) {
        expect400(
          await request(t.server)
            .post('/admin/messages/broadcast')
            .set({ 'x-admin-key': CREDS.adminKey })
            .send({ audience, requestId, title: 'T', content: 'c' }),
          'requestId',
        );
      }
      expect(await snapshot()).toEqual(before);
    });
  });

  describe('POST /messages/batch', () => {
    it('an item holding a lone surrogate fails alone, naming its field; the others are written', async () => {
      const res = await request(t.server)
        .post('/messages/batch')
        .set(SERVICE)
        .send({ messages: [valid('acc_vs', 'order-vs1'), { ...valid('acc_vs', 'order-vs2'), title: 'x\ud83d' }, valid('acc_vs', 'order-vs3')] });
      expect(res.status).toBe(200);
      expect(res.body).toMatchObject({ created: 2, invalid: 1 });
      expect(res.body.results.map((r: { status: number }) => r.status)).toEqual([201, 400, 201]);
      expect(res.body.results[1].error).toMatch(/^title /);
      expect((await inbox('acc_vs')).messages).toHaveLength(2);
    });
  });

  describe('bodies over the limit (64 KiB; 4 MiB for the batch route)', () => {
    const big = 'x'.repeat(70 * 1024);
    const bigBatch = { messages: Array.from({ length: 500 }, (_, i) => ({ ...valid('acc_big', `order-big-${i}`), content: 'x'.repeat(9000) })) };
    it.each<[string, string, Record<string, unknown>]>([
      ['POST /messages', '/messages', { ...valid('acc_big', 'order-big'), content: big }],
      ['POST /messages/batch', '/messages/batch', bigBatch],
      ['POST /pending-actions', '/pending-actions', { accountId: 'acc_big', bizType: 'PASSWORD_RECOVERY', context: { note: big } }],
    ])('%s answers 413 in the standard shape and stores nothing', async (_route, path, body) => {
      const before = await snapshot();
      const res = await request(t.server).post(path).set(SERVICE).send(body);
      expect({ status: res.status, statusCode: res.body.statusCode, error: res.body.error }).toEqual({
        status: 413,
        statusCode: 413,
        error: 'PAYLOAD_TOO_LARGE',
      });
      expect(await snapshot()).toEqual(before);
      expect(await inbox('acc_big')).toMatchObject({ messages: [], unread: 0 });
    });
  });

  it('POST /pending-actions with a context over 1 KiB as JSON answers 400 naming context, and stores nothing', async () => {
    const before = await snapshot();
    const res = await request(t.server)
      .post('/pending-actions')
      .set(SERVICE)
      .send({ accountId: 'acc_ctx', bizType: 'PASSWORD_RECOVERY', context: { note: 'x'.repeat(1100) } });
    expect({ status: res.status, body: { ...res.body, requestId: undefined } }).toEqual({
      status: 400,
      body: {
        statusCode: 400,
        error: 'VALIDATION_FAILED',
        message: 'context must be at most 1024 bytes as JSON',
        details: [{ field: 'context', errors: ['too large'] }],
        requestId: undefined,
      },
    });
    expect(await snapshot()).toEqual(before);
  });

  describe('pulls, message ids and read state', () => {
    const owner = 'acc_vq';
    const ids: string[] = [];

    beforeAll(async () => {
      for (let i = 1; i <= 3; i++)
        ids.push(
          (
            await request(t.server)
              .post('/messages')
              .set(SERVICE)
              .send(valid(owner, `order-q${i}`))
          ).body.msgId,
        );
    });

    it.each<[string, string, string]>([
      ['after=abc', '?after=abc', 'after'],
      ['after=-1', '?after=-1', 'after'],
      ['after=0', '?after=0', 'after'],
      ['after with a leading zero', '?after=01795302000000000', 'after'],
      ['after of 18 digits', `?after=${'9'.repeat(18)}`, 'after'],
      ['after=1.5', '?after=1.5', 'after'],
      ['an empty after', '?after=', 'after'],
      ['after given twice', '?after=1&after=2', 'after'],
      ['limit=0', '?limit=0', 'limit'],
      ['limit=101', '?limit=101', 'limit'],
      ['limit=10000', '?limit=10000', 'limit'],
      ['limit=abc', '?limit=abc', 'limit'],
      ['limit=1.5', '?limit=1.5', 'limit'],
      ['limit=-1', '?limit=-1', 'limit'],
      ['limit=0x10', '?limit=0x10', 'limit'],
      ['limit=1e1', '?limit=1e1', 'limit'],
      ['an unknown query parameter', '?page=2', 'page'],
      ['an accountId in the query', '?accountId=acc_other', 'accountId'],
    ])('GET /messages refuses %s with 400 naming the field', async (_what, query, field) => {
      expect400(await request(t.server).get(`/messages${query}`).set(auth(owner)), field);
    });

    it('names a query parameter given twice once, as given twice (not by every rule a list breaks)', async () => {
      const res = await request(t.server).get('/messages?limit=1&limit=2').set(auth(owner));
      expect400(res, 'limit');
      expect(res.body.details).toEqual([{ field: 'limit', errors: ['limit must be given once'] }]);
    });

    const badIds = ['abc', '0', '0123', '-1', '1.5', '1'.repeat(18), '1e15'];
    const routes: Array<[string, (id: string) => request.Test]> = [
      ['GET /messages/{msgId}', (id) => request(t.server).get(`/messages/${id}`)],
      ['POST /messages/{msgId}/read', (id) => request(t.server).post(`/messages/${id}/read`)],
      ['DELETE /messages/{msgId}', (id) => request(t.server).delete(`/messages/${id}`)],
    ];
    it.each(routes.flatMap(([route, call]) => badIds.map((id) => [route, id, call] as const)))(
      '%s refuses msgId %s with 400 naming msgId',
      async (_route, id, call) => {
        expect400(await call(id).set(auth(owner)), 'msgId');
      },
    );

    it("leaves the owner's inbox as written after every refused request", async () => {
      expect(ids.filter(Boolean)).toHaveLength(3);
      const now = await inbox(owner);
      expect({ ids: now.messages.map((m) => m.msgId), read: now.messages.map((m) => m.read), unread: now.unread }).toEqual({
        ids,
        read: [false, false, false],
        unread: 3,
      });
      expect((await request(t.server).get('/messages/unread-count').set(auth(owner))).body).toEqual({ unread: 3 });
    });
  });
});
