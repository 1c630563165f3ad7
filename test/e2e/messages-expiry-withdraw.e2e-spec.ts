import Redis from 'ioredis';
import request from 'supertest';
import { MAX_MESSAGE_TTL_MS } from '../../src/features/messages/message.commands';
import { CREDS, TestApp, userToken, useAppOnOwnRedis } from '../support/test-app';

/**
 * Over HTTP, for business systems (service token): a message written with its
 * own expiry (`ttlMs` or `expiresAt` on POST /messages and in a batch), and
 * POST /messages/withdraw. Bad input is a 400 naming the field and stores
 * nothing; other credentials are refused and store nothing either.
 */

const SERVICE = { 'x-service-token': CREDS.serviceToken };
const asUser = (accountId: string) => ({ authorization: `Bearer ${userToken(accountId)}` });

const message = (accountId: string, outerBizId: string, extra: Record<string, unknown> = {}) => ({
  accountId,
  bizType: 'ORDER_CLOSE_REMINDER',
  outerBizId,
  title: 'Your order closes soon',
  content: `Pay order ${outerBizId} within 15 minutes`,
  ...extra,
});
const withdrawal = (accountId: string, outerBizId: string) => ({ accountId, bizType: 'ORDER_CLOSE_REMINDER', outerBizId });

