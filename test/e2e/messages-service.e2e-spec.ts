import type Redis from 'ioredis';
import request from 'supertest';
import { FEED_SIZE } from '../../src/features/messages/broadcast-feed';
import type { MessageDto } from '../../src/features/messages/dto/pull.dto';
import type { WriteMessageCommand } from '../../src/features/messages/message.commands';
import { broadcastKeys, inboxKeys } from '../../src/features/messages/message.keys';
import { MessagesService } from '../../src/features/messages/messages.service';
import { MessagesStore } from '../../src/features/messages/messages.store';
import { KeyBuilder } from '../../src/platform/redis/key-builder';
import { RedisUnavailableError } from '../../src/platform/redis/redis-unavailable.error';
import { ScriptNotFoundError } from '../../src/platform/scripts/script.errors';
import { rawConnection } from '../harness/redis-process';
import { RedisServerHandle, startRedisServer } from '../harness/redis-server';
import { startTestApp, TestApp, userToken } from '../support/test-app';
import { setTimeout as sleep } from 'node:timers/promises';

/**
 * The message center's service against a real redis-server: idempotent
 * writes under concurrency, the newest page, read state against a recount,
 * retention by count and by time (with what goes with a message), bytes per
 * stored message, broadcasts to everyone and to a list, and a Redis outage.
 * Each group runs on an app of its own (its own key prefix), because a
 * broadcast to "all" reaches every account under a prefix and retention
 * settings are per app. Reminders, the paging model and the cluster have
 * files of their own (messages-*.int-spec.ts).
 */

/** The smallest MESSAGES_MAX_PER_ACCOUNT the config takes: retention by count is tested with it. */
const SMALL_INBOX = 10;
/** Bound on Redis bytes per stored small message beyond its title and content (measured: see the report). */
const MAX_BYTES_BEYOND_CONTENT = 600;

/** One app instance with the service, its keys and a few shorthands. */
function inboxApp(t: TestApp, raw: Redis) {
  const svc = t.app.get(MessagesService);
  const keyBuilder = t.app.get(KeyBuilder);
  const h = {
    t,
    svc,
    store: t.app.get(MessagesStore),
    prefix: keyBuilder.prefix,
    /** inbox, bodies, idem, read, meta */
    keys: (accountId: string) => inboxKeys(keyBuilder, accountId),
    write: (accountId: string, bizType: string, outerBizId: string, extra: Partial<WriteMessageCommand> = {}) =>
      svc.write({ accountId, bizType, outerBizId, title: 'Payment successful', content: `¥12.00 paid, ${outerBizId}`, ...extra }),
    /** Every visible message of the account, oldest first, by pulling with after=latestId from the start. */
    async all(accountId: string): Promise<MessageDto[]> {
      const out: MessageDto[] = [];
      for (let after = '1'; ;) {
        const page = await svc.pull(accountId, after, 100);
        out.push(...page.messages);
        if (!page.hasMore) return out;
        after = page.latestId!;
      }
    },
    /** The unread count by the definition in messages-inbox.lua, recomputed from the raw keys. */
    async rawUnread(accountId: string): Promise<number> {
      const [inbox, , , read, meta] = h.keys(accountId);
      const readUpTo = Number((await raw.hget(meta, 'readUpTo')) ?? 0);
      const readSet = new Set(await raw.smembers(read));
      const ids = await raw.zrangebyscore(inbox, `(${readUpTo}`, '+inf');
      return ids.filter((id) => !readSet.has(id)).length;
    },
    /** Every key stored under this app's prefix. */
    storedKeys: async () => (await raw.keys(`${keyBuilder.prefix}:*`)).sort(),
  };
  return h;
}
type InboxApp = ReturnType<typeof inboxApp>;

