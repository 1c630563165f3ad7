import type Redis from 'ioredis';
import type { MessageDto, PullResultDto } from '../../src/features/messages/dto/pull.dto';
import { inboxKeys } from '../../src/features/messages/message.keys';
import { MessagesService } from '../../src/features/messages/messages.service';
import { KeyBuilder } from '../../src/platform/redis/key-builder';
import { rawConnection } from '../harness/redis-process';
import { RedisServerHandle, startRedisServer } from '../harness/redis-server';
import { startTestApp, TestApp } from '../support/test-app';
import { setTimeout as sleep } from 'node:timers/promises';

/**
 * Pull paging checked against a simple in-test model of one inbox, over
 * random (seeded) sequences of writes (new, duplicate, late with a past
 * createdAt), pulls with after=latestId and random limits, newest pages,
 * deletes, mark-read and mark-all-read. The model predicts every pull's
 * messages, hasMore and latestId exactly; a client that keeps pulling with
 * after=latestId must see every message exactly once, in order, even when
 * its cursor's message was trimmed, deleted or expired meanwhile.
 * Two inboxes: one small (retention by count, with the unread counter checked
 * too) and one with a 1 s retention (expiry, waiting out the moments when a
 * message is about to expire so every prediction is exact).
 */

/** Seeds for each model run; a failure names its seed and step. */
const COUNT_SEEDS = [1, 2, 3, 4, 5, 6];
const EXPIRY_SEEDS = [11, 12];
const SMALL_INBOX = 10;
const RETENTION_MS = 1000;
/** How long one model step may take: predictions hold for any Redis clock in [now, now + STEP_MS]. */
const STEP_MS = 250;

/** mulberry32: a small seeded PRNG, so a failing sequence can be replayed. */
function prng(seed: number) {
  let a = seed >>> 0;
  const next = () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
  return { next, int: (lo: number, hi: number) => lo + Math.floor(next() * (hi - lo + 1)), pick: <T>(xs: T[]) => xs[Math.floor(next() * xs.length)] };
}

interface ModelMessage {
  id: string;
  outerBizId: string;
  createdAt: string;
  read: boolean;
}

/** What the inbox should hold: messages oldest first, trimmed by count and by time as the scripts do. */
class InboxModel {
  /** Stored messages (not yet trimmed, deleted or removed), oldest first. */
  stored: ModelMessage[] = [];
  /** outerBizIds whose message was deleted or trimmed: writing them again makes a new message. */
  gone = new Set<string>();
  /** msgIds trimmed because they expired. */
  expiredIds = new Set<string>();
  lastId = 0n;

  constructor(
    readonly maxCount: number,
    readonly retentionMs: number,
  ) {}

  isExpired(m: ModelMessage, now: number): boolean {
    return BigInt(m.id) < BigInt(now - this.retentionMs) * 1000n;
  }

  visible(now: number): ModelMessage[] {
    return this.stored.filter((m) => !this.isExpired(m, now));
  }

  unread(now: number): number {
    return this.visible(now).filter((m) => !m.read).length;
  }

  /** ms to wait until no message is about to expire within [now, now + STEP_MS] (0: none is). */
  unsettledFor(now: number): number {
    let wait = 0;
    for (const m of this.stored) {
      const expiresAt = Number(m.id) / 1000 + this.retentionMs;
      if (expiresAt >= now - 5 && expiresAt <= now + STEP_MS + 5) wait = Math.max(wait, expiresAt - now + 6);
    }
    return Math.ceil(wait);
  }

  /** The expected outcome of writing `outerBizId` at `now`: the original msgId for a kept one, else a new one. */
  expectWrite(outerBizId: string, now: number): { duplicateOf?: string } {
    const kept = this.visible(now).find((m) => m.outerBizId === outerBizId);
    return kept ? { duplicateOf: kept.id } : {};
  }