describe('Message center over HTTP: expiry and withdraw', () => {
  let t: TestApp;
  let raw: Redis;
  /** The names of every message-center key: what "stores nothing" compares. */
  const snapshot = async () => (await raw.keys(`${t.config.redis.keyPrefix}:messages:*`)).sort();
  const redisNow = async () => {
    const [s, us] = await raw.time();
    return Number(s) * 1000 + Math.floor(Number(us) / 1000);
  };
  const pull = async (accountId: string) => {
    const res = await request(t.server).get('/messages?limit=100').set(asUser(accountId));
    expect(res.status).toBe(200);
    return res.body as { messages: Array<{ msgId: string; outerBizId: string }>; unread: number };
  };
  const expect400 = (res: request.Response, field: string) => {
    expect({ status: res.status, error: res.body.error }).toEqual({ status: 400, error: 'VALIDATION_FAILED' });
    expect((res.body.details as Array<{ field: string }>).map((d) => d.field)).toContain(field);
    expect(res.body.message).toContain(field);
  };

  const suite = useAppOnOwnRedis({ RATE_LIMIT_ENABLED: 'false' });
  beforeAll(() => {
    ({ t, raw } = suite);
  });

  describe('POST /messages with ttlMs', () => {
    it('stores the message with its expiry; the app stops seeing it once the expiry passes', async () => {
      const acc = 'e2e_exp';
      const res = await request(t.server)
        .post('/messages')
        .set(SERVICE)
        .send(message(acc, 'o-1', { ttlMs: 400 }));
      const expiresAt = (await redisNow()) + 400;
      expect(res.status).toBe(201);
      expect(await pull(acc)).toMatchObject({ messages: [{ outerBizId: 'o-1' }], unread: 1 });
      const msgId = (res.body as { msgId: string }).msgId;
      for (let now = await redisNow(); now <= expiresAt; now = await redisNow()) await new Promise((r) => setTimeout(r, 20));
      expect(await pull(acc)).toMatchObject({ messages: [], unread: 0 });
      expect((await request(t.server).get('/messages/unread-count').set(asUser(acc))).body).toEqual({ unread: 0 });
      expect((await request(t.server).get(`/messages/${msgId}`).set(asUser(acc))).status).toBe(404);
    });

    it.each<[string, unknown]>([
      ['null', null],
      ['a string', '60000'],
      ['a fraction', 60_000.5],
      ['zero', 0],
      ['negative', -1_000],
      ['an ISO duration', 'PT15M'],
      ['more than 90 days', MAX_MESSAGE_TTL_MS + 1],
      ['1e16', 1e16],
    ])('refuses ttlMs %s: 400 naming ttlMs, nothing stored', async (what, ttlMs) => {
      const acc = `e2e_exp_bad_${what.replace(/\W+/g, '_')}`;
      const before = await snapshot();
      expect400(
        await request(t.server)
          .post('/messages')
          .set(SERVICE)
          .send(message(acc, 'o-1', { ttlMs })),
        'ttlMs',
      );
      expect(await snapshot()).toEqual(before);
      // The same message without the bad field is new: the refused one left no idempotency record.
      expect((await request(t.server).post('/messages').set(SERVICE).send(message(acc, 'o-1'))).status).toBe(201);
    });

    it('in a batch, a bad ttlMs fails only its own item, naming the field', async () => {
      const acc = 'e2e_exp_batch';
      const res = await request(t.server)
        .post('/messages/batch')
        .set(SERVICE)
        .send({ messages: [message(acc, 'b-1', { ttlMs: 60_000 }), message(acc, 'b-2', { ttlMs: 0 }), message(acc, 'b-3', { ttlMs: null })] });
      expect(res.status).toBe(200);
      const results = (res.body as { results: Array<{ status: number; error?: string }> }).results;
      expect(results.map((r) => r.status)).toEqual([201, 400, 400]);
      expect(results[1].error).toContain('ttlMs');
      expect(results[2].error).toContain('ttlMs');
      expect((await pull(acc)).messages.map((m) => m.outerBizId)).toEqual(['b-1']);
    });
  });

  describe('POST /messages with expiresAt', () => {
    it('stores the message until expiresAt (an ISO date-time with a zone); the app stops seeing it then', async () => {
      const acc = 'e2e_abs';
      const expiresAt = (await redisNow()) + 500;
      const res = await request(t.server)
        .post('/messages')
        .set(SERVICE)
        .send(message(acc, 'o-1', { expiresAt: new Date(expiresAt).toISOString() }));
      expect({ status: res.status, duplicate: (res.body as { duplicate: boolean }).duplicate }).toEqual({ status: 201, duplicate: false });
      const msgId = (res.body as { msgId: string }).msgId;
      expect(await pull(acc)).toMatchObject({ messages: [{ outerBizId: 'o-1' }], unread: 1 });
      expect((await request(t.server).get(`/messages/${msgId}`).set(asUser(acc))).status).toBe(200);
      for (let now = await redisNow(); now <= expiresAt; now = await redisNow()) await new Promise((r) => setTimeout(r, 20));
      expect(await pull(acc)).toMatchObject({ messages: [], unread: 0 });
      expect((await request(t.server).get('/messages/unread-count').set(asUser(acc))).body).toEqual({ unread: 0 });
      expect((await request(t.server).get(`/messages/${msgId}`).set(asUser(acc))).status).toBe(404);
    });

    it('an expiresAt already past (in any zone) is a 200 with expired: true, and stores nothing', async () => {
      const acc = 'e2e_abs_past';
      const before = await snapshot();
      for (const expiresAt of [new Date((await redisNow()) - 1_000).toISOString(), '2026-01-01T08:00:00+08:00']) {
        const res = await request(t.server)
          .post('/messages')
          .set(SERVICE)
          .send(message(acc, 'o-1', { expiresAt }));
        expect({ status: res.status, body: res.body as unknown }).toEqual({ status: 200, body: { msgId: '', duplicate: false, expired: true } });
      }
      expect(await snapshot()).toEqual(before);
    });

    it.each<[string, unknown]>([
      ['null', null],
      ['epoch ms (a number)', 1_795_336_200_000],
      ['epoch ms as a string', '1795336200000'],
      ['a bare date', '2026-11-22'],
      ['a date-time without a zone', '2026-11-22T08:30:00'],
      ['an impossible date', '2026-02-30T08:30:00Z'],
      ['words', 'tomorrow'],
      ['41 characters', `2026-11-22T08:30:00.${'1'.repeat(20)}Z`],
      ['a five-digit year', '+010000-01-01T00:00:00Z'],
      ['before 1970', '1969-12-31T23:59:59Z'],
      ['after 9999 once its zone is applied', '9999-12-31T23:59:59-23:59'],
    ])('refuses expiresAt %s: 400 naming expiresAt, nothing stored', async (what, expiresAt) => {
      const acc = `e2e_abs_bad_${what.replace(/\W+/g, '_')}`;
      const before = await snapshot();
      expect400(
        await request(t.server)
          .post('/messages')
          .set(SERVICE)
          .send(message(acc, 'o-1', { expiresAt })),
        'expiresAt',
      );
      expect(await snapshot()).toEqual(before);
    });

    it.each(['1969-12-31T23:59:59Z', '9999-12-31T23:59:59-23:59'])('words the bounds of expiresAt %s as times, as it is sent over HTTP', async (expiresAt) => {
      const res = await request(t.server)
        .post('/messages')
        .set(SERVICE)
        .send(message('e2e_abs_words', 'o-1', { expiresAt }));
      expect(res.status).toBe(400);
      expect(res.body.message).toMatch(/^expiresAt must be a time from 1970-01-01T00:00:00.001Z to 9999-12-31T23:59:59.999Z/);
    });

    it('in a batch: a good expiresAt is 201, a past one 200 expired, a bad one fails only its item, naming the field', async () => {
      const acc = 'e2e_abs_batch';
      const res = await request(t.server)
        .post('/messages/batch')
        .set(SERVICE)
        .send({
          messages: [
            message(acc, 'b-1', { expiresAt: new Date((await redisNow()) + 60_000).toISOString() }),
            message(acc, 'b-2', { expiresAt: new Date((await redisNow()) - 1_000).toISOString() }),
            message(acc, 'b-3', { expiresAt: '2026-11-22T08:30:00' }),
            message(acc, 'b-4', { expiresAt: '1969-12-31T23:59:59Z' }),
            message(acc, 'b-5', { expiresAt: new Date((await redisNow()) + MAX_MESSAGE_TTL_MS + 86_400_000).toISOString() }),
          ],
        });
      expect(res.status).toBe(200);
      const body = res.body as {
        results: Array<{ status: number; expired?: boolean; error?: string }>;
        created: number;
        duplicates: number;
        expired: number;
        invalid: number;
      };
      expect(body.results.map((r) => [r.status, r.expired ?? false])).toEqual([
        [201, false],
        [200, true],
        [400, false],
        [400, false],
        [201, false],
      ]);
      expect(body.results[2].error).toContain('expiresAt');
      expect(body.results[3].error).toContain('expiresAt');
      expect({ created: body.created, duplicates: body.duplicates, expired: body.expired, invalid: body.invalid }).toEqual({
        created: 2,
        duplicates: 0,
        expired: 1,
        invalid: 2,
      });
      expect((await pull(acc)).messages.map((m) => m.outerBizId)).toEqual(['b-1', 'b-5']);
    });
  });

  describe('POST /messages/withdraw', () => {
    it('takes the message back: the app no longer sees it; again is {withdrawn: false}; a retried write stores nothing', async () => {
      const acc = 'e2e_wd';
      expect((await request(t.server).post('/messages').set(SERVICE).send(message(acc, 'o-1'))).status).toBe(201);
      expect((await request(t.server).post('/messages').set(SERVICE).send(message(acc, 'o-2'))).status).toBe(201);
      const first = await request(t.server).post('/messages/withdraw').set(SERVICE).send(withdrawal(acc, 'o-1'));
      expect({ status: first.status, body: first.body as unknown }).toEqual({ status: 200, body: { withdrawn: true } });
      expect(await pull(acc)).toMatchObject({ messages: [{ outerBizId: 'o-2' }], unread: 1 });

      const again = await request(t.server).post('/messages/withdraw').set(SERVICE).send(withdrawal(acc, 'o-1'));
      expect({ status: again.status, body: again.body as unknown }).toEqual({ status: 200, body: { withdrawn: false } });
      const never = await request(t.server).post('/messages/withdraw').set(SERVICE).send(withdrawal(acc, 'never-written'));
      expect({ status: never.status, body: never.body as unknown }).toEqual({ status: 200, body: { withdrawn: false } });

      const retried = await request(t.server).post('/messages').set(SERVICE).send(message(acc, 'o-1'));
      expect({ status: retried.status, body: retried.body as unknown }).toEqual({ status: 200, body: { msgId: '', duplicate: true, withdrawn: true } });
      const batch = await request(t.server)
        .post('/messages/batch')
        .set(SERVICE)
        .send({ messages: [message(acc, 'never-written')] });
      expect(batch.body).toMatchObject({ results: [{ index: 0, status: 200, withdrawn: true }], created: 0, duplicates: 1 });
      expect(await pull(acc)).toMatchObject({ messages: [{ outerBizId: 'o-2' }], unread: 1 });
    });

    it.each<[string, Record<string, string>]>([
      ['no credentials', {}],
      ['an app-user JWT', asUser('e2e_wd_auth')],
      ['the admin key', { 'x-admin-key': CREDS.adminKey }],
      ['a wrong service token', { 'x-service-token': 'not-the-service-token-0123456789' }],
    ])('is refused with %s, and stores nothing', async (_who, headers) => {
      const acc = 'e2e_wd_auth';
      await request(t.server).post('/messages').set(SERVICE).send(message(acc, 'kept'));
      const before = await snapshot();
      const res = await request(t.server).post('/messages/withdraw').set(headers).send(withdrawal(acc, 'kept'));
      expect([401, 403]).toContain(res.status);
      expect(await snapshot()).toEqual(before);
      expect((await pull(acc)).messages.map((m) => m.outerBizId)).toEqual(['kept']);
    });

    it.each<[string, Record<string, unknown>, string]>([
      ['no accountId', { bizType: 'ORDER_CLOSE_REMINDER', outerBizId: 'o-1' }, 'accountId'],
      ['no bizType', { accountId: 'e2e_wd_bad', outerBizId: 'o-1' }, 'bizType'],
      ['no outerBizId', { accountId: 'e2e_wd_bad', bizType: 'ORDER_CLOSE_REMINDER' }, 'outerBizId'],
      ['a null outerBizId', { ...withdrawal('e2e_wd_bad', 'o-1'), outerBizId: null }, 'outerBizId'],
      ['an accountId of 65 characters', withdrawal('a'.repeat(65), 'o-1'), 'accountId'],
      ['an accountId with braces (a Redis hash tag)', withdrawal('{e2e_wd_bad}', 'o-1'), 'accountId'],
      ['a bizType of 33 characters', { ...withdrawal('e2e_wd_bad', 'o-1'), bizType: 'B'.repeat(33) }, 'bizType'],
      ['an outerBizId of 65 characters', withdrawal('e2e_wd_bad', 'o'.repeat(65)), 'outerBizId'],
      ['an outerBizId with a space', withdrawal('e2e_wd_bad', 'o 1'), 'outerBizId'],
      ['an unknown field', { ...withdrawal('e2e_wd_bad', 'o-1'), msgId: '1795302000000000' }, 'msgId'],
    ])('refuses %s: 400 naming the field, nothing stored', async (_what, body, field) => {
      await request(t.server).post('/messages').set(SERVICE).send(message('e2e_wd_bad', 'o-1'));
      const before = await snapshot();
      expect400(await request(t.server).post('/messages/withdraw').set(SERVICE).send(body), field);
      expect(await snapshot()).toEqual(before);
      expect((await pull('e2e_wd_bad')).messages.map((m) => m.outerBizId)).toEqual(['o-1']);
    });
  });
});