describe(MessagesService.name, () => {
  let redis: RedisServerHandle;
  let raw: Redis;
  const apps: TestApp[] = [];
  /** A fresh app (own prefix) on the shared server, closed in afterAll. */
  const newApp = async (env: Record<string, string> = {}) => {
    const t = await startTestApp(redis.url, env);
    apps.push(t);
    return inboxApp(t, raw);
  };

  beforeAll(async () => {
    redis = await startRedisServer();
    raw = rawConnection(redis);
  });

  afterAll(async () => {
    await Promise.all(apps.map((t) => t.close()));
    raw?.disconnect();
    await redis?.destroy();
  });

  describe('writes', () => {
    let a: InboxApp;
    beforeAll(async () => (a = await newApp()));

    it('100 concurrent writes of one (bizType, outerBizId) store exactly one message; all get its msgId, 99 as duplicates', async () => {
      const results = await Promise.all(Array.from({ length: 100 }, () => a.write('race-1', 'PAYMENT_SUCCESS', 'order-1')));
      const ids = new Set(results.map((r) => r.msgId));
      expect(ids.size).toBe(1);
      expect(results.filter((r) => r.duplicate)).toHaveLength(99);

      const [inbox, bodies, idem] = a.keys('race-1');
      expect([await raw.zcard(inbox), await raw.hlen(bodies), await raw.hlen(idem)]).toEqual([1, 1, 1]);
      expect((await a.all('race-1')).map((m) => m.msgId)).toEqual([...ids]);
      expect(await a.svc.unreadCount('race-1')).toBe(1);
      expect(await a.rawUnread('race-1')).toBe(1);
    });

    it("a pull reads the bodies of its page in one HMGET, in the page's order", async () => {
      for (let i = 0; i < 60; i++) await a.write('page-1', 'PAYMENT_SUCCESS', `p-${i}`);
      await a.svc.pull('page-1', undefined, 1); // takes in the broadcasts once, so the pull below is one script
      const calls = async () => {
        const info = await raw.info('commandstats');
        const of = (name: string) => Number(new RegExp(`cmdstat_${name}:calls=(\\d+)`).exec(info)?.[1] ?? 0);
        return { hget: of('hget'), hmget: of('hmget') };
      };
      const before = await calls();
      const page = await a.svc.pull('page-1', undefined, 50);
      const after = await calls();
      expect(page.messages.map((m) => m.outerBizId)).toEqual(Array.from({ length: 50 }, (_, i) => `p-${10 + i}`));
      expect(page.messages.every((m) => m.content === `¥12.00 paid, ${m.outerBizId}`)).toBe(true);
      // One HMGET for the 50 bodies (and one for the meta fields); a little room for the app's own jobs.
      expect(after.hget - before.hget).toBeLessThanOrEqual(10);
      expect(after.hmget - before.hmget).toBeGreaterThanOrEqual(1);
    });

    it('the same outerBizId under another bizType, or for another account, is another message', async () => {
      const first = await a.write('idem-1', 'PAYMENT_SUCCESS', 'o-1');
      const otherType = await a.write('idem-1', 'REFUND_SUCCESS', 'o-1');
      const otherAccount = await a.write('idem-2', 'PAYMENT_SUCCESS', 'o-1');
      const again = await a.write('idem-1', 'PAYMENT_SUCCESS', 'o-1', { title: 'changed', content: 'changed' });
      expect([first.duplicate, otherType.duplicate, otherAccount.duplicate]).toEqual([false, false, false]);
      expect(otherType.msgId).not.toBe(first.msgId);
      expect(again).toEqual({ msgId: first.msgId, duplicate: true });
      // A duplicate changes nothing: the first write's body stays.
      expect(await a.svc.get('idem-1', first.msgId)).toMatchObject({ title: 'Payment successful', bizType: 'PAYMENT_SUCCESS', outerBizId: 'o-1' });
      expect(await a.all('idem-1')).toHaveLength(2);
    });

    it('msgIds are strictly increasing server sequences: a late write (createdAt in the past) comes after what was pulled', async () => {
      const early = await a.write('late-1', 'PAYMENT_SUCCESS', 'now-1');
      const seen = await a.svc.pull('late-1', undefined, 20);
      expect(seen.messages.map((m) => m.msgId)).toEqual([early.msgId]);
      const late = await a.write('late-1', 'PAYMENT_SUCCESS', 'yesterday-1', { createdAt: '2020-01-01T00:00:00.000Z' });
      expect(BigInt(late.msgId)).toBeGreaterThan(BigInt(early.msgId));

      const next = await a.svc.pull('late-1', seen.latestId!, 20);
      expect(next.messages).toEqual([expect.objectContaining({ msgId: late.msgId, outerBizId: 'yesterday-1', createdAt: '2020-01-01T00:00:00.000Z' })]);
      // storedAt is the server's clock (the sequence), not the writer's createdAt.
      expect(Date.parse(next.messages[0].storedAt)).toBeGreaterThan(Date.parse('2024-01-01T00:00:00Z'));
    });

    it("get returns one message with its read flag; another account's msgId is NOT_FOUND", async () => {
      const { msgId } = await a.write('get-1', 'PAYMENT_SUCCESS', 'g-1', { url: 'redispay://orders/g-1' });
      expect(await a.svc.get('get-1', msgId)).toMatchObject({
        msgId,
        bizType: 'PAYMENT_SUCCESS',
        outerBizId: 'g-1',
        url: 'redispay://orders/g-1',
        read: false,
        needPush: false,
      });
      await a.svc.markRead('get-1', msgId);
      expect(await a.svc.get('get-1', msgId)).toMatchObject({ read: true });
      await expect(a.svc.get('get-2', msgId)).rejects.toBeInstanceOf(ScriptNotFoundError);
      await expect(a.svc.markRead('get-2', msgId)).rejects.toBeInstanceOf(ScriptNotFoundError);
      await expect(a.svc.remove('get-2', msgId)).rejects.toBeInstanceOf(ScriptNotFoundError);
      expect(await a.svc.get('get-1', msgId)).toMatchObject({ msgId });
    });

    it('the newest page (no cursor) holds the newest `limit`, oldest first, with hasMore when older ones exist', async () => {
      const ids: string[] = [];
      for (let n = 1; n <= 25; n++) ids.push((await a.write('newest-1', 'PAYMENT_SUCCESS', `n-${n}`)).msgId);

      const page = await a.svc.pull('newest-1', undefined, 10);
      expect(page.messages.map((m) => m.msgId)).toEqual(ids.slice(15));
      expect(page).toMatchObject({ hasMore: true, latestId: ids[24], unread: 25 });
      expect(await a.svc.pull('newest-1', undefined, 24)).toMatchObject({ hasMore: true });
      const whole = await a.svc.pull('newest-1', undefined, 25);
      expect(whole.messages.map((m) => m.msgId)).toEqual(ids);
      expect(whole.hasMore).toBe(false);
      expect((await a.svc.pull('newest-1', undefined, 100)).hasMore).toBe(false);

      // From the newest page on, after=latestId brings only what is newer.
      const newer = (await a.write('newest-1', 'PAYMENT_SUCCESS', 'n-26')).msgId;
      expect((await a.svc.pull('newest-1', page.latestId!, 10)).messages.map((m) => m.msgId)).toEqual([newer]);
      expect(await a.svc.pull('newest-empty', undefined, 10)).toEqual({ messages: [], hasMore: false, latestId: null, unread: 0 });
    });

    it('every key of an account carries the retention TTL, the read set, expiries and withdrawals too', async () => {
      const first = await a.write('ttl-1', 'PAYMENT_SUCCESS', 't-1');
      await a.write('ttl-1', 'PAYMENT_SUCCESS', 't-2', { ttlMs: 3_600_000 });
      await a.svc.withdraw({ accountId: 'ttl-1', bizType: 'PAYMENT_SUCCESS', outerBizId: 't-3' });
      await a.svc.markRead('ttl-1', first.msgId);
      const keys = a.keys('ttl-1');
      const ttls = await Promise.all(keys.map(async (k) => `${k.split(':').pop()} ${(await raw.pttl(k)) > 0 ? 'has a TTL' : 'has none'}`));
      expect(ttls).toEqual([
        'inbox has a TTL',
        'bodies has a TTL',
        'idem has a TTL',
        'read has a TTL',
        'meta has a TTL',
        'expiry has a TTL',
        'withdrawn has a TTL',
      ]);
      for (const k of keys) expect(await raw.pttl(k)).toBeLessThanOrEqual(a.store.retention);
    });

    it('a stored message costs a bounded number of Redis bytes beyond its content (measured with MEMORY USAGE)', async () => {
      const n = 1000;
      const content = '¥128.00 paid to Coffee Corner';
      for (let from = 0; from < n; from += 100) {
        await Promise.all(Array.from({ length: 100 }, (_, i) => a.write('mem-1', 'PAYMENT_SUCCESS', `order-2026-${from + i}`, { content })));
      }
      await a.svc.markRead('mem-1', (await a.svc.pull('mem-1', undefined, 1)).latestId!);
      const keys = a.keys('mem-1');
      expect(await raw.zcard(keys[0])).toBe(n);
      const sizes = await Promise.all(keys.map(async (k) => Number((await raw.call('MEMORY', 'USAGE', k, 'SAMPLES', '0')) ?? 0)));
      const perMessage = sizes.reduce((s, b) => s + b, 0) / n;
      const body = (await raw.hgetall(keys[1]))[(await raw.zrange(keys[0], '0', '0'))[0]];
      const contentBytes = Buffer.byteLength('Payment successful') + Buffer.byteLength(content);
      const beyondContent = perMessage - contentBytes;
      process.stdout.write(
        `messages: ${perMessage.toFixed(0)} B per stored message (${n} in one inbox; keys ${sizes.join('/')} B), ` +
          `${beyondContent.toFixed(0)} B beyond its ${contentBytes} B of title+content, ${(perMessage - Buffer.byteLength(body)).toFixed(0)} B beyond its ${Buffer.byteLength(body)} B JSON body\n`,
      );
      expect(beyondContent).toBeLessThan(MAX_BYTES_BEYOND_CONTENT);
    });
  });

  describe(`read state (MESSAGES_MAX_PER_ACCOUNT=${SMALL_INBOX})`, () => {
    let a: InboxApp;
    beforeAll(async () => (a = await newApp({ MESSAGES_MAX_PER_ACCOUNT: String(SMALL_INBOX) })));

    it('the unread counter matches the model, a recount by pulling, and the raw definition after every change', async () => {
      const acc = 'reader-1';
      const model = new Map<string, boolean>(); // msgId -> read, for the messages the inbox keeps, oldest first
      const unread = () => [...model.values()].filter((read) => !read).length;
      const keep = (msgId: string) => {
        model.set(msgId, false);
        while (model.size > SMALL_INBOX) model.delete(model.keys().next().value!); // the oldest goes
        return msgId;
      };
      const check = async (step: string) => {
        const pulled = await a.all(acc);
        const got = {
          step,
          counter: await a.svc.unreadCount(acc),
          recount: pulled.filter((m) => !m.read).length,
          raw: await a.rawUnread(acc),
          stored: pulled.map((m) => `${m.msgId}:${m.read ? 'read' : 'unread'}`),
        };
        const want = { step, counter: unread(), recount: unread(), raw: unread(), stored: [...model].map(([id, read]) => `${id}:${read ? 'read' : 'unread'}`) };
        expect(got).toEqual(want);
      };
      const write = async (name: string) => keep((await a.write(acc, 'PAYMENT_SUCCESS', name)).msgId);
      const takeInBroadcast = async (title: string) => {
        const { broadcastId } = await a.svc.broadcast({ title, content: 'For everyone', audience: 'all' });
        const page = await a.svc.pull(acc, [...model.keys()].at(-1) ?? '1', 10);
        expect(page.messages.map((m) => m.broadcastId)).toEqual([broadcastId]);
        return keep(page.messages[0].msgId);
      };
      const markRead = async (msgId: string, changed: boolean) => {
        expect(await a.svc.markRead(acc, msgId)).toEqual({ changed, unread: unread() - (changed ? 1 : 0) });
        model.set(msgId, true);
      };
      const markAllRead = async () => {
        expect(await a.svc.markAllRead(acc)).toEqual({ marked: unread(), unread: 0 });
        for (const id of model.keys()) model.set(id, true);
      };

      const ids: string[] = [];
      for (let n = 0; n < 8; n++) ids.push(await write(`w${n}`));
      await check('eight written');
      await markRead(ids[1], true);
      await markRead(ids[1], false);
      await check('one marked read (twice)');

      const b1 = await takeInBroadcast('first broadcast');
      await check('a broadcast taken in counts as unread');
      await markRead(b1, true);
      await check('the broadcast marked read');

      expect(await a.svc.remove(acc, ids[2])).toBe(unread() - 1);
      model.delete(ids[2]);
      expect(await a.svc.remove(acc, ids[1])).toBe(unread());
      model.delete(ids[1]);
      await check('an unread and a read message deleted');

      for (let n = 8; n < 12; n++) await write(`w${n}`); // one too many: the unread ids[0] is trimmed
      expect(model.has(ids[0])).toBe(false);
      await check('an unread message trimmed');

      await markAllRead();
      await check('all marked read');

      const h = await write('h0');
      for (let n = 1; n < 6; n++) await write(`h${n}`); // trims messages read by the read-all mark, and the broadcast read by id
      expect(model.has(b1)).toBe(false);
      await check('read messages trimmed');
      await markRead(h, true);
      await takeInBroadcast('second broadcast');
      await check('a second broadcast, with one read by id above the read-all mark');
      for (let n = 0; n < 4; n++) await write(`j${n}`);
      await check('more trimmed, read and unread');

      await markAllRead();
      await check('all marked read again');
      // mark-all-read empties the per-message read set: the mark covers them.
      expect(await raw.scard(a.keys(acc)[3])).toBe(0);
    });

    it('mark-all-read takes in and marks a broadcast not yet pulled', async () => {
      const acc = 'reader-2';
      await a.write(acc, 'PAYMENT_SUCCESS', 'x');
      const before = (await a.svc.pull(acc, undefined, 10)).unread; // takes in the earlier broadcasts too
      const { broadcastId } = await a.svc.broadcast({ title: 'Unseen', content: 'Not pulled yet', audience: 'all' });
      expect(await a.svc.markAllRead(acc)).toEqual({ marked: before + 1, unread: 0 });
      const all = await a.all(acc);
      expect(all.filter((m) => m.broadcastId === broadcastId)).toEqual([expect.objectContaining({ read: true })]);
      expect(all.every((m) => m.read)).toBe(true);
      expect(await a.svc.unreadCount(acc)).toBe(0);
    });
  });

  describe(`retention by count (MESSAGES_MAX_PER_ACCOUNT=${SMALL_INBOX})`, () => {
    let a: InboxApp;
    beforeAll(async () => (a = await newApp({ MESSAGES_MAX_PER_ACCOUNT: String(SMALL_INBOX) })));

    it(`keeps the newest ${SMALL_INBOX}; a trimmed message takes its body, idempotency record and read state with it`, async () => {
      const acc = 'count-1';
      const ids: string[] = [];
      for (let n = 0; n < SMALL_INBOX + 3; n++) ids.push((await a.write(acc, 'PAYMENT_SUCCESS', `c-${n}`)).msgId);
      await a.svc.markRead(acc, ids[4]);
      const extra = (await a.write(acc, 'PAYMENT_SUCCESS', 'c-x')).msgId; // trims ids[3]; ids[4] (read) is next
      const extra2 = (await a.write(acc, 'PAYMENT_SUCCESS', 'c-y')).msgId; // trims the read ids[4]
      const kept = [...ids.slice(5), extra, extra2];
      expect(kept).toHaveLength(SMALL_INBOX);

      expect((await a.all(acc)).map((m) => m.msgId)).toEqual(kept);
      expect((await a.svc.pull(acc, undefined, 100)).messages.map((m) => m.msgId)).toEqual(kept);
      const [inbox, bodies, idem, read] = a.keys(acc);
      expect(await raw.zrange(inbox, '0', '-1')).toEqual(kept);
      expect((await raw.hkeys(bodies)).sort()).toEqual([...kept].sort());
      expect((await raw.hvals(idem)).sort()).toEqual([...kept].sort());
      expect(await raw.scard(read)).toBe(0);
      expect(await a.svc.unreadCount(acc)).toBe(SMALL_INBOX);
      await expect(a.svc.get(acc, ids[0])).rejects.toBeInstanceOf(ScriptNotFoundError);
    });

    it("writing a trimmed message's (bizType, outerBizId) again stores a new message; a kept one is still a duplicate", async () => {
      const acc = 'count-2';
      const ids: string[] = [];
      for (let n = 1; n <= SMALL_INBOX + 1; n++) ids.push((await a.write(acc, 'PAYMENT_SUCCESS', `d-${n}`)).msgId);
      expect(await a.write(acc, 'PAYMENT_SUCCESS', `d-${SMALL_INBOX + 1}`)).toEqual({ msgId: ids.at(-1), duplicate: true });
      const again = await a.write(acc, 'PAYMENT_SUCCESS', 'd-1');
      expect(again.duplicate).toBe(false);
      expect(BigInt(again.msgId)).toBeGreaterThan(BigInt(ids.at(-1)!));
      const kept = Array.from({ length: SMALL_INBOX - 1 }, (_, i) => `d-${i + 3}`);
      expect((await a.all(acc)).map((m) => m.outerBizId)).toEqual([...kept, 'd-1']);
    });

    it('a deleted message can be written again as a new message', async () => {
      const acc = 'count-3';
      const first = await a.write(acc, 'PAYMENT_SUCCESS', 'del-1');
      expect(await a.svc.remove(acc, first.msgId)).toBe(0);
      await expect(a.svc.remove(acc, first.msgId)).rejects.toBeInstanceOf(ScriptNotFoundError);
      const again = await a.write(acc, 'PAYMENT_SUCCESS', 'del-1');
      expect(again.duplicate).toBe(false);
      expect(again.msgId).not.toBe(first.msgId);
      expect(await raw.hlen(a.keys(acc)[2])).toBe(1);
    });
  });

  describe('retention by time (MESSAGES_RETENTION_SECONDS=2)', () => {
    const RETENTION_MS = 2000;
    let a: InboxApp;
    /** Messages written at t0, expired by the time the tests run. */
    const old: Record<string, string> = {};
    /** Written at t0 + 1 s: kept through the tests, and keeping the account's keys alive. */
    const fresh: Record<string, string> = {};
    let t0: number;

    beforeAll(async () => {
      a = await newApp({ MESSAGES_RETENTION_SECONDS: String(RETENTION_MS / 1000) });
      t0 = Date.now();
      for (const acc of ['time-pull', 'time-idem', 'time-unread', 'time-gone']) old[acc] = (await a.write(acc, 'PAYMENT_SUCCESS', `old-${acc}`)).msgId;
      await a.write('time-unread', 'PAYMENT_SUCCESS', 'old-2');
      // The account's expiry and withdrawal keys must go too.
      await a.write('time-gone', 'PAYMENT_SUCCESS', 'old-expiring', { ttlMs: 3_600_000 });
      await a.svc.withdraw({ accountId: 'time-gone', bizType: 'PAYMENT_SUCCESS', outerBizId: 'old-withdrawn' });
      await sleep(t0 + 1000 - Date.now());
      for (const acc of ['time-pull', 'time-idem', 'time-unread']) fresh[acc] = (await a.write(acc, 'PAYMENT_SUCCESS', `fresh-${acc}`)).msgId;
      // The old ones are past the retention time, the fresh ones have at least 0.7 s left.
      await sleep(t0 + RETENTION_MS + 300 - Date.now());
    });

    /** The tests below assume the fresh messages have not expired yet. */
    afterEach(() => expect(Date.now() - t0).toBeLessThan(1000 + RETENTION_MS - 50));

    it('an expired message counts as gone: not got, read, deleted or pulled; its body and idempotency record go with it', async () => {
      const acc = 'time-pull';
      await expect(a.svc.get(acc, old[acc])).rejects.toBeInstanceOf(ScriptNotFoundError);
      await expect(a.svc.markRead(acc, old[acc])).rejects.toBeInstanceOf(ScriptNotFoundError);
      await expect(a.svc.remove(acc, old[acc])).rejects.toBeInstanceOf(ScriptNotFoundError);
      expect((await a.svc.pull(acc, undefined, 10)).messages.map((m) => m.msgId)).toEqual([fresh[acc]]);
      expect((await a.svc.pull(acc, '1', 10)).messages.map((m) => m.msgId)).toEqual([fresh[acc]]);
      // A cursor on the expired message still works.
      expect((await a.svc.pull(acc, old[acc], 10)).messages.map((m) => m.msgId)).toEqual([fresh[acc]]);

      await a.write(acc, 'PAYMENT_SUCCESS', 'another');
      const [inbox, bodies, idem] = a.keys(acc);
      expect(await raw.zscore(inbox, old[acc])).toBeNull();
      expect(await raw.hexists(bodies, old[acc])).toBe(0);
      expect(await raw.hexists(idem, `PAYMENT_SUCCESS|old-${acc}`)).toBe(0);
      expect(await a.svc.unreadCount(acc)).toBe(2);
    });

    it("writing an expired message's (bizType, outerBizId) again stores a new message, with nothing written or pulled in between", async () => {
      const acc = 'time-idem';
      const again = await a.write(acc, 'PAYMENT_SUCCESS', `old-${acc}`);
      expect(again.duplicate).toBe(false);
      expect(again.msgId).not.toBe(old[acc]);
      expect((await a.all(acc)).map((m) => m.outerBizId)).toEqual([`fresh-${acc}`, `old-${acc}`]);
    });

    it('the unread count leaves out expired messages, with nothing written since they expired', async () => {
      const acc = 'time-unread';
      expect(await a.svc.unreadCount(acc)).toBe(1);
      const page = await a.svc.pull(acc, undefined, 10);
      expect(page.messages.map((m) => m.msgId)).toEqual([fresh[acc]]);
      expect(page.unread).toBe(1);
      expect(await a.rawUnread(acc)).toBe(1);
    });

    it('an account with nothing written for the retention time has no keys left', async () => {
      const found = await Promise.all(a.keys('time-gone').map((k) => raw.exists(k)));
      expect(found).toEqual([0, 0, 0, 0, 0, 0, 0]);
      expect(await a.svc.pull('time-gone', old['time-gone'], 10)).toMatchObject({ messages: [], hasMore: false, unread: 0 });
    });
  });

  describe('broadcast to all', () => {
    let a: InboxApp;
    beforeAll(async () => (a = await newApp()));
    const broadcast = async (title: string) =>
      (await a.svc.broadcast({ title, content: 'Pay with your balance today and get 20% back.', audience: 'all' })).broadcastId;
    const copiesOf = async (acc: string, broadcastId: string) => (await a.all(acc)).filter((m) => m.broadcastId === broadcastId);

    it('is one write: only the broadcast keys appear, no account keys until an account pulls', async () => {
      await a.write('bc-writer', 'PAYMENT_SUCCESS', 'before');
      const before = await a.storedKeys();
      const result = await a.svc.broadcast({ title: 'Double 11', content: '20% back', audience: 'all' });
      expect(result).toEqual({ broadcastId: expect.stringMatching(/^[1-9]\d+$/), audience: 'all', written: 0, duplicates: 0, duplicate: false });
      const after = await a.storedKeys();
      expect(after.filter((k) => !before.includes(k))).toEqual(broadcastKeys(a.t.app.get(KeyBuilder)).sort());
      await broadcast('second');
      expect(await a.storedKeys()).toEqual(after);

      expect(await copiesOf('bc-writer', result.broadcastId)).toHaveLength(1);
      expect((await a.storedKeys()).filter((k) => !after.includes(k))).toEqual([]);
    });

    it('50 accounts each take it in exactly once on their next pull, with three concurrent pulls per account', async () => {
      const accounts = Array.from({ length: 50 }, (_, i) => `bc-many-${i}`);
      await Promise.all(accounts.map((acc) => a.svc.pull(acc, undefined, 1))); // each has pulled before
      const id = await broadcast('for the fifty');
      const pulls = await Promise.all(accounts.flatMap((acc) => [1, 2, 3].map(async () => ({ acc, page: await a.svc.pull(acc, undefined, 20) }))));
      for (const { acc, page } of pulls) expect(`${acc}: ${page.messages.filter((m) => m.broadcastId === id).length}`).toBe(`${acc}: 1`);
      const copies = await Promise.all(accounts.map(async (acc) => `${acc}: ${(await copiesOf(acc, id)).length}`));
      expect(copies).toEqual(accounts.map((acc) => `${acc}: 1`));
    });

    it('comes after the cursor in server order, counts as unread, can be marked read and deleted, and is not taken in again', async () => {
      const acc = 'bc-order';
      const m1 = (await a.write(acc, 'PAYMENT_SUCCESS', 'm1')).msgId;
      const cursor = (await a.svc.pull(acc, m1, 10)).latestId!;
      const unreadBefore = await a.svc.unreadCount(acc);
      const m2 = (await a.write(acc, 'PAYMENT_SUCCESS', 'm2')).msgId;
      const [b1, b2] = [await broadcast('one'), await broadcast('two')];

      const page = await a.svc.pull(acc, cursor, 10);
      expect(page.messages.map((m) => m.broadcastId ?? m.msgId)).toEqual([m2, b1, b2]);
      const ids = page.messages.map((m) => BigInt(m.msgId));
      expect(ids).toEqual([...ids].sort((x, y) => (x < y ? -1 : 1)));
      expect(page.messages[1]).toMatchObject({ bizType: 'BROADCAST', outerBizId: b1, title: 'one', read: false });
      expect(page.unread).toBe(unreadBefore + 3);
      const m3 = (await a.write(acc, 'PAYMENT_SUCCESS', 'm3')).msgId;
      expect((await a.svc.pull(acc, page.latestId!, 10)).messages.map((m) => m.msgId)).toEqual([m3]);

      const [c1, c2] = [page.messages[1].msgId, page.messages[2].msgId];
      expect(await a.svc.markRead(acc, c1)).toEqual({ changed: true, unread: unreadBefore + 3 });
      expect(await a.svc.get(acc, c1)).toMatchObject({ broadcastId: b1, read: true });
      expect(await a.svc.remove(acc, c2)).toBe(unreadBefore + 2);
      expect(await copiesOf(acc, b2)).toEqual([]);
      expect(await copiesOf(acc, b1)).toHaveLength(1);
      expect(await a.svc.unreadCount(acc)).toBe(unreadBefore + 2);
    });

    it('an account that never pulled gets the recent broadcasts, oldest first', async () => {
      const ids = [await broadcast('recent-1'), await broadcast('recent-2')];
      const page = await a.svc.pull('bc-newcomer', undefined, 100);
      const got = page.messages.map((m) => m.broadcastId);
      expect(got.slice(-2)).toEqual(ids);
      expect(new Set(got).size).toBe(got.length);
      expect(page.messages.every((m) => m.bizType === 'BROADCAST')).toBe(true);
      expect(page.unread).toBe(got.length);
    });

    it(`an account away for more than ${FEED_SIZE} broadcasts gets every one it missed, read past the feed`, async () => {
      const acc = 'bc-away';
      const cursor = (await a.svc.pull(acc, undefined, 100)).latestId!;
      const missed: string[] = [];
      for (let n = 0; n < FEED_SIZE + 50; n++) missed.push(await broadcast(`while away ${n}`));
      const reads = jest.spyOn(a.store, 'recentBroadcasts');
      try {
        const got = (await a.svc.pull(acc, cursor, 100)).messages;
        const rest = await a.svc.pull(acc, got.at(-1)!.msgId, 100);
        expect([...got, ...rest.messages].map((m) => m.broadcastId)).toEqual(missed);
        expect(rest.hasMore).toBe(false);
        // The feed (newest 100) did not reach back far enough: the missed ones were read after the account's mark.
        expect(reads.mock.calls.some(([after]) => typeof after === 'number')).toBe(true);
      } finally {
        reads.mockRestore();
      }
    });

    it(`an account that never pulled gets the newest ${FEED_SIZE}, not the whole history`, async () => {
      const page = await a.svc.pull('bc-late-newcomer', undefined, 100);
      expect(page.messages).toHaveLength(FEED_SIZE);
      expect(page.messages.at(-1)!.title).toBe(`while away ${FEED_SIZE + 49}`);
      expect(page.hasMore).toBe(false);
    });
  });

  describe('broadcast to all with a 1 s retention', () => {
    let a: InboxApp;
    let broadcastId: string;
    beforeAll(async () => {
      a = await newApp({ MESSAGES_RETENTION_SECONDS: '1' });
      ({ broadcastId } = await a.svc.broadcast({ title: 'Short-lived', content: 'Gone in a second', audience: 'all' }));
      expect((await a.svc.pull('bc-exp-seen', undefined, 10)).messages.map((m) => m.broadcastId)).toEqual([broadcastId]);
      await sleep(1300); // the broadcast and the account's keys are past the retention time
    });

    it('an account whose inbox expired does not take in the same broadcast again', async () => {
      expect(await raw.exists(a.keys('bc-exp-seen')[0])).toBe(0);
      const page = await a.svc.pull('bc-exp-seen', undefined, 10);
      expect(page.messages.map((m) => m.broadcastId)).toEqual([]);
      expect(page.unread).toBe(0);
    });

    it('an account that never pulled does not get a broadcast past the retention time', async () => {
      const page = await a.svc.pull('bc-exp-newcomer', undefined, 10);
      expect(page.messages.map((m) => m.broadcastId)).toEqual([]);
      expect(page.unread).toBe(0);
    });
  });

  describe('broadcast to all, the first ever', () => {
    it(`an account that pulled before any broadcast existed, then missed more than ${FEED_SIZE}, gets every one`, async () => {
      const a = await newApp();
      expect(await a.svc.pull('bc-first-away', undefined, 10)).toMatchObject({ messages: [], latestId: null });
      const sent: string[] = [];
      for (let n = 0; n < FEED_SIZE + 20; n++) sent.push((await a.svc.broadcast({ title: `launch ${n}`, content: 'x', audience: 'all' })).broadcastId);
      const all = (await a.all('bc-first-away')).map((m) => m.broadcastId);
      expect(all).toHaveLength(sent.length);
      expect(all).toEqual(sent);
    });
  });

  describe(`broadcast with a small inbox (MESSAGES_MAX_PER_ACCOUNT=${SMALL_INBOX})`, () => {
    it(`an account catching up on more than ${FEED_SIZE} broadcasts still keeps only its newest ${SMALL_INBOX}`, async () => {
      const a = await newApp({ MESSAGES_MAX_PER_ACCOUNT: String(SMALL_INBOX) });
      await a.svc.broadcast({ title: 'first', content: 'x', audience: 'all' });
      await a.svc.pull('small-away', undefined, 10);
      const n = FEED_SIZE + 50;
      for (let i = 0; i < n; i++) await a.svc.broadcast({ title: `b${i}`, content: 'x', audience: 'all' });
      const all = await a.all('small-away');
      expect(all.map((m) => m.title)).toEqual(Array.from({ length: SMALL_INBOX }, (_, i) => `b${n - SMALL_INBOX + i}`));
      expect(await raw.zcard(a.keys('small-away')[0])).toBe(SMALL_INBOX);
      expect(await a.svc.unreadCount('small-away')).toBe(SMALL_INBOX);
    });
  });

  describe('broadcast to a list', () => {
    let a: InboxApp;
    beforeAll(async () => (a = await newApp()));

    it('each listed account gets it exactly once (a repeated id too); unlisted accounts get nothing', async () => {
      const r = await a.svc.broadcast({
        title: 'For you',
        content: 'Listed',
        url: 'redispay://promotions/x',
        audience: ['list-1', 'list-2', 'list-1', 'list-3'],
      });
      expect(r).toEqual({ broadcastId: expect.any(String), audience: 'accounts', written: 3, duplicates: 0, duplicate: false });
      for (const acc of ['list-1', 'list-2', 'list-3']) {
        expect(await a.all(acc)).toEqual([
          expect.objectContaining({
            bizType: 'BROADCAST',
            outerBizId: r.broadcastId,
            broadcastId: r.broadcastId,
            title: 'For you',
            url: 'redispay://promotions/x',
            read: false,
          }),
        ]);
        expect(await a.svc.unreadCount(acc)).toBe(1);
      }
      expect(await raw.keys(`${a.prefix}:messages:{a:list-unlisted}:*`)).toEqual([]);
      expect(await a.all('list-unlisted')).toEqual([]);
    });

    it('each call is a broadcast of its own: the same list again writes a second message', async () => {
      const first = await a.svc.broadcast({ title: 'Again', content: 'Twice', audience: ['list-again'] });
      const second = await a.svc.broadcast({ title: 'Again', content: 'Twice', audience: ['list-again'] });
      expect(second.broadcastId).not.toBe(first.broadcastId);
      expect(second).toMatchObject({ written: 1, duplicates: 0 });
      expect((await a.all('list-again')).map((m) => m.broadcastId)).toEqual([first.broadcastId, second.broadcastId]);
    });
  });

  describe('Redis unavailable', () => {
    it('write, pull and unread-count reject promptly with RedisUnavailableError while Redis is down', async () => {
      const own = await startRedisServer();
      const t = await startTestApp(own.url);
      const svc = t.app.get(MessagesService);
      try {
        await svc.write({ accountId: 'down-1', bizType: 'PAYMENT_SUCCESS', outerBizId: 'up', title: 't', content: 'c' });
        await own.stop();
        /** How a call ends: the error, and whether it came within 1.5 s (the command timeout is 500 ms: never a hang). */
        const ending = async (call: () => Promise<unknown>) => {
          const started = performance.now();
          const err = await call().then(
            () => 'resolved',
            (e: unknown) => (e instanceof RedisUnavailableError ? 'RedisUnavailableError' : String(e)),
          );
          return `${err} ${performance.now() - started < 1_500 ? 'promptly' : 'too late'}`;
        };
        expect({
          write: await ending(() => svc.write({ accountId: 'down-1', bizType: 'PAYMENT_SUCCESS', outerBizId: 'down', title: 't', content: 'c' })),
          pull: await ending(() => svc.pull('down-1', '1', 20)),
          unreadCount: await ending(() => svc.unreadCount('down-1')),
        }).toEqual({ write: 'RedisUnavailableError promptly', pull: 'RedisUnavailableError promptly', unreadCount: 'RedisUnavailableError promptly' });
        // Over HTTP that is a 503 with Retry-After.
        const res = await request(t.server)
          .get('/messages')
          .set('authorization', `Bearer ${userToken('down-1')}`);
        expect(res.status).toBe(503);
        expect(Number(res.headers['retry-after'])).toBeGreaterThanOrEqual(1);
      } finally {
        await own.start();
        await t.close();
        await own.destroy();
      }
    });
  });
});