  /** A new message stored at `now`: retention then drops the expired (oldest 100 at most) and the oldest beyond maxCount. */
  add(m: ModelMessage, now: number): void {
    this.stored.push(m);
    this.lastId = BigInt(m.id);
    this.gone.delete(m.outerBizId);
    const expired = this.stored.filter((x) => this.isExpired(x, now)).slice(0, 100);
    for (const x of expired) this.expiredIds.add(x.id);
    this.drop(expired);
    this.drop(this.stored.slice(0, Math.min(100, Math.max(0, this.stored.length - this.maxCount))));
  }

  remove(id: string): void {
    this.drop(this.stored.filter((m) => m.id === id));
  }

  page(after: string | undefined, limit: number, now: number): Pick<PullResultDto, 'hasMore' | 'latestId'> & { messages: ModelMessage[] } {
    const visible = this.visible(now);
    if (after === undefined) {
      const messages = visible.slice(-limit);
      return { messages, hasMore: visible.length > limit, latestId: messages.at(-1)?.id ?? null };
    }
    const newer = visible.filter((m) => BigInt(m.id) > BigInt(after));
    const messages = newer.slice(0, limit);
    return { messages, hasMore: newer.length > limit, latestId: messages.at(-1)?.id ?? after };
  }

  private drop(ms: ModelMessage[]): void {
    const ids = new Set(ms.map((m) => m.id));
    for (const m of ms) this.gone.add(m.outerBizId);
    this.stored = this.stored.filter((m) => !ids.has(m.id));
  }
}

const shown = (m: Pick<ModelMessage, 'id' | 'outerBizId' | 'createdAt' | 'read'>) => `${m.id} ${m.outerBizId} ${m.createdAt} ${m.read ? 'read' : 'unread'}`;
const shownDto = (m: MessageDto) => shown({ id: m.msgId, outerBizId: m.outerBizId, createdAt: m.createdAt, read: m.read });

