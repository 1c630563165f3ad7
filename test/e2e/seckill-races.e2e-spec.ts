import { KeyBuilder } from '../../src/platform/redis/key-builder';
import { SPREAD_TAGS } from '../../src/platform/redis/slot-tags';
import { homeOf } from '../../src/engines/sharded-pool/home';
import { shardKeys } from '../../src/features/seckill/seckill.keys';
import { activityBody, activityId, seckillKit, type SeckillKit } from '../support/seckill';
import { useAppOnOwnRedis } from '../support/test-app';

// No rate limit, and no sold-out memory: every copy of a request reaches Redis.
const ctx = useAppOnOwnRedis({ RATE_LIMIT_ENABLED: 'false', SECKILL_SOLD_OUT_MEMORY_MS: '0' });
let kit: SeckillKit;
beforeAll(() => (kit = seckillKit(ctx.t)));

const onShard = (tag: string, shards: number, shard: number, n: number) => {
  const out: string[] = [];
  for (let i = 0; out.length < n; i++) if (homeOf(`acc_${tag}_${i}`, 'p1', shards) === shard) out.push(`acc_${tag}_${i}`);
  return out;
};

describe('seckill races', () => {
  it.each(Array.from({ length: 5 }, (_, i) => [i * 2]))(
    'copies of one request falling over while a unit comes back on an earlier shard make one reservation (delay %i ms)',
    async (delay) => {
      const id = activityId('race');
      await kit.create(activityBody(id, [{ productId: 'p1', stock: 8, shards: 4 }]));
      const buyer = 'acc_racer';
      const h = homeOf(buyer, 'p1', 4);
      for (const acc of onShard(`h${delay}`, 4, h, 2)) expect((await kit.reserve(acc, id, 'p1')).status).toBe(201);
      const next = onShard(`n${delay}`, 4, (h + 1) % 4, 2);
      const taken = [];
      for (const acc of next) taken.push(await kit.reserve(acc, id, 'p1'));
      const copies = Array.from({ length: 200 }, () => kit.reserve(buyer, id, 'p1', 1, 'tap'));
      await new Promise((r) => setTimeout(r, delay));
      const cancel = kit.user(next[0]).delete(`/seckill/reservations/${taken[0].body.reservationId}`);
      const all = await Promise.all(copies);
      expect((await cancel).status).toBe(200);
      const rsvId = await kit.reservationId(id, 'p1', buyer, 'tap');
      const keys = new KeyBuilder(ctx.t.config);
      // Units held for it, on every shard (a shard it visited and found empty keeps a record of 0 units).
      let units = 0;
      for (let k = 0; k < 4; k++)
        units += JSON.parse((await ctx.raw.hget(shardKeys(keys, id, 'p1', k, { shards: 4, tags: SPREAD_TAGS }).rsv, rsvId)) ?? '{"q":0}').q;
      expect({ units, created: all.filter((r) => r.status === 201).length, ok: all.filter((r) => r.status === 200).length }).toEqual({
        units: 1,
        created: 1,
        ok: 199,
      });
      expect((await kit.expectInvariant(id)).get('p1')).toMatchObject({ reserved: 4, available: 4 });
    },
  );

  it('a copy paused between two shards while a unit comes back on a shard it passed, and a second copy run meanwhile: one reservation', async () => {
    const id = activityId('pause');
    await kit.create(activityBody(id, [{ productId: 'p1', stock: 8, shards: 4 }]));
    const buyer = 'acc_paused';
    const h = homeOf(buyer, 'p1', 4);
    for (const acc of onShard('ph', 4, h, 2)) expect((await kit.reserve(acc, id, 'p1')).status).toBe(201);
    const next = onShard('pn', 4, (h + 1) % 4, 2);
    const taken = [];
    for (const acc of next) taken.push(await kit.reserve(acc, id, 'p1'));
    // The first copy stops before its second take of a part on another shard (if it makes one), until released.
    let paused!: () => void;
    const pausedAt = new Promise<void>((r) => (paused = r));
    let release!: () => void;
    const gate = new Promise<void>((r) => (release = r));
    const take = kit.store.take.bind(kit.store);
    let calls = 0;
    let armed = true;
    const spy = jest.spyOn(kit.store, 'take').mockImplementation(async (...args) => {
      if (armed && ++calls === 2) {
        paused();
        await gate;
      }
      return take(...args);
    });
    try {
      const first = Promise.resolve(kit.reserve(buyer, id, 'p1', 1, 'tap-p'));
      await Promise.race([pausedAt, first]);
      armed = false;
      // A unit comes back on the shard after the buyer's home, then a copy of the request runs to its answer.
      expect((await kit.user(next[0]).delete(`/seckill/reservations/${taken[0].body.reservationId}`)).status).toBe(200);
      const second = await kit.reserve(buyer, id, 'p1', 1, 'tap-p');
      release();
      const answers = [await first, second];
      expect(answers.map((r) => r.status).sort()).toEqual([200, 201]);
      expect(answers[0].body.reservationId).toBe(answers[1].body.reservationId);
    } finally {
      release();
      spy.mockRestore();
    }
    const rsvId = await kit.reservationId(id, 'p1', buyer, 'tap-p');
    const keys = new KeyBuilder(ctx.t.config);
    let units = 0;
    for (let k = 0; k < 4; k++)
      units += JSON.parse((await ctx.raw.hget(shardKeys(keys, id, 'p1', k, { shards: 4, tags: SPREAD_TAGS }).rsv, rsvId)) ?? '{"q":0}').q;
    expect(units).toBe(1);
    expect((await kit.expectInvariant(id)).get('p1')).toMatchObject({ reserved: 4, available: 4 });
  });
});
