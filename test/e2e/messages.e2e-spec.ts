import Redis from 'ioredis';
import request from 'supertest';
import type { MessageDto as Msg, PullResultDto as Page } from '../../src/features/messages/dto/pull.dto';
import { waitUntil } from '../harness/redis-process';
import { RedisServerHandle, randomPrefix, startRedisServer } from '../harness/redis-server';
import { CREDS, startTestApp, TestApp, userToken } from '../support/test-app';
import { setTimeout as sleep } from 'node:timers/promises';

/**
 * The message center over HTTP on the whole app against a real redis-server:
 * idempotent writes (one and in batches), pulls by server sequence, read
 * state, broadcasts, reminders for unfinished actions, who may call what, the
 * OpenAPI document and the Prometheus counters. Bad input is covered in
 * messages-validation.e2e-spec.ts.
 *
 * Rate limits are off (the bulk tests would trip them; they are tested in
 * ops.e2e-spec) and PASSWORD_RECOVERY reminders are due after 300 ms. The
 * body limit is the default one, on purpose: the documented batch and
 * audience sizes must fit it.
 */

const REMINDER_DELAY_MS = 300;
const ENV = { RATE_LIMIT_ENABLED: 'false', PENDING_ACTION_DELAYS: `PASSWORD_RECOVERY:${REMINDER_DELAY_MS}` };
const SERVICE = { 'x-service-token': CREDS.serviceToken };
const ADMIN = { 'x-admin-key': CREDS.adminKey };
const asUser = (accountId: string) => ({ authorization: `Bearer ${userToken(accountId)}` });
const MSG_ID = /^[1-9][0-9]{15}$/;
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

/** A valid message for `accountId`; `n` makes its outerBizId (and so its idempotency key) unique. */
function message(accountId: string, n: number | string, extra: Record<string, unknown> = {}): Record<string, unknown> {
  return { accountId, bizType: 'PAYMENT_SUCCESS', outerBizId: `order-${n}`, title: `Payment ${n}`, content: `¥${n}.00 paid to Coffee Corner`, ...extra };
}

/** The standard error body, its code and, for a 400, the field it names (in details and in the message). */
function expectError(res: request.Response, status: number, code: string, field?: string): void {
  expect({ status: res.status, error: res.body.error, statusCode: res.body.statusCode }).toEqual({ status, error: code, statusCode: status });
  expect(Object.keys(res.body).filter((k) => !['statusCode', 'error', 'message', 'details', 'requestId'].includes(k))).toEqual([]);
  expect(typeof res.body.requestId).toBe('string');
  if (field === undefined) return;
  expect(res.body.details.map((d: { field: string }) => d.field)).toContain(field);
  expect(res.body.message).toContain(field);
}

/** One sample of a Prometheus counter (0 when the labelled series was never touched). */
function sample(text: string, name: string, labels = ''): number {
  const head = labels ? `${name}{${labels}} ` : `${name} `;
  const line = text.split('\n').find((l) => l.startsWith(head));
  return line ? Number(line.slice(head.length)) : 0;
}

/** The calls a test makes against one app instance. */
function client(app: () => TestApp) {
  const http = () => request(app().server);
  return {
    write: (body: unknown) =>
      http()
        .post('/messages')
        .set(SERVICE)
        .send(body as object),
    batch: (messages: unknown) => http().post('/messages/batch').set(SERVICE).send({ messages }),
    broadcast: (body: Record<string, unknown>) => http().post('/admin/messages/broadcast').set(ADMIN).send(body),
    startAction: (body: Record<string, unknown>) => http().post('/pending-actions').set(SERVICE).send(body),
    finishAction: (bizType: string, accountId: string) => http().delete(`/pending-actions/${bizType}/${accountId}`).set(SERVICE),
    /** GET /messages with `query`, asserting 200. */
    async pull(accountId: string, query = ''): Promise<Page> {
      const res = await http().get(`/messages${query}`).set(asUser(accountId));
      expect({ query, status: res.status }).toEqual({ query, status: 200 });
      return res.body as Page;
    },
    async unread(accountId: string): Promise<number> {
      const res = await http().get('/messages/unread-count').set(asUser(accountId));
      expect(res.status).toBe(200);
      expect(Object.keys(res.body)).toEqual(['unread']);
      return res.body.unread as number;
    },
    getOne: (accountId: string, msgId: string) => http().get(`/messages/${msgId}`).set(asUser(accountId)),
    markRead: (accountId: string, msgId: string) => http().post(`/messages/${msgId}/read`).set(asUser(accountId)),
    readAll: (accountId: string) => http().post('/messages/read-all').set(asUser(accountId)),
    remove: (accountId: string, msgId: string) => http().delete(`/messages/${msgId}`).set(asUser(accountId)),
  };
}

/** A small deterministic PRNG (mulberry32), so a failing random sequence can be replayed. */
function prng(seed: number): () => number {
  let a = seed;
  return () => {
    a = (a + 0x6d2b79f5) | 0;
    let x = Math.imul(a ^ (a >>> 15), 1 | a);
    x = (x + Math.imul(x ^ (x >>> 7), 61 | x)) ^ x;
    return ((x ^ (x >>> 14)) >>> 0) / 4294967296;
  };
}

