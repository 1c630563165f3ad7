import { randomBytes } from 'node:crypto';
import type Redis from 'ioredis';
import type { ShardKeys } from '../../src/features/seckill/seckill.keys';
import { forEachLimit } from '../../src/platform/core/for-each-limit';
import { rawConnection, waitUntil } from '../harness/redis-process';
import { activityBody, activityId, seckillKit, type SeckillKit } from '../support/seckill';
import { useAppOnOwnRedis } from '../support/test-app';

/**
 * Every lua/features/seckill script's contract on a real Redis, called through SeckillStore (reserve-5, take-3, release-5,
 * sell-4, load-6, end-1): idempotency, every refusal, a release counted exactly once, no sale of a released
 * reservation and no release of a sold one, no reload over live reservations, claims freed on the home shard.
 * After every test, each product's stock still adds up: initial = available + reserved + sold.
 */

const ctx = useAppOnOwnRedis({ RATE_LIMIT_ENABLED: 'false' });
let kit: SeckillKit;
let raw: Redis;
const touched: string[] = [];
const HOUR = 3600_000;
const rsv = () => `sk_${randomBytes(12).toString('hex')}`;

beforeAll(() => {
  kit = seckillKit(ctx.t);
  raw = rawConnection(ctx.redis);
});
afterAll(() => raw?.disconnect());
afterEach(async () => {
  for (const id of touched.splice(0)) await kit.expectInvariant(id);
});

/** A fresh activity with `products`, loaded; returns its id. */
async function sale(products: Parameters<typeof activityBody>[1], over: Parameters<typeof activityBody>[2] = {}) {
  const id = activityId('s');
  await kit.create(activityBody(id, products, over));
  touched.push(id);
  return id;
}

const stockOf = async (k: ShardKeys) => (await kit.store.stock(k))!;
const opts = (over: Partial<{ qty: number; eligible: boolean; canFallOver: boolean; account: string; rsvId: string; plan: number[] }> = {}) => ({
  rsvId: over.rsvId ?? rsv(),
  account: over.account ?? 'acc_1',
  qty: over.qty ?? 1,
  eligible: over.eligible ?? true,
  payWindowMs: HOUR,
  canFallOver: over.canFallOver ?? false,
  ...(over.plan ? { plan: over.plan } : {}),
});

