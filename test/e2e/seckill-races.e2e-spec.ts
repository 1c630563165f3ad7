import { KeyBuilder } from '../../src/redis/key-builder';
import { homeShard, reservationIdFor, shardKeys } from '../../src/seckill/seckill-keys';
import { activityBody, activityId, seckillKit, type SeckillKit } from '../support/seckill';
import { useAppOnOwnRedis } from '../support/test-app';

// No rate limit, and no sold-out memory: every copy of a request reaches Redis.
const ctx = useAppOnOwnRedis({ RATE_LIMIT_ENABLED: 'false', SECKILL_SOLD_OUT_MEMORY_MS: '0' });
let kit: SeckillKit;
beforeAll(() => (kit = seckillKit(ctx.t)));

const onShard = (tag: string, shards: number, shard: number, n: number) => {
  const out: string[] = [];
  for (let i = 0; out.length < n; i++) if (homeShard(`acc_${tag}_${i}`, 'p1', shards) === shard) out.push(`acc_${tag}_${i}`);
  return out;
};

describe('seckill races', () => {
  it.each(Array.from({ length: 5 }, (_, i) => [i * 2]))(
    'copies of one request falling over while a unit comes back on an earlier shard make one reservation (delay %i ms)',
    async (delay) => {
      const id = activityId('race');
      await kit.create(activityBody(id, [{ productId: 'p1', stock: 8, shards: 4 }]));
      const buyer = 'acc_racer';
      const h = homeShard(buyer, 'p1', 4);
      for (const acc of onShard(`h${delay}`, 4, h, 2)) expect((await kit.reserve(acc, id, 'p1')).status).toBe(201);
      const next = onShard(`n${delay}`, 4, (h + 1) % 4, 2);
      const taken = [];
      for (const acc of next) taken.push(await kit.reserve(acc, id, 'p1'));
      const copies = Array.from({ length: 200 }, () => kit.reserve(buyer, id, 'p1', 1, 'tap'));
      await new Promise((r) => setTimeout(r, delay));
      const cancel = kit.user(next[0]).delete(`/seckill/reservations/${taken[0].body.reservationId}`);
      const all = await Promise.all(copies);
      expect((await cancel).status).toBe(200);
      const rsvId = reservationIdFor(id, 'p1', buyer, 'tap');
      const keys = new KeyBuilder(ctx.t.config);
      const records = [];
      for (let k = 0; k < 4; k++) if (await ctx.raw.hget(shardKeys(keys, id, 'p1', k).rsv, rsvId)) records.push(k);
      expect({ records: records.length, created: all.filter((r) => r.status === 201).length }).toEqual({ records: 1, created: 1 });
      expect((await kit.expectInvariant(id)).get('p1')).toMatchObject({ reserved: 4, available: 4 });
    },
  );
});
