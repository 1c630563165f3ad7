import type Redis from 'ioredis';
import { useAppOnCluster } from '../support/cluster-suite';
import { homeOf } from '../../src/engines/sharded-pool/home';
import { RedisService } from '../../src/platform/redis/redis.service';
import { SPREAD_TAGS } from '../../src/platform/redis/slot-tags';
import { waitUntil } from '../harness/redis-process';
import { activityBody, activityId, seckillKit, type SeckillKit } from '../support/seckill';
import type { TestApp } from '../support/test-app';

/**
 * Flash sales on a 3-master Redis Cluster: a product's 3 shards land on 3 different masters (their tags in 3 slot ranges),
 * a buyer whose home shard is empty falls over to the next ones, the per-user limit holds across shards (kept on
 * the home shard), and every lua/features/seckill script runs there. The stock invariant holds per product.
 */
describe('flash sales on a 3-master cluster', () => {
  const suite = useAppOnCluster('seckill/', { CHANNEL_LATENCY_MS: '2' });
  let raw: Redis[];
  let t: TestApp;
  let kit: SeckillKit;
  const { ran } = suite;

  beforeAll(() => {
    ({ raw, t } = suite);
    kit = seckillKit(t);
  });

  /** The index of the master that holds `key` (-1 when none does). */
  const holderOf = async (key: string) => {
    const i = await suite.masterOf(key);
    return (await raw[i].exists(key)) === 1 ? i : -1;
  };

  it('3 shards on 3 masters; fall-over from an empty home shard; the per-user limit across shards; every script', async () => {
    expect(t.app.get(RedisService).isCluster).toBe(true);
    const id = activityId('c');
    await kit.create(activityBody(id, [{ productId: 'p', stock: 6, shards: 3 }], { perUserLimit: 2 }));
    const { p, keys } = await kit.shards(id, 'p');
    expect(p).toMatchObject({ tags: SPREAD_TAGS });
    expect(p.salts).toBeUndefined();
    expect(new Set(await Promise.all(keys.map((k) => holderOf(k.stock))))).toEqual(new Set([0, 1, 2]));
    expect((await Promise.all(keys.map((k) => kit.store.stock(k)))).map((s) => s?.initial)).toEqual([2, 2, 2]);

    const onZero = Array.from({ length: 300 }, (_, i) => `acc_c${i}`).filter((a) => homeOf(a, 'p', 3) === 0);
    const [a, b, c, d] = onZero;
    const before = await kit.metrics();
    // a empties the home shard 0; b then falls over to shard 1, twice, and is stopped by the limit (2) held on shard 0.
    expect((await kit.reserve(a, id, 'p', 2, 'a1')).status).toBe(201);
    const b1 = await kit.reserve(b, id, 'p', 1, 'b1');
    const b2 = await kit.reserve(b, id, 'p', 1, 'b2');
    expect([b1.status, b2.status]).toEqual([201, 201]);
    const b3 = await kit.reserve(b, id, 'p', 1, 'b3');
    expect([b3.status, b3.body.error]).toEqual([409, 'LIMIT_EXCEEDED']);
    expect(await kit.store.record(keys[1], b1.body.reservationId)).toMatchObject({ s: 'RESERVED', a: b, h: 0 });
    expect(await kit.store.record(keys[1], b2.body.reservationId)).toMatchObject({ s: 'RESERVED', a: b, h: 0 });
    expect(await kit.store.counts(keys[0])).toMatchObject({ claims: 2 });
    // The same request again finds its reservation on shard 1.
    const b1again = await kit.reserve(b, id, 'p', 1, 'b1');
    expect([b1again.status, b1again.body.reservationId]).toEqual([200, b1.body.reservationId]);
    // c: home and shard 1 empty, shard 2 has 2.
    expect((await kit.reserve(c, id, 'p', 2, 'c1')).status).toBe(201);
    const soldOut = await kit.reserve(d, id, 'p', 1, 'd1');
    expect([soldOut.status, soldOut.body.error]).toEqual([409, 'SOLD_OUT']);
    expect((await kit.metrics()).seckill_fall_overs_total - (before.seckill_fall_overs_total ?? 0)).toBe(3);

    // b pays one, cancels the other; a cancels: units back on their own shards, b's claim on shard 0 freed once.
    expect(await kit.pay(b, b1.body.orderId, 990)).toBe('PAID');
    await waitUntil('b1 to be sold', async () => (await kit.store.record(keys[1], b1.body.reservationId))?.s === 'SOLD', 10_000);
    expect((await kit.user(b).delete(`/seckill/reservations/${b2.body.reservationId}`)).body.state).toBe('RELEASED');
    expect((await kit.user(b).delete(`/seckill/reservations/${b1.body.reservationId}`)).status).toBe(409);
    // Left on shard 0: b1's claim (sold, it counts for good) and c1's.
    expect(await kit.store.counts(keys[0])).toMatchObject({ claims: 2 });
    expect(await t.app.get(RedisService).command((r) => r.hget(keys[0].holds, b))).toBe('1');
    const sold = await kit.reserve(d, id, 'p', 1, 'd2');
    expect(sold.status).toBe(201);
    expect(await kit.store.record(keys[1], sold.body.reservationId)).toMatchObject({ s: 'RESERVED', a: d });
    // b holds 1 sold + may take 1 more, but not 2.
    expect((await kit.reserve(b, id, 'p', 2, 'b4')).body.error).toBe('LIMIT_EXCEEDED');
    expect((await kit.user(a).delete(`/seckill/reservations/${(await kit.reserve(a, id, 'p', 2, 'a1')).body.reservationId}`)).body.state).toBe('RELEASED');
    expect((await kit.reserve(b, id, 'p', 1, 'b5')).status).toBe(201);

    const stock = await kit.expectInvariant(id);
    expect(stock.get('p')).toMatchObject({ stock: 6, sold: 1, reserved: 4, available: 1 });
    expect((await kit.admin().post(`/admin/seckill/activities/${id}/end`)).status).toBeLessThan(300);
    expect((await kit.reserve('acc_late', id, 'p', 1)).body.error).toBe('ENDED');
    for (const s of ['load', 'reserve', 'take', 'release', 'sell', 'end']) expect(ran).toContain(`seckill/${s}`);
    await kit.expectInvariant(id);
  }, 60_000);
});