describe('reserve-5.lua', () => {
  it('takes the units once per reservation id: the same id again is EXISTING and changes nothing', async () => {
    const id = await sale([{ productId: 'p', stock: 5 }], { perUserLimit: 3 });
    const [k] = (await kit.shards(id, 'p')).keys;
    const a = opts({ qty: 2 });
    const first = await kit.store.reserve(k, a);
    expect(first).toMatchObject({ outcome: 'RESERVED', left: 3 });
    const again = await kit.store.reserve(k, a);
    expect(again).toMatchObject({ outcome: 'EXISTING', record: { s: 'RESERVED', a: 'acc_1', q: 2, h: 0 } });
    expect(await stockOf(k)).toMatchObject({ initial: 5, available: 3, reserved: 2, sold: 0 });
    expect(await raw.hget(k.holds, 'acc_1')).toBe('2');
    // In the due set once, scored by its expiry, with the shard's expiry on the set.
    expect(await raw.zrange(k.due, '0', '-1', 'WITHSCORES')).toEqual([a.rsvId, String(first.outcome === 'RESERVED' ? first.expiresAt : 0)]);
    expect(await raw.pttl(k.due)).toBeGreaterThan(0);
  });

  it('refuses past the per-user limit, when not eligible, and past the stock (SOLD_OUT with what is left), changing nothing', async () => {
    const id = await sale([{ productId: 'p', stock: 3 }], { perUserLimit: 2 });
    const [k] = (await kit.shards(id, 'p')).keys;
    expect((await kit.store.reserve(k, opts({ qty: 2 }))).outcome).toBe('RESERVED');
    expect(await kit.store.reserve(k, opts({ qty: 1 }))).toEqual({ outcome: 'LIMIT_EXCEEDED', held: 2, limit: 2 });
    expect(await kit.store.reserve(k, opts({ account: 'acc_2', eligible: false }))).toEqual({ outcome: 'NOT_ELIGIBLE' });
    expect(await kit.store.reserve(k, opts({ account: 'acc_2', qty: 2 }))).toEqual({ outcome: 'SOLD_OUT', available: 1 });
    expect(await stockOf(k)).toMatchObject({ available: 1, reserved: 2 });
    expect(await raw.hgetall(k.holds)).toEqual({ acc_1: '2' });
    expect(await raw.hlen(k.claims)).toBe(0);
    // Only the reservation made is due; the refusals left nothing.
    expect(await raw.zcard(k.due)).toBe(1);
  });

  it('refuses before the start (NOT_STARTED), after the end (ENDED) and on a shard that is not loaded (NO_PRODUCT)', async () => {
    const later = await sale([{ productId: 'p', stock: 2 }], {
      startsAt: new Date(Date.now() + HOUR).toISOString(),
      endsAt: new Date(Date.now() + 2 * HOUR).toISOString(),
    });
    const [k] = (await kit.shards(later, 'p')).keys;
    expect(await kit.store.reserve(k, opts())).toEqual({ outcome: 'NOT_STARTED' });
    const open = await sale([{ productId: 'p', stock: 2 }]);
    const [o] = (await kit.shards(open, 'p')).keys;
    await kit.store.endShard(o);
    expect(await kit.store.reserve(o, opts())).toEqual({ outcome: 'ENDED' });
    const { p } = await kit.shards(open, 'p');
    expect(await kit.store.reserve(kit.store.shard(open, { ...p, shards: 8 }, 7), opts())).toEqual({ outcome: 'NO_PRODUCT' });
    expect(await stockOf(k)).toMatchObject({ available: 2, reserved: 0 });
    expect(await stockOf(o)).toMatchObject({ available: 2, reserved: 0 });
  });

  it('home shard short with other shards: SHORT writes nothing; with the shards named, CLAIM takes what is here and claims the whole quantity; again CLAIMED', async () => {
    const id = await sale([{ productId: 'p', stock: 4, shards: 2 }], { perUserLimit: 3 });
    const [k0] = (await kit.shards(id, 'p')).keys;
    expect((await kit.store.reserve(k0, opts({ account: 'acc_x' }))).outcome).toBe('RESERVED');
    const a = opts({ qty: 3, canFallOver: true });
    expect(await kit.store.reserve(k0, a)).toEqual({ outcome: 'SHORT', available: 1 });
    expect(await raw.hlen(k0.claims)).toBe(0);
    expect(await raw.hexists(k0.rsv, a.rsvId)).toBe(0);
    const claim = await kit.store.reserve(k0, { ...a, plan: [1] });
    expect(claim).toMatchObject({ outcome: 'CLAIM', record: { s: 'RESERVED', a: 'acc_1', q: 1, n: 3, h: 0, p: '1' } });
    expect(await raw.hget(k0.claims, a.rsvId)).toBe('3');
    expect(await raw.hget(k0.holds, 'acc_1')).toBe('3');
    // The claim is due (the master record is settled through it), so that a reservation left half taken is settled whole.
    expect(await raw.zscore(k0.due, `c|${a.rsvId}|acc_1`)).not.toBeNull();
    expect(await raw.zscore(k0.due, a.rsvId)).toBeNull();
    expect(await kit.store.reserve(k0, a)).toMatchObject({ outcome: 'CLAIMED', units: 3, record: { q: 1, n: 3, p: '1' } });
    expect(await stockOf(k0)).toMatchObject({ initial: 2, available: 0, reserved: 2 });
    // The claim counts against the limit: 3 claimed + 1 more is over 3.
    expect(await kit.store.reserve(k0, opts({ qty: 1, canFallOver: true }))).toEqual({ outcome: 'LIMIT_EXCEEDED', held: 3, limit: 3 });
    // Given back (its parts could not be met): the unit here, the claim and its hold go; the record says it failed.
    expect(await kit.store.release(k0, a.rsvId, 'acc_1', 'topic', true)).toEqual({ stock: 'RELEASED', claimFreed: true, available: 1 });
    expect(await raw.hexists(k0.claims, a.rsvId)).toBe(0);
    expect(await raw.hexists(k0.holds, 'acc_1')).toBe(0);
    expect(await raw.zscore(k0.due, `c|${a.rsvId}|acc_1`)).toBeNull();
    expect(await kit.store.reserve(k0, a)).toMatchObject({ outcome: 'EXISTING', record: { s: 'RELEASED', f: 1 } });
    expect(await stockOf(k0)).toMatchObject({ initial: 2, available: 1, reserved: 1 });
  });
  it('under a flash-sale load (3,000 buyers × 3 tries back to back, 200 in flight, 100 units, limit 1): exactly the stock reserved, 0 oversold, 0 undersold, no buyer over the limit', async () => {
    const id = await sale([{ productId: 'p', stock: 100 }], { perUserLimit: 1 });
    const [k] = (await kit.shards(id, 'p')).keys;
    const outcomes: Record<string, number> = {};
    await forEachLimit(9000, 200, async (i) => {
      const r = await kit.store.reserve(k, opts({ account: `acc_${Math.floor(i / 3)}` }));
      outcomes[r.outcome] = (outcomes[r.outcome] ?? 0) + 1;
    });
    expect(outcomes.RESERVED).toBe(100);
    expect(outcomes.RESERVED + outcomes.SOLD_OUT + (outcomes.LIMIT_EXCEEDED ?? 0)).toBe(9000);
    expect(await stockOf(k)).toMatchObject({ initial: 100, available: 0, reserved: 100, sold: 0 });
    const holds = Object.values(await raw.hgetall(k.holds));
    expect([holds.length, holds.every((h) => h === '1')]).toEqual([100, true]);
  });
});