describe('Message center over HTTP', () => {
  let redis: RedisServerHandle;
  let t: TestApp;
  let raw: Redis;
  const api = client(() => t);

  beforeAll(async () => {
    redis = await startRedisServer();
    t = await startTestApp(redis.url, ENV);
    raw = new Redis(redis.url);
  });

  afterAll(async () => {
    raw?.disconnect();
    await t?.close();
    await redis?.destroy();
  });

  describe('identities', () => {
    const victim = 'acc_ident';
    const bodies: Record<string, object> = {
      '/messages': message(victim, 'ident-1'),
      '/messages/batch': { messages: [message(victim, 'ident-2')] },
      '/messages/withdraw': { accountId: victim, bizType: 'PAYMENT_SUCCESS', outerBizId: 'ident-1' },
      '/pending-actions': { accountId: victim, bizType: 'PASSWORD_RECOVERY' },
      '/admin/messages/broadcast': { title: 'ident', content: 'ident', audience: [victim] },
    };
    const routes: Array<['service' | 'user' | 'admin', 'get' | 'post' | 'delete', string]> = [
      ['service', 'post', '/messages'],
      ['service', 'post', '/messages/batch'],
      ['service', 'post', '/messages/withdraw'],
      ['service', 'post', '/pending-actions'],
      ['service', 'delete', `/pending-actions/PASSWORD_RECOVERY/${victim}`],
      ['user', 'get', '/messages'],
      ['user', 'get', '/messages/unread-count'],
      ['user', 'get', '/messages/1795302000000000'],
      ['user', 'post', '/messages/1795302000000000/read'],
      ['user', 'post', '/messages/read-all'],
      ['user', 'delete', '/messages/1795302000000000'],
      ['admin', 'post', '/admin/messages/broadcast'],
    ];
    const callers: Array<[string, 'service' | 'user' | 'admin' | 'none' | 'forged', Record<string, string>]> = [
      ['no credentials', 'none', {}],
      ['an app-user JWT', 'user', asUser(victim)],
      ['a service token', 'service', SERVICE],
      ['the admin key', 'admin', ADMIN],
    ];
    const forged: Record<string, Record<string, string>> = {
      service: { 'x-service-token': 'not-the-service-token-0123456789' },
      user: { authorization: `Bearer ${userToken(victim, { secret: 'another-secret-another-secret-0123456789' })}` },
      admin: { 'x-admin-key': 'not-the-admin-key-0123456789' },
    };
    const cases = routes.flatMap(([group, method, path]) => [
      ...callers.filter(([, kind]) => kind !== group).map(([who, kind, headers]) => [group, method, path, who, kind === 'none' ? 401 : 403, headers] as const),
      [group, method, path, `a forged ${group} credential`, 401, forged[group]] as const,
    ]);

    it.each(cases)('%s route %s %s with %s → %s', async (_group, method, path, _who, status, headers) => {
      const req = request(t.server)[method](path).set(headers);
      const res = await (bodies[path] ? req.send(bodies[path]) : req);
      expectError(res, status, status === 401 ? 'UNAUTHORIZED' : 'FORBIDDEN');
    });

    it('none of the refused requests wrote, scheduled or broadcast anything for the account they named', async () => {
      await sleep(REMINDER_DELAY_MS + 300); // a refused POST /pending-actions would have reminded by now
      expect(await api.pull(victim)).toEqual({ messages: [], hasMore: false, latestId: null, unread: 0 });
    });
  });

  describe('writing one message', () => {
    it('stores a new (bizType, outerBizId): 201 with its msgId, and the app pulls it with every field as sent', async () => {
      const createdAt = '2026-11-22T08:30:00.000Z';
      const body = message('acc_w1', 1, { url: 'redispay://orders/order-1', logoUrl: 'https://static.example.com/logos/pay.png', needPush: true, createdAt });
      const before = Date.now();
      const res = await api.write(body);
      expect(res.status).toBe(201);
      expect(res.body).toEqual({ msgId: expect.stringMatching(MSG_ID), duplicate: false });

      const page = await api.pull('acc_w1');
      expect(page).toEqual({ messages: [expect.any(Object)], hasMore: false, latestId: res.body.msgId, unread: 1 });
      const { accountId: _accountId, ...fields } = body;
      expect(page.messages[0]).toEqual({ msgId: res.body.msgId, ...fields, storedAt: expect.any(String), read: false });
      // storedAt is the server sequence's clock (µs), not the writer's createdAt.
      const storedAt = Date.parse(page.messages[0].storedAt);
      expect(storedAt).toBe(Math.floor(Number(res.body.msgId) / 1000));
      expect(Math.abs(storedAt - before)).toBeLessThan(5000);
    });

    it('fills the optional fields: needPush false, createdAt now, no url or logoUrl', async () => {
      const res = await api.write(message('acc_w2', 1));
      expect(res.status).toBe(201);
      const [m] = (await api.pull('acc_w2')).messages;
      expect(Object.keys(m).sort()).toEqual(['bizType', 'content', 'createdAt', 'msgId', 'needPush', 'outerBizId', 'read', 'storedAt', 'title']);
      expect(m.needPush).toBe(false);
      expect(Math.abs(Date.parse(m.createdAt) - Date.now())).toBeLessThan(5000);
    });

    it('answers the same (bizType, outerBizId) again with 200 and the original msgId, keeping the original message', async () => {
      const first = await api.write(message('acc_w3', 7));
      const again = await api.write(message('acc_w3', 7, { title: 'A different title', content: 'A different content' }));
      expect(first.status).toBe(201);
      expect(again.status).toBe(200);
      expect(again.body).toEqual({ msgId: first.body.msgId, duplicate: true });
      const page = await api.pull('acc_w3');
      expect(page.messages.map((m) => [m.msgId, m.title])).toEqual([[first.body.msgId, 'Payment 7']]);
      expect(page.unread).toBe(1);
    });

    it('keys idempotency on both fields, per account: another bizType or another account is another message', async () => {
      const a = await api.write(message('acc_w4', 9));
      const otherType = await api.write(message('acc_w4', 9, { bizType: 'REFUND_SUCCESS' }));
      const otherAccount = await api.write(message('acc_w5', 9));
      expect([a.status, otherType.status, otherAccount.status]).toEqual([201, 201, 201]);
      expect(otherType.body.msgId).not.toBe(a.body.msgId);
      expect((await api.pull('acc_w4')).messages).toHaveLength(2);
      expect((await api.pull('acc_w5')).messages).toHaveLength(1);
    });

    it('stores exactly one message for 100 concurrent writes of one (bizType, outerBizId): one 201, 99 × 200, all with its msgId', async () => {
      const results = await Promise.all(Array.from({ length: 100 }, (_, i) => api.write(message('acc_race', 'race', { title: `attempt ${i}` }))));
      expect(results.map((r) => r.status).sort()).toEqual([...Array<number>(99).fill(200), 201]);
      const winner = results.findIndex((r) => r.status === 201);
      const msgId = results[winner].body.msgId;
      expect(new Set(results.map((r) => r.body.msgId))).toEqual(new Set([msgId]));
      expect(results.filter((r) => r.body.duplicate).length).toBe(99);

      const page = await api.pull('acc_race');
      expect(page.messages.map((m) => [m.msgId, m.title])).toEqual([[msgId, `attempt ${winner}`]]);
      expect(await api.unread('acc_race')).toBe(1);
    });
  });

  describe('batch writes', () => {
    /** A compact valid item: 500 of them stay well under the default 64 KiB body limit. */
    const tiny = (accountId: string, i: number, extra: Record<string, unknown> = {}) => ({
      accountId,
      bizType: 'PAY',
      outerBizId: `b-${i}`,
      title: `t${i}`,
      content: `c${i}`,
      ...extra,
    });
    /** Invalid items, each naming the field at fault. */
    const breakers: Array<[string, (item: Record<string, unknown>) => Record<string, unknown>]> = [
      ['title', (m) => ({ ...m, title: 'x'.repeat(101) })],
      ['content', ({ content: _c, ...m }) => m],
      ['accountId', (m) => ({ ...m, accountId: 'bad id' })],
      ['url', (m) => ({ ...m, url: 'not a link' })],
      ['priority', (m) => ({ ...m, priority: 1 })],
      ['createdAt', (m) => ({ ...m, createdAt: 'yesterday' })],
      ['needPush', (m) => ({ ...m, needPush: 'yes' })],
      ['outerBizId', (m) => ({ ...m, outerBizId: 'has space' })],
      ['bizType', (m) => ({ ...m, bizType: '' })],
      ['logoUrl', (m) => ({ ...m, logoUrl: 'http://insecure.example.com/x.png' })],
    ];

    it('gives each of 500 items its own outcome (201 new, 200 duplicate, 400 naming the field); the valid are stored once, the invalid not at all', async () => {
      const accounts = Array.from({ length: 10 }, (_, i) => `acc_batch${i}`);
      const items: Array<Record<string, unknown>> = Array.from({ length: 500 }, (_, i) => tiny(accounts[i % 10], i));
      const invalid = new Map<number, string>(); // index -> field named
      const earlier = new Map<number, string>(); // index -> msgId written before the batch
      const pairs: Array<[number, number]> = []; // duplicates inside the batch
      for (let k = 0; k < 10; k++) {
        const i = k * 50 + 7;
        items[i] = breakers[k][1](items[i]);
        invalid.set(i, breakers[k][0]);
      }
      for (let k = 0; k < 5; k++) {
        const i = k * 100 + 13;
        const pre = await api.write(items[i]);
        expect(pre.status).toBe(201);
        earlier.set(i, pre.body.msgId);
        const j = k * 100 + 41; // same account as j - 20: a copy of that item under another title
        items[j] = { ...items[j - 20], title: 'same key, other title' };
        pairs.push([j - 20, j]);
      }

      const res = await api.batch(items);
      expect(res.status).toBe(200);
      expect({ created: res.body.created, duplicates: res.body.duplicates, invalid: res.body.invalid }).toEqual({ created: 480, duplicates: 10, invalid: 10 });
      const results = res.body.results as Array<{ index: number; status: number; msgId?: string; error?: string }>;
      expect(results.map((r) => r.index)).toEqual(items.map((_, i) => i));
      for (const [i, field] of invalid) {
        expect({ i, status: results[i].status, msgId: results[i].msgId }).toEqual({ i, status: 400, msgId: undefined });
        expect(results[i].error).toContain(field);
      }
      for (const [i, msgId] of earlier) expect({ i, ...results[i] }).toEqual({ i, index: i, status: 200, msgId });
      for (const [a, b] of pairs) {
        expect([results[a].status, results[b].status].sort()).toEqual([200, 201]);
        expect(results[b].msgId).toBe(results[a].msgId);
      }
      const special = new Set([...invalid.keys(), ...earlier.keys(), ...pairs.flat()]);
      for (const r of results.filter((x) => !special.has(x.index))) expect({ index: r.index, status: r.status }).toEqual({ index: r.index, status: 201 });

      // What each inbox holds: every valid key once, with the msgId its item was given; no invalid item.
      for (const accountId of accounts) {
        const expected = new Map<string, string>();
        items.forEach((item, i) => {
          if (item.accountId === accountId && !invalid.has(i)) expected.set(String(item.outerBizId), results[i].msgId!);
        });
        const page = await api.pull(accountId, '?limit=100');
        expect(page.hasMore).toBe(false);
        expect(page.unread).toBe(expected.size);
        expect(new Map(page.messages.map((m) => [m.outerBizId, m.msgId]))).toEqual(expected);
        expect(page.messages).toHaveLength(expected.size);
      }
    });

    it('accepts 500 messages shaped like the documented example under the default body limit', async () => {
      const items = Array.from({ length: 500 }, (_, i) => ({
        accountId: 'acc_1001',
        bizType: 'PAYMENT_SUCCESS',
        outerBizId: `order-20261122-${String(i).padStart(4, '0')}`,
        title: 'Payment successful',
        content: '¥128.00 paid to Coffee Corner',
        url: `redispay://orders/order-20261122-${String(i).padStart(4, '0')}`,
        createdAt: '2026-11-22T08:30:00.000Z',
      }));
      const res = await api.batch(items);
      expect({ status: res.status, error: res.body.error, created: res.body.created }).toEqual({ status: 200, error: undefined, created: 500 });
    });

    it.each<[string, unknown]>([
      ['501 items', Array.from({ length: 501 }, (_, i) => tiny('acc_batch_refused', i))],
      ['an empty list', []],
      ['an object instead of a list', tiny('acc_batch_refused', 1)],
      ['no list at all', undefined],
    ])('refuses %s with 400 naming messages, storing nothing', async (_what, messages) => {
      const res = await api.batch(messages);
      expectError(res, 400, 'VALIDATION_FAILED', 'messages');
      expect(await api.pull('acc_batch_refused')).toEqual({ messages: [], hasMore: false, latestId: null, unread: 0 });
    });

    it("calls an item's missing field required and its null field not null, as a single write would", async () => {
      const { bizType: _omitted, ...noBizType } = tiny('acc_batch_required', 1);
      const res = await api.batch([noBizType, { ...tiny('acc_batch_required', 2), url: null }]);
      expect(res.status).toBe(200);
      const results = res.body.results as Array<{ index: number; status: number; error?: string }>;
      expect(results.map((r) => [r.status, r.error])).toEqual([
        [400, 'bizType is required'],
        [400, 'url must not be null'],
      ]);
    });

    it('answers each non-object item with its own 400 and still writes the object items beside them', async () => {
      const res = await api.batch([1, 'text', null, [], true, tiny('acc_batch_mixed', 1)]);
      expect(res.status).toBe(200);
      expect(res.body).toMatchObject({ created: 1, duplicates: 0, invalid: 5 });
      const results = res.body.results as Array<{ index: number; status: number; error?: string; msgId?: string }>;
      for (const r of results.slice(0, 5)) expect(r).toEqual({ index: r.index, status: 400, error: 'each message must be an object' });
      expect(results[5]).toEqual({ index: 5, status: 201, msgId: expect.stringMatching(MSG_ID) });
      expect((await api.pull('acc_batch_mixed')).messages.map((m) => m.msgId)).toEqual([results[5].msgId]);
    });
  });

  describe('pulls', () => {
    /** Writes messages one after another (so server order is write order); returns their msgIds. */
    async function writeAll(accountId: string, keys: Array<number | string>, extra: Record<string, unknown> = {}): Promise<string[]> {
      const ids: string[] = [];
      for (const k of keys) {
        const res = await api.write(message(accountId, k, extra));
        expect(res.status).toBe(201);
        ids.push(res.body.msgId);
      }
      return ids;
    }

    it('answers an empty inbox with no messages, hasMore false and latestId null', async () => {
      expect(await api.pull('acc_nobody')).toEqual({ messages: [], hasMore: false, latestId: null, unread: 0 });
    });

    it('without a cursor returns the newest page, oldest first, with hasMore when older messages exist', async () => {
      const ids = await writeAll('acc_newest', [1, 2, 3, 4, 5, 6, 7]);
      const page = await api.pull('acc_newest', '?limit=3');
      expect(page.messages.map((m) => m.msgId)).toEqual(ids.slice(4));
      expect(page).toMatchObject({ hasMore: true, latestId: ids[6], unread: 7 });
      const all = await api.pull('acc_newest'); // default limit 20
      expect(all.messages.map((m) => m.outerBizId)).toEqual([1, 2, 3, 4, 5, 6, 7].map((n) => `order-${n}`));
      expect(all.hasMore).toBe(false);
    });

    it('pages with after=latestId until hasMore is false, seeing every later message once, in the order stored', async () => {
      await writeAll('acc_pages', ['old-1', 'old-2', 'old-3']);
      const first = await api.pull('acc_pages');
      expect(first.messages).toHaveLength(3);
      const ids = await writeAll(
        'acc_pages',
        Array.from({ length: 20 }, (_, i) => i),
      );

      const seen: Msg[] = [];
      const hasMore: boolean[] = [];
      let cursor = first.latestId!;
      for (let round = 0; round < 10; round++) {
        const page = await api.pull('acc_pages', `?after=${cursor}&limit=5`);
        seen.push(...page.messages);
        hasMore.push(page.hasMore);
        expect(page.latestId).toBe(page.messages.at(-1)?.msgId ?? cursor);
        cursor = page.latestId!;
        if (!page.hasMore) break;
      }
      expect(hasMore).toEqual([true, true, true, false]); // exact: the last full page says there is no more
      expect(seen.map((m) => m.msgId)).toEqual(ids);
      expect(seen.map((m) => m.outerBizId)).toEqual(ids.map((_, i) => `order-${i}`));
      const end = await api.pull('acc_pages', `?after=${cursor}&limit=5`);
      expect(end).toEqual({ messages: [], hasMore: false, latestId: cursor, unread: 23 });
    });

    it('delivers a late message (createdAt an hour before the last pull) written after that pull on the next pull', async () => {
      await writeAll('acc_late', [1, 2]);
      const before = await api.pull('acc_late');
      const createdAt = new Date(Date.now() - 3_600_000).toISOString();
      const late = await api.write(message('acc_late', 'late', { createdAt }));
      expect(late.status).toBe(201);
      const next = await api.pull('acc_late', `?after=${before.latestId}`);
      expect(next.messages.map((m) => [m.msgId, m.outerBizId, m.createdAt])).toEqual([[late.body.msgId, 'order-late', createdAt]]);
      expect(BigInt(late.body.msgId)).toBeGreaterThan(BigInt(before.latestId!));
    });

    it('matches a model of the inbox over a seeded random sequence of writes (some late) and partial pulls', async () => {
      const random = prng(20261122);
      const written: string[] = [];
      const seen: string[] = [];
      let cursor: string | undefined;
      let n = 0;
      for (let step = 0; step < 80; step++) {
        if (random() < 0.6) {
          const late = random() < 0.3;
          const createdAt = new Date(Date.now() - (late ? Math.floor(random() * 48) + 1 : 0) * 3_600_000).toISOString();
          const res = await api.write(message('acc_model', n++, { createdAt }));
          expect(res.status).toBe(201);
          written.push(res.body.msgId);
        } else {
          const limit = 1 + Math.floor(random() * 5);
          const page = await api.pull('acc_model', `?limit=${limit}${cursor ? `&after=${cursor}` : ''}`);
          seen.push(...page.messages.map((m) => m.msgId));
          cursor = page.latestId ?? undefined;
        }
      }
      for (let page: Page | undefined; !page || page.hasMore;) {
        page = await api.pull('acc_model', `?limit=7${cursor ? `&after=${cursor}` : ''}`);
        seen.push(...page.messages.map((m) => m.msgId));
        cursor = page.latestId ?? undefined;
      }
      // The first pull (no cursor) starts at the newest page; from there on nothing is missed or repeated.
      expect(written.length).toBeGreaterThan(30);
      expect(seen.length).toBeGreaterThan(20);
      expect(seen).toEqual(written.slice(written.length - seen.length));
      expect(new Set(seen).size).toBe(seen.length);
      expect(seen.at(-1)).toBe(written.at(-1));
    });

    it('GET /messages/{msgId} returns the one message as pulls show it, and 404 for an id the account does not have', async () => {
      const [id] = await writeAll('acc_one', [1], { url: 'https://example.com/orders/1' });
      const res = await api.getOne('acc_one', id);
      expect(res.status).toBe(200);
      expect(res.body).toEqual((await api.pull('acc_one')).messages[0]);
      expectError(await api.getOne('acc_one', String(BigInt(id) + 1n)), 404, 'NOT_FOUND');
    });

    it("refuses another account's token: 404 on GET, read and DELETE of the owner's msgId; never in its pulls; the owner's message untouched", async () => {
      const [intruderId] = await writeAll('acc_intruder', ['mine']);
      await sleep(5); // msgIds are per-account sequences from the clock: keep the owner's distinct from the intruder's
      const ownerIds = await writeAll('acc_owner', ['secret-1', 'secret-2']);
      expect(ownerIds).not.toContain(intruderId);

      for (const id of ownerIds) {
        expectError(await api.getOne('acc_intruder', id), 404, 'NOT_FOUND');
        expectError(await api.markRead('acc_intruder', id), 404, 'NOT_FOUND');
        expectError(await api.remove('acc_intruder', id), 404, 'NOT_FOUND');
      }
      expect((await api.readAll('acc_intruder')).body).toEqual({ marked: 1, unread: 0 });
      for (const query of ['', '?limit=100', `?after=1&limit=100`, `?after=${intruderId}`]) {
        const page = await api.pull('acc_intruder', query);
        expect(page.messages.every((m) => m.msgId === intruderId && m.outerBizId === 'order-mine')).toBe(true);
      }
      const owner = await api.pull('acc_owner');
      expect(owner.messages.map((m) => [m.msgId, m.read])).toEqual(ownerIds.map((id) => [id, false]));
      expect(owner.unread).toBe(2);
    });
  });

  describe('read state', () => {
    it('keeps unread-count in step with mark-one-read (changed true, then false), delete and read-all', async () => {
      const acc = 'acc_read';
      const ids: string[] = [];
      for (let i = 1; i <= 5; i++) ids.push((await api.write(message(acc, i))).body.msgId);
      const [m1, m2, m3, m4, m5] = ids;
      expect(await api.unread(acc)).toBe(5);

      expect((await api.markRead(acc, m2)).body).toEqual({ changed: true, unread: 4 });
      expect((await api.markRead(acc, m2)).body).toEqual({ changed: false, unread: 4 });
      expect((await api.getOne(acc, m2)).body.read).toBe(true);
      expect((await api.pull(acc)).messages.map((m) => m.read)).toEqual([false, true, false, false, false]);
      expect(await api.unread(acc)).toBe(4);

      expect((await api.remove(acc, m3)).body).toEqual({ unread: 3 }); // an unread one
      expect((await api.remove(acc, m2)).body).toEqual({ unread: 3 }); // a read one
      expectError(await api.getOne(acc, m3), 404, 'NOT_FOUND');
      expectError(await api.remove(acc, m3), 404, 'NOT_FOUND');
      expectError(await api.markRead(acc, m2), 404, 'NOT_FOUND');
      const afterDelete = await api.pull(acc);
      expect(afterDelete.messages.map((m) => m.msgId)).toEqual([m1, m4, m5]);
      expect(afterDelete.unread).toBe(3);

      const all = await api.readAll(acc);
      expect(all.status).toBe(200);
      expect(all.body).toEqual({ marked: 3, unread: 0 });
      expect((await api.readAll(acc)).body).toEqual({ marked: 0, unread: 0 });
      expect(await api.unread(acc)).toBe(0);
      expect((await api.pull(acc)).messages.map((m) => m.read)).toEqual([true, true, true]);
      expect((await api.markRead(acc, m4)).body).toEqual({ changed: false, unread: 0 });

      const m6 = (await api.write(message(acc, 6))).body.msgId;
      const last = await api.pull(acc);
      expect(last.messages.map((m) => [m.msgId, m.read])).toEqual([
        [m1, true],
        [m4, true],
        [m5, true],
        [m6, false],
      ]);
      expect(last.unread).toBe(1);
      expect(await api.unread(acc)).toBe(1);
    });

    it('drops the idempotency record with a deleted message: the same (bizType, outerBizId) is then stored anew', async () => {
      const first = await api.write(message('acc_redo', 1));
      expect((await api.remove('acc_redo', first.body.msgId)).status).toBe(200);
      const again = await api.write(message('acc_redo', 1));
      expect(again.status).toBe(201);
      expect(again.body.msgId).not.toBe(first.body.msgId);
      expect((await api.pull('acc_redo')).messages.map((m) => m.msgId)).toEqual([again.body.msgId]);
    });

    describe('with a retention of 1 s', () => {
      let short: TestApp;
      const brief = client(() => short);
      beforeAll(async () => {
        short = await startTestApp(redis.url, { ...ENV, MESSAGES_RETENTION_SECONDS: '1' });
      });
      afterAll(() => short?.close());

      it('counts only what pulls can still show: an expired unread message leaves the unread count and can no longer be marked read', async () => {
        const old = (await brief.write(message('acc_expiry', 'old'))).body.msgId as string;
        await sleep(700);
        const fresh = (await brief.write(message('acc_expiry', 'fresh'))).body.msgId as string;
        // Now the first message is past the retention time and the second is not (for another ~600 ms).
        await sleep(Math.max(0, Math.floor(Number(old) / 1000) + 1050 - Date.now()));
        const page = await brief.pull('acc_expiry');
        const seen = {
          pulled: page.messages.map((m) => m.msgId),
          pullUnread: page.unread,
          unreadCount: await brief.unread('acc_expiry'),
          getExpired: (await brief.getOne('acc_expiry', old)).status,
          markExpiredRead: (await brief.markRead('acc_expiry', old)).status,
        };
        expect(Date.now()).toBeLessThan(Math.floor(Number(fresh) / 1000) + 1000); // the check above ran while `fresh` was live
        expect(seen).toEqual({ pulled: [fresh], pullUnread: 1, unreadCount: 1, getExpired: 404, markExpiredRead: 404 });
      });
    });
  });

  describe('broadcasts', () => {
    // Two instances of their own sharing one key prefix: a broadcast to "all" reaches every
    // account of the prefix, so it must not reach the accounts the other tests count.
    const prefix = randomPrefix();
    let b1: TestApp;
    let b2: TestApp;
    const one = client(() => b1);
    const two = client(() => b2);
    const bodyOf = (title: string, audience: unknown) => ({
      title,
      content: `${title}: 20% back on every payment`,
      url: 'redispay://promotions/double-11',
      audience,
    });
    const withBroadcast = (page: Page, id: string) => page.messages.filter((m) => m.broadcastId === id);

    beforeAll(async () => {
      b1 = await startTestApp(redis.url, { ...ENV, REDIS_KEY_PREFIX: prefix });
      b2 = await startTestApp(redis.url, { ...ENV, REDIS_KEY_PREFIX: prefix });
    });
    afterAll(async () => {
      await b1?.close();
      await b2?.close();
    });

    it('to "all" is one write (written 0, no inbox touched); several accounts, one that never pulled too, see it on their next pull, unread, once', async () => {
      expect((await one.pull('acc_all1')).messages).toEqual([]);
      expect((await one.pull('acc_all2')).messages).toEqual([]);
      const keysBefore = new Set(await raw.keys(`${prefix}:messages:*`));

      const res = await one.broadcast(bodyOf('Double 11', 'all'));
      expect(res.status).toBe(200);
      expect(res.body).toEqual({ broadcastId: expect.stringMatching(MSG_ID), audience: 'all', written: 0, duplicates: 0, duplicate: false });
      const added = (await raw.keys(`${prefix}:messages:*`)).filter((k) => !keysBefore.has(k));
      expect(added.length).toBeGreaterThan(0);
      expect(added.filter((k) => !k.startsWith(`${prefix}:messages:{bc}:`))).toEqual([]);

      for (const acc of ['acc_all1', 'acc_all2', 'acc_all3']) {
        expect(await one.unread(acc)).toBe(1);
        const page = await one.pull(acc);
        expect(page.messages).toEqual([
          {
            msgId: expect.stringMatching(MSG_ID),
            bizType: 'BROADCAST',
            outerBizId: res.body.broadcastId,
            broadcastId: res.body.broadcastId,
            title: 'Double 11',
            content: 'Double 11: 20% back on every payment',
            url: 'redispay://promotions/double-11',
            needPush: false,
            createdAt: expect.any(String),
            storedAt: expect.any(String),
            read: false,
          },
        ]);
        expect(page.unread).toBe(1);
        expect((await one.pull(acc, `?after=${page.latestId}`)).messages).toEqual([]);
        expect((await one.pull(acc)).messages).toHaveLength(1); // taken in once, whatever the number of pulls
      }

      // Like any message: it can be read and deleted, and a deleted broadcast is not taken in again.
      const [m1] = (await one.pull('acc_all1')).messages;
      expect((await one.markRead('acc_all1', m1.msgId)).body).toEqual({ changed: true, unread: 0 });
      const [m2] = (await one.pull('acc_all2')).messages;
      expect((await one.remove('acc_all2', m2.msgId)).body).toEqual({ unread: 0 });
      expect((await one.pull('acc_all2')).messages).toEqual([]);
      expect(await two.unread('acc_all2')).toBe(0);
    });

    it('to "all" reaches pulls on another instance within about a second (its copy of the broadcast list lives 1 s)', async () => {
      const before = await two.pull('acc_all_b2'); // b2 now holds a fresh copy of the broadcast list
      const res = await one.broadcast(bodyOf('Flash sale', 'all'));
      expect(res.status).toBe(200);
      await sleep(1100);
      const page = await two.pull('acc_all_b2', `?after=${before.latestId}`);
      expect(withBroadcast(page, res.body.broadcastId)).toHaveLength(1);
      expect(page.unread).toBe(before.unread + 1);
    });

    it('to "all", twice: both appear in the order they were sent, after what the account already had', async () => {
      const direct = (await one.write(message('acc_all_order', 1))).body.msgId as string;
      const a = (await one.broadcast(bodyOf('First', 'all'))).body.broadcastId;
      const b = (await one.broadcast(bodyOf('Second', 'all'))).body.broadcastId;
      const page = await one.pull('acc_all_order', `?after=${direct}&limit=100`);
      const ids = page.messages.map((m) => m.broadcastId);
      expect(ids.slice(-2)).toEqual([a, b]);
      expect(page.messages.every((m) => BigInt(m.msgId) > BigInt(direct))).toBe(true);
    });

    it('to a list is written into each listed inbox once (repeats count once); accounts not listed never see it', async () => {
      const res = await one.broadcast(bodyOf('For you', ['acc_list1', 'acc_list2', 'acc_list1', 'acc_list3']));
      expect(res.status).toBe(200);
      expect(res.body).toEqual({ broadcastId: expect.stringMatching(UUID), audience: 'accounts', written: 3, duplicates: 0, duplicate: false });
      for (const acc of ['acc_list1', 'acc_list2', 'acc_list3']) {
        const mine = withBroadcast(await two.pull(acc, '?limit=100'), res.body.broadcastId);
        expect(mine).toEqual([expect.objectContaining({ bizType: 'BROADCAST', outerBizId: res.body.broadcastId, title: 'For you', read: false })]);
      }
      expect(withBroadcast(await two.pull('acc_list4', '?limit=100'), res.body.broadcastId)).toEqual([]);
    });

    it('to "all" under a requestId: 20 identical requests at once make one broadcast, every answer names it, each account sees it once', async () => {
      const streamKey = `${prefix}:messages:{bc}:stream`;
      const sent = await raw.zcard(streamKey);
      const body = { ...bodyOf('Retried', 'all'), requestId: 'retried-all-1' };
      const answers = await Promise.all(Array.from({ length: 20 }, () => one.broadcast(body)));
      expect(answers.map((r) => r.status)).toEqual(Array(20).fill(200));
      const ids = new Set(answers.map((r) => r.body.broadcastId));
      expect(ids.size).toBe(1);
      expect(answers.filter((r) => r.body.duplicate === false)).toHaveLength(1);
      expect(await raw.zcard(streamKey)).toBe(sent + 1);
      // Again later, from the other instance: still that one.
      const again = await two.broadcast(body);
      expect(again.body).toEqual({ broadcastId: [...ids][0], audience: 'all', written: 0, duplicates: 0, duplicate: true });
      expect(withBroadcast(await one.pull('acc_all_rq'), [...ids][0])).toHaveLength(1);
      // Another requestId is another broadcast.
      expect((await one.broadcast({ ...body, requestId: 'retried-all-2' })).body.broadcastId).not.toBe([...ids][0]);
    });

    it('to a list under a requestId: a retry writes only where the first did not, and names the same broadcast', async () => {
      const first = await one.broadcast({ ...bodyOf('Retried list', ['acc_rq1', 'acc_rq2']), requestId: 'retried-list-1' });
      expect(first.body).toEqual({ broadcastId: 'retried-list-1', audience: 'accounts', written: 2, duplicates: 0, duplicate: false });
      const retry = await two.broadcast({ ...bodyOf('Retried list', ['acc_rq1', 'acc_rq2']), requestId: 'retried-list-1' });
      expect(retry.body).toEqual({ broadcastId: 'retried-list-1', audience: 'accounts', written: 0, duplicates: 2, duplicate: true });
      // A retry that names one more account (the first attempt failed before it) completes the broadcast.
      const wider = await one.broadcast({ ...bodyOf('Retried list', ['acc_rq1', 'acc_rq2', 'acc_rq3']), requestId: 'retried-list-1' });
      expect(wider.body).toMatchObject({ written: 1, duplicates: 2, duplicate: false });
      for (const acc of ['acc_rq1', 'acc_rq2', 'acc_rq3']) expect(withBroadcast(await two.pull(acc, '?limit=100'), 'retried-list-1')).toHaveLength(1);
    });

    it.each<[string, Record<string, unknown>, string]>([
      [
        'a list of 10,001 accounts',
        bodyOf(
          'Too many',
          Array.from({ length: 10_001 }, (_, i) => i.toString(36)),
        ),
        'audience',
      ],
      ['an account id with a space', bodyOf('Bad id', ['acc_ok', 'bad id']), 'audience'],
      ['"everyone"', bodyOf('Everyone', 'everyone'), 'audience'],
      ['an empty list', bodyOf('Nobody', []), 'audience'],
      ['no audience', { title: 'No audience', content: 'x' }, 'audience'],
      ['a title of 101 characters', bodyOf('x'.repeat(101), 'all'), 'title'],
      ['an unknown field', { ...bodyOf('Extra', 'all'), pinned: true }, 'pinned'],
      ['a requestId with a space', { ...bodyOf('Bad request id', 'all'), requestId: 'two words' }, 'requestId'],
      ['a requestId of 65 characters', { ...bodyOf('Long request id', 'all'), requestId: 'r'.repeat(65) }, 'requestId'],
    ])('refuses %s with 400 naming the field, sending nothing', async (_what, body, field) => {
      const streamKey = `${prefix}:messages:{bc}:stream`;
      const sent = await raw.zcard(streamKey);
      const res = await one.broadcast(body);
      expectError(res, 400, 'VALIDATION_FAILED', field);
      expect(await raw.zcard(streamKey)).toBe(sent);
      for (const acc of ['0', 'acc_ok']) {
        expect((await one.pull(acc, '?limit=100')).messages.filter((m) => m.title === body.title)).toEqual([]);
      }
    });

    it('accepts a list of 10,000 accounts (the documented maximum) with ordinary account ids under the default body limit', async () => {
      const audience = Array.from({ length: 10_000 }, (_, i) => `acc_${100_000 + i}`);
      const res = await one.broadcast(bodyOf('Ten thousand', audience));
      expect({ status: res.status, error: res.body.error, written: res.body.written }).toEqual({ status: 200, error: undefined, written: 10_000 });
    });
  });

  describe('reminders for unfinished actions', () => {
    const FACE_LINK = 'redispay://security/password-recovery/face';

    it('sends exactly one REMINDER_PASSWORD_RECOVERY message with the face-recognition deep link once the delay has passed (a second start keeps one record)', async () => {
      const sent = Date.now();
      const first = await api.startAction({ accountId: 'acc_pa1', bizType: 'PASSWORD_RECOVERY', context: { channel: 'sms' } });
      expect(first.status).toBe(201);
      expect(first.body).toEqual({ actionId: expect.stringMatching(UUID), remindAt: expect.any(Number) });
      expect(first.body.remindAt - sent).toBeGreaterThanOrEqual(REMINDER_DELAY_MS - 50);
      expect(first.body.remindAt - sent).toBeLessThan(REMINDER_DELAY_MS + 2000);
      const again = await api.startAction({ accountId: 'acc_pa1', bizType: 'PASSWORD_RECOVERY' });
      expect(again.status).toBe(201);
      expect(again.body.actionId).not.toBe(first.body.actionId);

      await waitUntil('the reminder', async () => (await api.unread('acc_pa1')) > 0, 5000, 50);
      await sleep(REMINDER_DELAY_MS + 300); // room for a second one, which must not come
      const page = await api.pull('acc_pa1');
      expect(page.messages).toEqual([
        {
          msgId: expect.stringMatching(MSG_ID),
          bizType: 'REMINDER_PASSWORD_RECOVERY',
          outerBizId: again.body.actionId,
          title: 'Still locked out?',
          content: 'Recover your password in seconds with face recognition.',
          url: FACE_LINK,
          needPush: true,
          createdAt: expect.any(String),
          storedAt: expect.any(String),
          read: false,
        },
      ]);
      expect(Date.parse(page.messages[0].storedAt)).toBeGreaterThanOrEqual(again.body.remindAt); // never before it was due
      expect((await api.finishAction('PASSWORD_RECOVERY', 'acc_pa1')).body).toEqual({ wasPending: false });
    });

    it('sends nothing when the action is finished before the delay, even well past it; DELETE answers wasPending true, then false', async () => {
      expect((await api.startAction({ accountId: 'acc_pa2', bizType: 'PASSWORD_RECOVERY' })).status).toBe(201);
      const finish = await api.finishAction('PASSWORD_RECOVERY', 'acc_pa2');
      expect(finish.status).toBe(200);
      expect(finish.body).toEqual({ wasPending: true });
      expect((await api.finishAction('PASSWORD_RECOVERY', 'acc_pa2')).body).toEqual({ wasPending: false });
      await sleep(REMINDER_DELAY_MS * 3);
      expect(await api.pull('acc_pa2')).toEqual({ messages: [], hasMore: false, latestId: null, unread: 0 });
    });

    it('accepts a context of exactly 1 KiB as JSON and reminds as usual', async () => {
      const context = { note: 'x'.repeat(1024 - JSON.stringify({ note: '' }).length) };
      expect(Buffer.byteLength(JSON.stringify(context))).toBe(1024);
      expect((await api.startAction({ accountId: 'acc_pa_kib', bizType: 'PASSWORD_RECOVERY', context })).status).toBe(201);
      await waitUntil('the reminder', async () => (await api.unread('acc_pa_kib')) === 1, 5000, 50);
    });

    const refused: string[] = [];
    it.each<[string, Record<string, unknown>, string]>([
      ['an unknown bizType', { accountId: 'acc_pa_bad1', bizType: 'ACCOUNT_DELETION' }, 'bizType'],
      ['a context over 1 KiB as JSON', { accountId: 'acc_pa_bad2', bizType: 'PASSWORD_RECOVERY', context: { note: 'x'.repeat(1024 - 10) } }, 'context'],
      ['a context that is a list', { accountId: 'acc_pa_bad3', bizType: 'PASSWORD_RECOVERY', context: ['sms'] }, 'context'],
      ['a bad accountId', { accountId: 'acc pa', bizType: 'PASSWORD_RECOVERY' }, 'accountId'],
      ['no bizType', { accountId: 'acc_pa_bad4' }, 'bizType'],
      ['an unknown field', { accountId: 'acc_pa_bad5', bizType: 'PASSWORD_RECOVERY', delayMs: 1 }, 'delayMs'],
    ])('refuses a start with %s: 400 naming the field', async (_what, body, field) => {
      expectError(await api.startAction(body), 400, 'VALIDATION_FAILED', field);
      refused.push(String(body.accountId));
    });

    it.each([
      ['an unknown bizType', 'ACCOUNT_DELETION', 'acc_pa1', 'bizType'],
      ['a bad accountId', 'PASSWORD_RECOVERY', 'acc$pa', 'accountId'],
    ])('refuses a finish with %s: 400 naming the field', async (_what, bizType, accountId, field) => {
      expectError(await api.finishAction(bizType, accountId), 400, 'VALIDATION_FAILED', field);
    });

    it('sends no reminder for any refused start', async () => {
      expect(refused.length).toBeGreaterThan(0);
      await sleep(REMINDER_DELAY_MS + 300);
      for (const acc of refused.filter((a) => a !== 'acc pa')) expect({ acc, unread: await api.unread(acc) }).toEqual({ acc, unread: 0 });
    });
  });

  describe('OpenAPI document', () => {
    it('documents every message-center route with its security scheme, body, responses and schemas with examples', async () => {
      const res = await request(t.server).get('/docs/openapi.json');
      expect(res.status).toBe(200);
      const { paths, components } = res.body;
      const ref = (name: string) => ({ $ref: `#/components/schemas/${name}` });
      const json = (r: { content?: Record<string, { schema: unknown }> } | undefined) => r?.content?.['application/json']?.schema;
      const ops: Array<[string, string, string, string | null, Record<string, string>]> = [
        ['post', '/messages', 'ServiceToken', 'WriteMessageDto', { 201: 'WriteResultDto', 200: 'WriteResultDto' }],
        ['post', '/messages/batch', 'ServiceToken', 'WriteBatchDto', { 200: 'BatchResultDto' }],
        ['post', '/messages/withdraw', 'ServiceToken', 'WithdrawMessageDto', { 200: 'WithdrawResultDto' }],
        ['get', '/messages', 'AppUserJwt', null, { 200: 'PullResultDto' }],
        ['get', '/messages/unread-count', 'AppUserJwt', null, { 200: 'UnreadCountDto' }],
        ['get', '/messages/{msgId}', 'AppUserJwt', null, { 200: 'MessageDto', 404: 'ErrorBodyDto' }],
        ['post', '/messages/{msgId}/read', 'AppUserJwt', null, { 200: 'MarkReadResultDto', 404: 'ErrorBodyDto' }],
        ['post', '/messages/read-all', 'AppUserJwt', null, { 200: 'MarkAllReadResultDto' }],
        ['delete', '/messages/{msgId}', 'AppUserJwt', null, { 200: 'UnreadCountDto', 404: 'ErrorBodyDto' }],
        ['post', '/admin/messages/broadcast', 'AdminKey', 'BroadcastDto', { 200: 'BroadcastResultDto' }],
        ['post', '/pending-actions', 'ServiceToken', 'StartPendingActionDto', { 201: 'PendingActionResultDto' }],
        ['delete', '/pending-actions/{bizType}/{accountId}', 'ServiceToken', null, { 200: 'FinishResultDto' }],
      ];
      for (const [method, path, scheme, body, responses] of ops) {
        const op = paths[path]?.[method];
        expect({ path, method, security: op?.security }).toEqual({ path, method, security: [{ [scheme]: [] }] });
        expect({ path, body: json(op.requestBody) }).toEqual({ path, body: body ? ref(body) : undefined });
        // A route that takes no input (no body, path or query) cannot answer 400, so it documents none.
        const takesInput = !['/messages/unread-count', '/messages/read-all'].includes(path);
        expect({ path, method, documents400: '400' in op.responses }).toEqual({ path, method, documents400: takesInput });
        for (const [code, schema] of Object.entries({
          ...responses,
          ...(takesInput ? { 400: 'ErrorBodyDto' } : {}),
          401: 'ErrorBodyDto',
          403: 'ErrorBodyDto',
          503: 'ErrorBodyDto',
        })) {
          expect({ path, method, code, schema: json(op.responses[code]) }).toEqual({ path, method, code, schema: ref(schema) });
        }
      }

      const params = Object.fromEntries(
        (paths['/messages'].get.parameters as Array<{ name: string; in: string; schema: object }>).map((p) => [`${p.in}:${p.name}`, p.schema]),
      );
      // An optional query parameter starts empty in Swagger UI: no example to act on someone else's data.
      expect(params['query:after']).toMatchObject({ type: 'string', maxLength: 17 });
      expect(params['query:after']).not.toHaveProperty('example');
      expect(params['query:limit']).toMatchObject({ minimum: 1, maximum: 100, default: 20 });

      const s = components.schemas;
      expect(s.PullResultDto.properties.messages).toMatchObject({ type: 'array', items: ref('MessageDto') });
      expect(s.WriteBatchDto.properties.messages).toMatchObject({ type: 'array', items: ref('WriteMessageDto'), minItems: 1, maxItems: 500 });
      expect(s.WriteMessageDto.required.sort()).toEqual(['accountId', 'bizType', 'content', 'outerBizId', 'title']);
      expect(s.WriteMessageDto.properties.content).toMatchObject({ minLength: 1, maxLength: 2000 });
      expect(s.WriteMessageDto.properties.title).toMatchObject({ minLength: 1, maxLength: 100 });
      expect(s.BroadcastDto.properties.audience.oneOf).toEqual([
        { type: 'string', enum: ['all'] },
        { type: 'array', items: { type: 'string' }, maxItems: 10_000 },
      ]);
      expect(s.StartPendingActionDto.properties.bizType.enum).toEqual(expect.arrayContaining(['PASSWORD_RECOVERY']));
      // Every field of what the routes exchange has an example, or a default or enum that shows its values; lists show their items' schema.
      const dtos = [
        'MessageDto',
        'PullResultDto',
        'WriteMessageDto',
        'WriteResultDto',
        'BatchResultDto',
        'BatchItemResultDto',
        'BroadcastDto',
        'BroadcastResultDto',
      ];
      dtos.push('StartPendingActionDto', 'PendingActionResultDto', 'FinishResultDto', 'UnreadCountDto', 'MarkReadResultDto', 'MarkAllReadResultDto');
      for (const name of dtos) {
        const missing = Object.entries(s[name].properties as Record<string, Record<string, unknown>>)
          .filter(([, p]) => p.example === undefined && p.default === undefined && p.enum === undefined && p.items === undefined)
          .map(([field]) => field);
        expect({ schema: name, missing }).toEqual({ schema: name, missing: [] });
      }
    });
  });

  describe('metrics', () => {
    it('counts messages written (by source), duplicates, messages pulled and reminders sent, exactly as the requests did', async () => {
      const scrape = async () => {
        const res = await request(t.server).get('/metrics').set(ADMIN);
        expect(res.status).toBe(200);
        return res.text;
      };
      const read = (text: string) => ({
        writtenApi: sample(text, 'messages_written_total', 'source="api"'),
        writtenBatch: sample(text, 'messages_written_total', 'source="batch"'),
        writtenBroadcast: sample(text, 'messages_written_total', 'source="broadcast"'),
        writtenReminder: sample(text, 'messages_written_total', 'source="reminder"'),
        duplicatesApi: sample(text, 'messages_duplicates_total', 'source="api"'),
        duplicatesBatch: sample(text, 'messages_duplicates_total', 'source="batch"'),
        pulled: sample(text, 'messages_pulled_total'),
        reminders: sample(text, 'messages_reminders_sent_total', 'bizType="PASSWORD_RECOVERY"'),
      });
      const before = read(await scrape());

      const acc = 'acc_metrics';
      for (let i = 1; i <= 3; i++) expect((await api.write(message(acc, i))).status).toBe(201);
      for (let i = 1; i <= 3; i++) expect((await api.write(message(acc, i))).status).toBe(200);
      const batch = await api.batch([message(acc, 4), message(acc, 5), message(acc, 1), message(acc, 'bad', { title: '' })]);
      expect(batch.body).toMatchObject({ created: 2, duplicates: 1, invalid: 1 });
      expect((await api.broadcast({ title: 'Listed', content: 'x', audience: [acc, 'acc_metrics2'] })).body.written).toBe(2);
      const page = await api.pull(acc, '?limit=100');
      expect(page.messages).toHaveLength(6);
      expect((await api.pull(acc, `?after=${page.latestId}`)).messages).toHaveLength(0);
      expect((await api.startAction({ accountId: acc, bizType: 'PASSWORD_RECOVERY' })).status).toBe(201);
      await waitUntil('the reminder', async () => (await api.unread(acc)) === 7, 5000, 50);
      expect((await api.pull(acc, `?after=${page.latestId}`)).messages).toHaveLength(1);

      const after = read(await scrape());
      const delta = Object.fromEntries(Object.entries(after).map(([k, v]) => [k, v - before[k as keyof typeof before]]));
      expect(delta).toEqual({
        writtenApi: 3,
        writtenBatch: 2,
        writtenBroadcast: 2,
        writtenReminder: 1,
        duplicatesApi: 3,
        duplicatesBatch: 1,
        pulled: 7,
        reminders: 1,
      });
    });
  });
});
