import type Redis from 'ioredis';
import { InvalidArgumentError } from '../../src/platform/core/domain.error';
import { MAX_MESSAGE_EXPIRES_AT, MAX_MESSAGE_TTL_MS } from '../../src/features/messages/message.commands';
import { inboxKeys } from '../../src/features/messages/message.keys';
import { MessagesModule } from '../../src/features/messages/messages.module';
import { MessagesService } from '../../src/features/messages/messages.service';
import { PendingActionsService } from '../../src/features/messages/pending-actions.service';
import { KeyBuilder } from '../../src/platform/redis/key-builder';
import { RedisService } from '../../src/platform/redis/redis.service';
import { ScriptNotFoundError } from '../../src/platform/scripts/script.errors';
import { rawConnection, waitUntil } from '../harness/redis-process';
import { RedisServerHandle, startRedisServer } from '../harness/redis-server';
import { startTestApp, TestApp } from '../support/test-app';

/**
 * The message center's in-process API for the modules that write messages:
 * per-message expiry, withdraw by (bizType, outerBizId), and pending actions
 * that reach the inbox only through the store's scripts. Against a real
 * redis-server; times come from the server's clock (TIME), as in the scripts.
 */

const SMALL_INBOX = 10;

describe(`${MessagesService.name}: expiry and withdraw`, () => {
  let redis: RedisServerHandle;
  let raw: Redis;
  let t: TestApp;
  let small: TestApp;
  let svc: MessagesService;

  beforeAll(async () => {
    redis = await startRedisServer();
    raw = rawConnection(redis);
    t = await startTestApp(redis.url);
    small = await startTestApp(redis.url, { MESSAGES_MAX_PER_ACCOUNT: String(SMALL_INBOX) });
    svc = t.app.get(MessagesService);
  });

  afterAll(async () => {
    await t?.close();
    await small?.close();
    raw?.disconnect();
    await redis?.destroy();
  });

  /** The Redis server's clock in ms, as the scripts read it. */
  const redisNow = async () => {
    const [s, us] = await raw.time();
    return Number(s) * 1000 + Math.floor(Number(us) / 1000);
  };
  const keysOf = (app: TestApp, accountId: string) => {
    const [inbox, bodies, idem, read, meta, expiry, withdrawn] = inboxKeys(app.app.get(KeyBuilder), accountId);
    return { inbox, bodies, idem, read, meta, expiry, withdrawn };
  };
  const write = (accountId: string, outerBizId: string, extra: { ttlMs?: number; expiresAt?: number } = {}, s = svc) =>
    s.write({ accountId, bizType: 'ORDER_CLOSE_REMINDER', outerBizId, title: 'Your order closes soon', content: `Pay order ${outerBizId}`, ...extra });
  const withdraw = (accountId: string, outerBizId: string, s = svc) => s.withdraw({ accountId, bizType: 'ORDER_CLOSE_REMINDER', outerBizId });
  const visible = async (accountId: string, s = svc) => (await s.pull(accountId, '1', 100)).messages.map((m) => m.outerBizId);
  /** The unread count by its definition (messages above the read-all mark not in the read set), from the raw keys. */
  const rawUnread = async (accountId: string, app = t) => {
    const k = keysOf(app, accountId);
    const readUpTo = Number((await raw.hget(k.meta, 'readUpTo')) ?? 0);
    const readSet = new Set(await raw.smembers(k.read));
    return (await raw.zrangebyscore(k.inbox, `(${readUpTo}`, '+inf')).filter((id) => !readSet.has(id)).length;
  };
  const expectFieldError = async (p: Promise<unknown>, field: string) => {
    const err: unknown = await p.then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(err).toBeInstanceOf(InvalidArgumentError);
    expect(err).toMatchObject({ code: 'VALIDATION_FAILED', details: [{ field }] });
  };

  describe('expiry', () => {
    it('a message past its ttlMs is not pulled, counted, got or marked, and its storage is reclaimed', async () => {
      const acc = 'exp-1';
      const kept = await write(acc, 'kept');
      const unreadOne = await write(acc, 'unread-expiring', { ttlMs: 400 });
      const readOne = await write(acc, 'read-expiring', { ttlMs: 400 });
      const expiresAt = (await redisNow()) + 400; // not before either message's expiry
      await svc.markRead(acc, readOne.msgId);
      expect(await visible(acc)).toEqual(['kept', 'unread-expiring', 'read-expiring']);
      expect(await svc.unreadCount(acc)).toBe(2);

      await waitUntil('the Redis clock to pass expiresAt', async () => (await redisNow()) > expiresAt, 2_000, 20);

      // get reads without changing anything: it already answers NOT_FOUND.
      await expect(svc.get(acc, unreadOne.msgId)).rejects.toBeInstanceOf(ScriptNotFoundError);
      expect(await svc.unreadCount(acc)).toBe(1);
      expect(await rawUnread(acc)).toBe(1);
      expect(await visible(acc)).toEqual(['kept']);
      expect((await svc.pull(acc, undefined, 10)).messages.map((m) => m.msgId)).toEqual([kept.msgId]);
      await expect(svc.markRead(acc, readOne.msgId)).rejects.toBeInstanceOf(ScriptNotFoundError);
      await expect(svc.remove(acc, unreadOne.msgId)).rejects.toBeInstanceOf(ScriptNotFoundError);

      const k = keysOf(t, acc);
      expect(await raw.hkeys(k.bodies)).toEqual([kept.msgId]);
      expect(await raw.zrange(k.inbox, '0', '-1')).toEqual([kept.msgId]);
      expect(await raw.hkeys(k.idem)).toEqual(['ORDER_CLOSE_REMINDER|kept']);
      expect(await raw.exists(k.expiry, k.read)).toBe(0);
    });

    it('mark-all-read after an expiry counts only what could still be seen', async () => {
      const acc = 'exp-all-read';
      await write(acc, 'a');
      await write(acc, 'b', { ttlMs: 100 });
      const expiresAt = (await redisNow()) + 100;
      await waitUntil('the Redis clock to pass expiresAt', async () => (await redisNow()) > expiresAt, 2_000, 20);
      expect(await svc.markAllRead(acc)).toEqual({ marked: 1, unread: 0 });
    });

    it('a retry before the expiry is a duplicate of the original', async () => {
      const acc = 'exp-dup';
      const before = await redisNow();
      const first = await write(acc, 'o-1', { ttlMs: 60_000 });
      const after = await redisNow();
      expect(await write(acc, 'o-1', { ttlMs: 1_000 })).toEqual({ msgId: first.msgId, duplicate: true });
      // The original's expiry stands: its write time (on the Redis clock) plus its ttlMs.
      const expiresAt = Number(await raw.zscore(keysOf(t, acc).expiry, first.msgId));
      expect(expiresAt).toBeGreaterThanOrEqual(before + 60_000);
      expect(expiresAt).toBeLessThanOrEqual(after + 60_000);
    });

    it('a ttlMs that is not an integer from 1 to 90 days is a 400 naming ttlMs, in process too, and stores nothing', async () => {
      const acc = 'exp-bad';
      for (const ttlMs of [0, -1, 1000.5, Number.NaN, Number.POSITIVE_INFINITY, MAX_MESSAGE_TTL_MS + 1]) {
        await expectFieldError(write(acc, `bad-${ttlMs}`, { ttlMs }), 'ttlMs');
      }
      expect(await raw.exists(...Object.values(keysOf(t, acc)))).toBe(0);
      // The bounds themselves are accepted.
      expect(await write(acc, 'edge', { ttlMs: MAX_MESSAGE_TTL_MS })).toMatchObject({ duplicate: false });
      expect(await write(acc, 'shortest', { ttlMs: 1 })).toMatchObject({ duplicate: false });
    });
  });

  describe('absolute expiry (expiresAt)', () => {
    const waitPast = (at: number) => waitUntil('the Redis clock to pass expiresAt', async () => (await redisNow()) > at, 3_000, 20);

    it('a message shows in pull, get and unread count until its expiresAt, and in none of them after', async () => {
      const acc = 'abs-1';
      const kept = await write(acc, 'kept');
      const expiresAt = (await redisNow()) + 500;
      const expiring = await write(acc, 'closes', { expiresAt });
      expect(expiring).toEqual({ msgId: expect.any(String), duplicate: false });
      expect(Number(await raw.zscore(keysOf(t, acc).expiry, expiring.msgId))).toBe(expiresAt);

      expect(await visible(acc)).toEqual(['kept', 'closes']);
      expect(await svc.get(acc, expiring.msgId)).toMatchObject({ msgId: expiring.msgId, outerBizId: 'closes' });
      expect(await svc.unreadCount(acc)).toBe(2);

      await waitPast(expiresAt);

      await expect(svc.get(acc, expiring.msgId)).rejects.toBeInstanceOf(ScriptNotFoundError);
      expect(await svc.unreadCount(acc)).toBe(1);
      expect(await rawUnread(acc)).toBe(1);
      expect(await visible(acc)).toEqual(['kept']);
      expect((await svc.pull(acc, undefined, 10)).messages.map((m) => m.msgId)).toEqual([kept.msgId]);
      const k = keysOf(t, acc);
      expect(await raw.hkeys(k.bodies)).toEqual([kept.msgId]);
      expect(await raw.exists(k.expiry)).toBe(0);
    });

    it('with ttlMs too, the earlier expiry wins, whichever of the two it is', async () => {
      const acc = 'abs-both';
      // expiresAt earlier than ttlMs: the stored expiry is expiresAt, and the message goes then.
      const absAt = (await redisNow()) + 400;
      const absFirst = await write(acc, 'abs-first', { ttlMs: 60_000, expiresAt: absAt });
      expect(Number(await raw.zscore(keysOf(t, acc).expiry, absFirst.msgId))).toBe(absAt);

      // ttlMs earlier than expiresAt: the stored expiry is the write time (Redis clock) plus ttlMs.
      const before = await redisNow();
      const ttlFirst = await write(acc, 'ttl-first', { ttlMs: 400, expiresAt: before + 60_000 });
      const after = await redisNow();
      const ttlAt = Number(await raw.zscore(keysOf(t, acc).expiry, ttlFirst.msgId));
      expect(ttlAt).toBeGreaterThanOrEqual(before + 400);
      expect(ttlAt).toBeLessThanOrEqual(after + 400);

      const kept = await write(acc, 'kept', { ttlMs: 60_000, expiresAt: (await redisNow()) + 120_000 });
      expect(await visible(acc)).toEqual(['abs-first', 'ttl-first', 'kept']);
      await waitPast(Math.max(absAt, ttlAt));
      expect(await visible(acc)).toEqual(['kept']);
      expect(await svc.unreadCount(acc)).toBe(1);
      await expect(svc.get(acc, absFirst.msgId)).rejects.toBeInstanceOf(ScriptNotFoundError);
      await expect(svc.get(acc, ttlFirst.msgId)).rejects.toBeInstanceOf(ScriptNotFoundError);
      expect(await svc.get(acc, kept.msgId)).toMatchObject({ outerBizId: 'kept' });
    });

    it('an expiresAt at or before the Redis clock stores nothing and answers expired: true', async () => {
      const acc = 'abs-past';
      const k = keysOf(t, acc);
      for (const [outerBizId, extra] of [
        ['now', { expiresAt: await redisNow() }], // at or before the script's now by the time it runs
        ['past', { expiresAt: (await redisNow()) - 60_000 }],
        ['past-with-ttl', { expiresAt: (await redisNow()) - 1, ttlMs: 60_000 }],
      ] as const) {
        expect(await write(acc, outerBizId, extra)).toEqual({ msgId: '', duplicate: false, expired: true });
      }
      expect(await raw.exists(...Object.values(k))).toBe(0);
      // Nothing was recorded for the key either: the same message with a future expiresAt is new.
      const later = await write(acc, 'past', { expiresAt: (await redisNow()) + 60_000 });
      expect(later).toEqual({ msgId: expect.any(String), duplicate: false });
      expect(await visible(acc)).toEqual(['past']);
      expect(await svc.unreadCount(acc)).toBe(1);
      // A retry of a stored message is its duplicate, even with an expiresAt that has passed meanwhile.
      expect(await write(acc, 'past', { expiresAt: (await redisNow()) - 1 })).toEqual({ msgId: later.msgId, duplicate: true });
    });

    it('in a batch, an expired item answers 200 expired and counts apart from duplicates', async () => {
      const acc = 'abs-batch';
      const base = { accountId: acc, bizType: 'ORDER_CLOSE_REMINDER', title: 't', content: 'c' };
      const r = await svc.writeBatch([
        { ...base, outerBizId: 'b-1', expiresAt: (await redisNow()) + 60_000 },
        { ...base, outerBizId: 'b-2', expiresAt: (await redisNow()) - 1 },
        { ...base, outerBizId: 'b-3', expiresAt: MAX_MESSAGE_EXPIRES_AT + 1 },
      ]);
      expect(r.results.map((x) => [x.status, x.expired ?? false])).toEqual([
        [201, false],
        [200, true],
        [400, false],
      ]);
      expect(r.results[2].error).toContain('expiresAt');
      expect({ created: r.created, duplicates: r.duplicates, expired: r.expired, invalid: r.invalid }).toEqual({
        created: 1,
        duplicates: 0,
        expired: 1,
        invalid: 1,
      });
      expect(await visible(acc)).toEqual(['b-1']);
    });

    it('an expiresAt that is not an integer epoch ms up to year 9999 is a 400 naming expiresAt, and stores nothing', async () => {
      const acc = 'abs-bad';
      const microseconds = (await redisNow()) * 1000 + 60_000_000; // a unit mistake, caught by the bound
      for (const expiresAt of [0, -1, 1000.5, Number.NaN, Number.POSITIVE_INFINITY, MAX_MESSAGE_EXPIRES_AT + 1, microseconds]) {
        await expectFieldError(write(acc, `bad-${expiresAt}`, { expiresAt }), 'expiresAt');
      }
      expect(await raw.exists(...Object.values(keysOf(t, acc)))).toBe(0);
      // Later than 90 days ahead is taken (retention removes the message first), up to the bound itself.
      const far = await write(acc, 'far', { expiresAt: (await redisNow()) + MAX_MESSAGE_TTL_MS + 86_400_000 });
      expect(far).toEqual({ msgId: expect.any(String), duplicate: false });
      expect(await write(acc, 'last', { expiresAt: MAX_MESSAGE_EXPIRES_AT })).toEqual({ msgId: expect.any(String), duplicate: false });
      expect(await visible(acc)).toEqual(['far', 'last']);
    });
  });

  describe('withdraw', () => {
    it('takes the message out of pull, unread count and get, and answers withdrawn: true', async () => {
      const acc = 'wd-1';
      const other = await write(acc, 'other');
      const target = await write(acc, 'target');
      expect(await svc.unreadCount(acc)).toBe(2);
      expect(await withdraw(acc, 'target')).toEqual({ withdrawn: true });
      expect(await visible(acc)).toEqual(['other']);
      expect(await svc.unreadCount(acc)).toBe(1);
      expect(await rawUnread(acc)).toBe(1);
      await expect(svc.get(acc, target.msgId)).rejects.toBeInstanceOf(ScriptNotFoundError);
      const k = keysOf(t, acc);
      expect(await raw.hkeys(k.bodies)).toEqual([other.msgId]);
      expect(await raw.hkeys(k.idem)).toEqual(['ORDER_CLOSE_REMINDER|other']);
      expect(await raw.zrange(k.withdrawn, '0', '-1')).toEqual(['ORDER_CLOSE_REMINDER|target']);
    });

    it('withdrawing a read message leaves the unread count alone', async () => {
      const acc = 'wd-read';
      const a = await write(acc, 'a');
      await write(acc, 'b');
      await svc.markRead(acc, a.msgId);
      expect(await withdraw(acc, 'a')).toEqual({ withdrawn: true });
      expect(await svc.unreadCount(acc)).toBe(1);
      expect(await rawUnread(acc)).toBe(1);
      await svc.markAllRead(acc);
      const c = await write(acc, 'c');
      expect(await withdraw(acc, 'b')).toEqual({ withdrawn: true }); // read by the read-all mark
      expect(await svc.unreadCount(acc)).toBe(1);
      expect((await svc.pull(acc, '1', 10)).messages.map((m) => m.msgId)).toEqual([c.msgId]);
    });

    it('is idempotent: again, or for a key never written, answers withdrawn: false', async () => {
      const acc = 'wd-idem';
      await write(acc, 'x');
      expect(await withdraw(acc, 'x')).toEqual({ withdrawn: true });
      expect(await withdraw(acc, 'x')).toEqual({ withdrawn: false });
      expect(await withdraw(acc, 'never-written')).toEqual({ withdrawn: false });
      expect(await withdraw('wd-empty-account', 'never-written')).toEqual({ withdrawn: false });
      expect(await svc.unreadCount(acc)).toBe(0);
    });

    it('an expired message is not withdrawn again (withdrawn: false)', async () => {
      const acc = 'wd-expired';
      await write(acc, 'e', { ttlMs: 100 });
      const expiresAt = (await redisNow()) + 100;
      await waitUntil('the Redis clock to pass expiresAt', async () => (await redisNow()) > expiresAt, 2_000, 20);
      expect(await withdraw(acc, 'e')).toEqual({ withdrawn: false });
      expect(await raw.exists(keysOf(t, acc).bodies, keysOf(t, acc).expiry)).toBe(0);
    });

    it('a retried write after a withdraw stores nothing and says withdrawn, also when the withdraw came first', async () => {
      const acc = 'wd-retry';
      await write(acc, 'r');
      await withdraw(acc, 'r');
      expect(await write(acc, 'r')).toEqual({ msgId: '', duplicate: true, withdrawn: true });
      // A withdraw that overtakes its write: the write never shows.
      expect(await withdraw(acc, 'late')).toEqual({ withdrawn: false });
      expect(await write(acc, 'late', { ttlMs: 60_000 })).toEqual({ msgId: '', duplicate: true, withdrawn: true });
      expect(await visible(acc)).toEqual([]);
      expect(await svc.unreadCount(acc)).toBe(0);
      const k = keysOf(t, acc);
      expect(await raw.exists(k.bodies, k.idem, k.expiry)).toBe(0);
      // Another bizType with the same outerBizId is another key.
      expect(await svc.write({ accountId: acc, bizType: 'PAYMENT_SUCCESS', outerBizId: 'r', title: 't', content: 'c' })).toMatchObject({ duplicate: false });
    });

    it('remembers the newest withdrawals up to the inbox size; an older one may be written again', async () => {
      const s = small.app.get(MessagesService);
      const acc = 'wd-bound';
      for (let i = 0; i < SMALL_INBOX + 5; i++) await withdraw(acc, `w-${i}`, s);
      expect(await raw.zcard(keysOf(small, acc).withdrawn)).toBe(SMALL_INBOX);
      expect(await write(acc, `w-${SMALL_INBOX + 4}`, {}, s)).toMatchObject({ withdrawn: true });
      expect(await write(acc, 'w-0', {}, s)).toMatchObject({ duplicate: false });
      expect(await visible(acc, s)).toEqual(['w-0']);
    });

    it('many concurrent writes and withdraws of one key: at most one message ever, none visible after, counts exact', async () => {
      const accounts = Array.from({ length: 20 }, (_, i) => `wd-race-${i}`);
      await Promise.all(
        accounts.map(async (acc, i) => {
          // 30 writes and 10 withdraws, interleaved differently per account.
          const ops = Array.from({ length: 40 }, (_, j) => ((j * 7 + i) % 4 === 0 ? 'withdraw' : 'write'));
          const results = await Promise.all(ops.map((op) => (op === 'write' ? write(acc, 'same') : withdraw(acc, 'same'))));
          const writes = results.filter((r) => 'duplicate' in r);
          const ids = new Set(writes.filter((r) => !('withdrawn' in r && r.withdrawn)).map((r) => r.msgId));
          const created = writes.filter((r) => !r.duplicate).length;
          const removed = results.filter((r) => !('duplicate' in r) && r.withdrawn).length;
          expect({ acc, ids: ids.size <= 1, created: created <= 1, removedIffCreated: removed === created }).toEqual({
            acc,
            ids: true,
            created: true,
            removedIffCreated: true,
          });
          expect(await visible(acc)).toEqual([]);
          expect(await svc.unreadCount(acc)).toBe(0);
          expect(await rawUnread(acc)).toBe(0);
          expect(await write(acc, 'same')).toMatchObject({ withdrawn: true });
          const k = keysOf(t, acc);
          expect(await raw.exists(k.bodies, k.idem)).toBe(0);
          expect(await raw.zrange(k.withdrawn, '0', '-1')).toEqual(['ORDER_CLOSE_REMINDER|same']);
        }),
      );
    });
  });

  describe('the in-process API', () => {
    it('MessagesModule exports MessagesService and PendingActionsService for other modules to inject', () => {
      expect(Reflect.getMetadata('exports', MessagesModule)).toEqual(expect.arrayContaining([MessagesService, PendingActionsService]));
    });

    it('PendingActionsService reaches the inbox only through the store (no Redis connection of its own)', () => {
      const params = (Reflect.getMetadata('design:paramtypes', PendingActionsService) as unknown[]) ?? [];
      expect(params).not.toContain(RedisService);
    });

    it('a pending action started and finished with plain commands: the record lives in the inbox meta hash with the retention TTL', async () => {
      const pending = t.app.get(PendingActionsService);
      const acc = 'pa-cmd';
      const meta = keysOf(t, acc).meta;
      const { actionId } = await pending.start({ accountId: acc, bizType: 'BANK_CARD_BINDING', context: { step: 2 } });
      expect(await raw.hget(meta, 'pa:BANK_CARD_BINDING')).toBe(actionId);
      expect(await raw.pttl(meta)).toBeGreaterThan(0);
      expect(await pending.finish({ accountId: acc, bizType: 'BANK_CARD_BINDING' })).toBe(true);
      expect(await raw.hexists(meta, 'pa:BANK_CARD_BINDING')).toBe(0);
      expect(await pending.finish({ accountId: acc, bizType: 'BANK_CARD_BINDING' })).toBe(false);
    });

    it('a pending action whose context is over 1 KiB as JSON is an InvalidArgumentError naming context, and nothing is stored', async () => {
      const pending = t.app.get(PendingActionsService);
      const acc = 'pa-big';
      await expectFieldError(pending.start({ accountId: acc, bizType: 'BANK_CARD_BINDING', context: { note: 'x'.repeat(1100) } }), 'context');
      expect(await raw.exists(keysOf(t, acc).meta)).toBe(0);
    });

    it('in process, the fields that name keys are checked as over HTTP: a 400 naming the field, nothing stored', async () => {
      const prefix = t.app.get(KeyBuilder).prefix;
      const before = (await raw.keys(`${prefix}:messages:*`)).sort();
      const base = { accountId: 'cmd-ok', bizType: 'ORDER_CLOSE_REMINDER', outerBizId: 'o-1', title: 't', content: 'c' };
      await expectFieldError(svc.write({ ...base, accountId: '{other}' }), 'accountId');
      await expectFieldError(svc.write({ ...base, accountId: '' }), 'accountId');
      await expectFieldError(svc.write({ ...base, bizType: 'A|B' }), 'bizType');
      await expectFieldError(svc.write({ ...base, outerBizId: 'has space' }), 'outerBizId');
      await expectFieldError(svc.withdraw({ accountId: 'cmd-ok', bizType: 'ORDER_CLOSE_REMINDER', outerBizId: 'x'.repeat(65) }), 'outerBizId');
      await expectFieldError(svc.withdraw({ accountId: 'a b', bizType: 'ORDER_CLOSE_REMINDER', outerBizId: 'o-1' }), 'accountId');
      await expectFieldError(t.app.get(PendingActionsService).start({ accountId: '{x}', bizType: 'BANK_CARD_BINDING' }), 'accountId');
      await expectFieldError(t.app.get(PendingActionsService).finish({ accountId: '{x}', bizType: 'BANK_CARD_BINDING' }), 'accountId');
      expect((await raw.keys(`${prefix}:messages:*`)).sort()).toEqual(before);
    });

    it('a pending action of an unknown type, called in process, is a 400 naming bizType and stores nothing', async () => {
      const pending = t.app.get(PendingActionsService);
      await expectFieldError(pending.start({ accountId: 'pa-bad', bizType: 'NOT_AN_ACTION' }), 'bizType');
      expect(await raw.exists(...Object.values(keysOf(t, 'pa-bad')))).toBe(0);
    });
  });
});