describe('take-3.lua', () => {
  it('takes what the shard has up to the need, once (EXISTING again); a visit that finds nothing is recorded too; refusals write nothing', async () => {
    const id = await sale([{ productId: 'p', stock: 4, shards: 2 }], { perUserLimit: 3 });
    const { p, keys } = await kit.shards(id, 'p');
    const [k0, k1] = keys;
    const e = (await kit.store.now()) + HOUR;
    const one = { rsvId: rsv(), account: 'acc_1', need: 3, expiresAt: e, home: 0, total: 3 };
    expect(await kit.store.take(k1, one)).toEqual({ outcome: 'TAKEN', units: 2, left: 0 });
    expect(await raw.zrange(k1.due, '0', '-1')).toEqual([one.rsvId]);
    expect(await kit.store.take(k1, one)).toMatchObject({ outcome: 'EXISTING', record: { s: 'RESERVED', h: 0, q: 2, n: 3, e } });
    // Nothing left: the visit decides this shard's part (none), so no later copy of the request takes here.
    const two = { ...one, rsvId: rsv(), need: 1 };
    expect(await kit.store.take(k1, two)).toEqual({ outcome: 'TAKEN', units: 0, left: 0 });
    expect(await kit.store.take(k1, two)).toMatchObject({ outcome: 'EXISTING', record: { q: 0 } });
    expect(await raw.zrange(k1.due, '0', '-1')).toEqual([one.rsvId]);
    expect(await kit.store.take(k0, { ...one, rsvId: rsv(), expiresAt: e - 2 * HOUR })).toEqual({ outcome: 'EXPIRED' });
    await kit.store.endShard(k0);
    expect(await kit.store.take(k0, { ...one, rsvId: rsv(), home: 1 })).toEqual({ outcome: 'ENDED' });
    expect(await kit.store.take(kit.store.shard(id, { ...p, shards: 6 }, 5), { ...one, rsvId: rsv() })).toEqual({ outcome: 'NO_PRODUCT' });
    expect(await stockOf(k1)).toMatchObject({ initial: 2, available: 0, reserved: 2 });
    expect(await stockOf(k0)).toMatchObject({ initial: 2, available: 2, reserved: 0 });
    expect(await raw.hlen(k0.rsv)).toBe(0);
  });

  it('a reservation over two shards released part by part, then on its home shard: units back where they were taken, the claim freed, once', async () => {
    const id = await sale([{ productId: 'p', stock: 4, shards: 2 }], { perUserLimit: 3 });
    const [k0, k1] = (await kit.shards(id, 'p')).keys;
    expect((await kit.store.reserve(k0, opts({ account: 'acc_x' }))).outcome).toBe('RESERVED');
    const a = opts({ qty: 3, canFallOver: true, plan: [1] });
    const claim = await kit.store.reserve(k0, a);
    expect(claim.outcome).toBe('CLAIM');
    const e = claim.outcome === 'CLAIM' ? claim.record.e : 0;
    expect(await kit.store.take(k1, { rsvId: a.rsvId, account: 'acc_1', need: 2, expiresAt: e, home: 0, total: 3 })).toMatchObject({
      outcome: 'TAKEN',
      units: 2,
    });
    expect(await kit.store.release(k1, a.rsvId, 'acc_1', 'topic')).toEqual({ stock: 'RELEASED', claimFreed: false, available: 2 });
    expect(await kit.store.release(k0, a.rsvId, 'acc_1', 'topic')).toEqual({ stock: 'RELEASED', claimFreed: true, available: 1 });
    expect(await kit.store.release(k1, a.rsvId, 'acc_1', 'topic')).toEqual({ stock: 'ALREADY', claimFreed: false, available: 2 });
    expect(await kit.store.release(k0, a.rsvId, 'acc_1', 'topic')).toEqual({ stock: 'ALREADY', claimFreed: false, available: 1 });
    expect(await raw.hgetall(k0.holds)).toEqual({ acc_x: '1' });
    expect(await stockOf(k1)).toMatchObject({ available: 2, reserved: 0, released: 2 });
    // Nothing of it is due any more; acc_x's reservation still is.
    expect(await raw.zcard(k1.due)).toBe(0);
    expect(await raw.zrange(k0.due, '0', '-1')).toHaveLength(1);
  });

  it('a sold reservation over two shards keeps its claim: a release of its home record is refused and frees nothing', async () => {
    const id = await sale([{ productId: 'p', stock: 2, shards: 2 }], { perUserLimit: 2 });
    const [k0, k1] = (await kit.shards(id, 'p')).keys;
    const a = opts({ qty: 2, canFallOver: true, plan: [1] });
    const claim = await kit.store.reserve(k0, a);
    const e = claim.outcome === 'CLAIM' ? claim.record.e : 0;
    expect(await kit.store.take(k1, { rsvId: a.rsvId, account: 'acc_1', need: 1, expiresAt: e, home: 0, total: 2 })).toMatchObject({ units: 1 });
    expect(await kit.store.sell(k1, a.rsvId)).toBe('SOLD');
    expect(await kit.store.sell(k0, a.rsvId)).toBe('SOLD');
    expect(await kit.store.release(k0, a.rsvId, 'acc_1', 'topic')).toEqual({ stock: 'SOLD', claimFreed: false, available: 0 });
    expect(await raw.hget(k0.holds, 'acc_1')).toBe('2');
    expect(await stockOf(k0)).toMatchObject({ sold: 1, reserved: 0 });
    expect(await stockOf(k1)).toMatchObject({ sold: 1, reserved: 0 });
  });
});