describe(`${MessagesService.name} paging against a model`, () => {
  let redis: RedisServerHandle;
  let raw: Redis;
  let small: TestApp;
  let expiring: TestApp;

  beforeAll(async () => {
    redis = await startRedisServer();
    raw = rawConnection(redis);
    small = await startTestApp(redis.url, { MESSAGES_MAX_PER_ACCOUNT: String(SMALL_INBOX) });
    expiring = await startTestApp(redis.url, { MESSAGES_RETENTION_SECONDS: String(RETENTION_MS / 1000) });
  });

  afterAll(async () => {
    await small?.close();
    await expiring?.close();
    raw?.disconnect();
    await redis?.destroy();
  });

  const redisNow = async () => {
    const [s, us] = await raw.time();
    return Number(s) * 1000 + Math.floor(Number(us) / 1000);
  };

  /**
   * Runs `steps` random operations on one account and checks each against the model.
   * `exactUnread`: also check every unread count (not with expiry: see messages-service.e2e-spec.ts).
   */
  async function runModel(t: TestApp, seed: number, opts: { steps: number; model: InboxModel; exactUnread: boolean; sleepMs?: [number, number] }) {
    const svc = t.app.get(MessagesService);
    const acc = `model-${seed}`;
    const rnd = prng(seed);
    const { model } = opts;
    const client = { cursor: '1', seen: [] as string[], pullsPastGoneCursor: 0, pullsPastExpiredCursor: 0, lateSeen: 0 };
    let nextName = 0;

    for (let step = 0; step < opts.steps; step++) {
      const at = `seed ${seed} step ${step}`;
      // With expiry, time passes between some steps; halfway through, the client is away for longer than the retention.
      if (opts.sleepMs && rnd.next() < 0.12) await sleep(rnd.int(...opts.sleepMs));
      if (opts.sleepMs && step === opts.steps / 2) await sleep(model.retentionMs + 100);
      // Wait out a message about to expire, so the model knows which side of the line it is on.
      let now = await redisNow();
      for (let wait = model.unsettledFor(now); wait > 0; wait = model.unsettledFor(now)) {
        await sleep(wait);
        now = await redisNow();
      }
      const visible = model.visible(now);
      const roll = rnd.next();

      if (roll < 0.35) {
        // A new write, a third of them late (createdAt up to a week back).
        const outerBizId = `o-${nextName++}`;
        const createdAt = rnd.next() < 0.33 ? new Date(now - rnd.int(1_000, 7 * 86_400_000)).toISOString() : new Date(now).toISOString();
        const r = await svc.write({ accountId: acc, bizType: 'PAYMENT_SUCCESS', outerBizId, title: 'Paid', content: `#${outerBizId}`, createdAt });
        expect({ at, duplicate: r.duplicate, increasing: BigInt(r.msgId) > model.lastId }).toEqual({ at, duplicate: false, increasing: true });
        model.add({ id: r.msgId, outerBizId, createdAt, read: false }, now);
      } else if (roll < 0.45) {
        // The same outerBizId again: of a kept message (a duplicate) or of a deleted or trimmed one (new).
        const candidates = [...visible.map((m) => m.outerBizId), ...model.gone];
        if (candidates.length === 0) continue;
        const outerBizId = rnd.pick(candidates);
        const { duplicateOf } = model.expectWrite(outerBizId, now);
        const createdAt = new Date(now).toISOString();
        const r = await svc.write({ accountId: acc, bizType: 'PAYMENT_SUCCESS', outerBizId, title: 'Paid', content: `#${outerBizId}`, createdAt });
        if (duplicateOf) {
          expect({ at, outerBizId, r }).toEqual({ at, outerBizId, r: { msgId: duplicateOf, duplicate: true } });
        } else {
          expect({ at, outerBizId, duplicate: r.duplicate, increasing: BigInt(r.msgId) > model.lastId }).toEqual({
            at,
            outerBizId,
            duplicate: false,
            increasing: true,
          });
          model.add({ id: r.msgId, outerBizId, createdAt, read: false }, now);
        }
      } else if (roll < 0.7) {
        // The client pulls after its cursor, whether or not that message is still there.
        const limit = rnd.next() < 0.1 ? 100 : rnd.int(1, 12);
        const cursorGone = client.cursor !== '1' && !visible.some((m) => m.id === client.cursor);
        const cursorExpired = model.expiredIds.has(client.cursor) || model.stored.some((m) => m.id === client.cursor && model.isExpired(m, now));
        const want = model.page(client.cursor, limit, now);
        const got = await svc.pull(acc, client.cursor, limit);
        expect({ at, limit, after: client.cursor, messages: got.messages.map(shownDto), hasMore: got.hasMore, latestId: got.latestId }).toEqual({
          at,
          limit,
          after: client.cursor,
          messages: want.messages.map(shown),
          hasMore: want.hasMore,
          latestId: want.latestId,
        });
        if (opts.exactUnread) expect({ at, unread: got.unread }).toEqual({ at, unread: model.unread(now) });
        client.seen.push(...got.messages.map((m) => m.msgId));
        client.lateSeen += got.messages.filter((m) => Date.parse(m.createdAt) < Number(BigInt(m.msgId) / 1000n) - 500).length;
        if (cursorGone && got.messages.length > 0) client.pullsPastGoneCursor++;
        if (cursorExpired && got.messages.length > 0) client.pullsPastExpiredCursor++;
        client.cursor = got.latestId!;
      } else if (roll < 0.75) {
        // The newest page, as an app without a cursor asks for it.
        const limit = rnd.int(1, 15);
        const want = model.page(undefined, limit, now);
        const got = await svc.pull(acc, undefined, limit);
        expect({ at, limit, messages: got.messages.map(shownDto), hasMore: got.hasMore, latestId: got.latestId }).toEqual({
          at,
          limit,
          messages: want.messages.map(shown),
          hasMore: want.hasMore,
          latestId: want.latestId,
        });
      } else if (roll < 0.83) {
        // Delete a kept message; now and then the client's cursor.
        if (visible.length === 0) continue;
        const cursorMsg = visible.find((m) => m.id === client.cursor);
        const target = cursorMsg && rnd.next() < 0.3 ? cursorMsg : rnd.pick(visible);
        const unread = await svc.remove(acc, target.id);
        model.remove(target.id);
        if (opts.exactUnread) expect({ at, unread }).toEqual({ at, unread: model.unread(now) });
      } else if (roll < 0.93) {
        if (visible.length === 0) continue;
        const target = rnd.pick(visible);
        const r = await svc.markRead(acc, target.id);
        expect({ at, changed: r.changed }).toEqual({ at, changed: !target.read });
        target.read = true;
        if (opts.exactUnread) expect({ at, unread: r.unread }).toEqual({ at, unread: model.unread(now) });
      } else if (roll < 0.96) {
        const r = await svc.markAllRead(acc);
        if (opts.exactUnread) expect({ at, marked: r.marked }).toEqual({ at, marked: model.unread(now) });
        for (const m of model.stored) m.read = true;
      } else if (opts.exactUnread) {
        // A recount: the counter against the messages themselves.
        const all = await svc.pull(acc, undefined, 100);
        const counter = await svc.unreadCount(acc);
        expect({ at, counter, recount: all.messages.filter((m) => !m.read).length }).toEqual({ at, counter: model.unread(now), recount: model.unread(now) });
      }
      // Only the 1 s retention inbox depends on time; the other keeps messages for 90 days.
      const took = (await redisNow()) - now;
      if (model.retentionMs <= RETENTION_MS && took > STEP_MS) throw new Error(`${at} took ${took} ms, longer than the ${STEP_MS} ms the model allows`);
    }

    // Drain: the client reaches the end, having seen each message once, in order, with nothing kept left out.
    for (;;) {
      const page = await svc.pull(acc, client.cursor, 100);
      client.seen.push(...page.messages.map((m) => m.msgId));
      client.cursor = page.latestId!;
      if (!page.hasMore) break;
    }
    const ids = client.seen.map(BigInt);
    expect(ids.every((id, i) => i === 0 || id > ids[i - 1])).toBe(true);
    const seen = new Set(client.seen);
    const missed = model.visible(await redisNow()).filter((m) => !seen.has(m.id));
    expect(missed).toEqual([]);
    return { client, keys: inboxKeys(t.app.get(KeyBuilder), acc) };
  }

  it.each(COUNT_SEEDS)(
    `seed %i: with a ${SMALL_INBOX}-message inbox, every pull, newest page and unread count is what the model predicts, and the client misses nothing`,
    async (seed) => {
      const model = new InboxModel(SMALL_INBOX, 90 * 86_400_000);
      const { client, keys } = await runModel(small, seed, { steps: 250, model, exactUnread: true });
      // The sequence went through the cases that matter.
      expect({ pullsPastGoneCursor: client.pullsPastGoneCursor > 0, lateSeen: client.lateSeen > 0, trimmed: model.gone.size > 0 }).toEqual({
        pullsPastGoneCursor: true,
        lateSeen: true,
        trimmed: true,
      });
      // Storage holds exactly the model's messages: bodies and idempotency records went with the others.
      const [inbox, bodies, idem, , meta] = keys;
      const ids = model.stored.map((m) => m.id);
      expect(await raw.zrange(inbox, '0', '-1')).toEqual(ids);
      expect((await raw.hkeys(bodies)).sort()).toEqual([...ids].sort());
      expect((await raw.hvals(idem)).sort()).toEqual([...ids].sort());
      expect(Number(await raw.hget(meta, 'unread'))).toBe(model.unread(0));
    },
  );

  it.each(EXPIRY_SEEDS)(
    `seed %i: with a ${RETENTION_MS / 1000} s retention, every pull and newest page is what the model predicts, and the client misses nothing that had not expired`,
    async (seed) => {
      const model = new InboxModel(1000, RETENTION_MS);
      const { client } = await runModel(expiring, seed, { steps: 100, model, exactUnread: false, sleepMs: [50, 300] });
      expect({ pullsPastExpiredCursor: client.pullsPastExpiredCursor > 0, lateSeen: client.lateSeen > 0 }).toEqual({
        pullsPastExpiredCursor: true,
        lateSeen: true,
      });
    },
  );
});