describe('release-5.lua and sell-4.lua', () => {
  it('release exactly once: RELEASED then ALREADY, units and hold back once; a released reservation cannot be sold', async () => {
    const id = await sale([{ productId: 'p', stock: 2 }], { perUserLimit: 2 });
    const [k] = (await kit.shards(id, 'p')).keys;
    const a = opts({ qty: 2 });
    await kit.store.reserve(k, a);
    expect(await kit.store.release(k, a.rsvId, 'acc_1', 'topic')).toEqual({ stock: 'RELEASED', claimFreed: false, available: 2 });
    expect(await kit.store.release(k, a.rsvId, 'acc_1', 'topic')).toEqual({ stock: 'ALREADY', claimFreed: false, available: 2 });
    expect(await kit.store.sell(k, a.rsvId)).toBe('RELEASED');
    expect(await stockOf(k)).toMatchObject({ available: 2, reserved: 0, sold: 0, released: 2 });
    expect(await raw.hexists(k.holds, 'acc_1')).toBe(0);
    expect(await kit.store.record(k, a.rsvId)).toMatchObject({ s: 'RELEASED' });
    expect(await raw.scard(k.buyers)).toBe(0);
    expect(await raw.zcard(k.due)).toBe(0);
  });

  it('sell once: SOLD then ALREADY; a sold reservation cannot be released; unknown ids are NONE', async () => {
    const id = await sale([{ productId: 'p', stock: 2 }]);
    const [k] = (await kit.shards(id, 'p')).keys;
    const a = opts();
    await kit.store.reserve(k, a);
    expect(await kit.store.sell(k, a.rsvId)).toBe('SOLD');
    expect(await kit.store.sell(k, a.rsvId)).toBe('ALREADY');
    expect(await kit.store.release(k, a.rsvId, 'acc_1', 'topic')).toEqual({ stock: 'SOLD', claimFreed: false, available: 1 });
    expect(await kit.store.sell(k, rsv())).toBe('NONE');
    expect(await kit.store.release(k, rsv(), 'acc_1', 'topic')).toEqual({ stock: 'NONE', claimFreed: false, available: 1 });
    expect(await stockOf(k)).toMatchObject({ available: 1, reserved: 0, sold: 1, released: 0 });
    // Sold units still count against the buyer's limit.
    expect(await raw.hget(k.holds, 'acc_1')).toBe('1');
    expect(await raw.smembers(k.buyers)).toEqual(['acc_1']);
    expect(await raw.zcard(k.due)).toBe(0);
  });

  it('a release that brings a sold-out shard back publishes the product on the restock channel; one that does not stays silent', async () => {
    const id = await sale([{ productId: 'p', stock: 2 }]);
    const [k] = (await kit.shards(id, 'p')).keys;
    const sub = rawConnection(ctx.redis);
    const heard: string[] = [];
    try {
      sub.on('message', (_ch: string, m: string) => heard.push(m));
      await sub.subscribe(kit.store.restockChannel);
      const [a, b] = [opts(), opts({ account: 'acc_2' })];
      await kit.store.reserve(k, a);
      await kit.store.release(k, a.rsvId, 'acc_1', 'first');
      await kit.store.reserve(k, b);
      await kit.store.reserve(k, opts({ account: 'acc_3' }));
      expect(await kit.store.available(k)).toBe(0);
      await kit.store.release(k, b.rsvId, 'acc_2', 'second');
      await waitUntil('the restock message', async () => heard.length > 0, 2000);
      // Let a wrongly published "first" arrive too, if it was sent.
      await raw.ping();
      expect(heard).toEqual(['second']);
    } finally {
      sub.disconnect();
    }
  });
});

describe('load-6.lua and end-1.lua', () => {
  it('reloads a shard with no reservations (earlier records gone), refuses while reservations or sales exist', async () => {
    const id = await sale([{ productId: 'p', stock: 3 }]);
    const [k] = (await kit.shards(id, 'p')).keys;
    const now = Date.now();
    const load = { gen: 'g2', stock: 4, startsAt: now - 1000, endsAt: now + HOUR, limit: 1, shard: 0, expireAt: now + 2 * HOUR };
    const a = opts();
    await kit.store.reserve(k, a);
    expect(await kit.store.load(k, load)).toEqual({ loaded: false, reserved: 1, sold: 0 });
    expect(await stockOf(k)).toMatchObject({ initial: 3, available: 2, reserved: 1 });
    await kit.store.sell(k, a.rsvId);
    expect(await kit.store.load(k, load)).toEqual({ loaded: false, reserved: 0, sold: 1 });

    const id2 = await sale([{ productId: 'p', stock: 3 }]);
    const [k2] = (await kit.shards(id2, 'p')).keys;
    const b = opts();
    await kit.store.reserve(k2, b);
    await kit.store.release(k2, b.rsvId, 'acc_1', 'topic');
    // A released reservation only: the reload goes through and leaves no record, hold, claim or buyer behind.
    expect(await kit.store.load(k2, { ...load, stock: 3 })).toEqual({ loaded: true });
    expect(await stockOf(k2)).toMatchObject({ gen: 'g2', initial: 3, available: 3, reserved: 0, sold: 0, released: 0, limit: 1 });
    expect(await kit.store.counts(k2)).toEqual({ holds: 0, claims: 0, reservations: 0, buyers: 0 });
    expect(await raw.pttl(k2.stock)).toBeGreaterThan(HOUR);
  });

  it('end-1 closes the window on the Redis clock once (the same endedAt again), keeps reservations, 0 for a missing shard', async () => {
    const id = await sale([{ productId: 'p', stock: 2 }]);
    const { p, keys } = await kit.shards(id, 'p');
    const [k] = keys;
    const a = opts();
    await kit.store.reserve(k, a);
    const before = await kit.store.now();
    const endedAt = await kit.store.endShard(k);
    expect(endedAt).toBeGreaterThanOrEqual(before);
    expect(await kit.store.endShard(k)).toBe(endedAt);
    expect(await kit.store.endShard(kit.store.shard(id, { ...p, shards: 4 }, 3))).toBe(0);
    expect(await kit.store.reserve(k, opts({ account: 'acc_2' }))).toEqual({ outcome: 'ENDED' });
    expect(await kit.store.record(k, a.rsvId)).toMatchObject({ s: 'RESERVED' });
    // Paying a reservation made before the end still sells it.
    expect(await kit.store.sell(k, a.rsvId)).toBe('SOLD');
  });
});
