import { KeyBuilder } from '../../src/platform/redis/key-builder';
import { shardKeys } from '../../src/features/seckill/seckill.keys';
import type { ActivityRecord } from '../../src/features/seckill/seckill.types';
import { rainBody, rainId, rainKit, type RainKit } from '../support/red-envelopes';
import { activityBody, activityId, seckillKit, type SeckillKit } from '../support/seckill';
import { useAppOnCluster } from '../support/cluster-suite';
import { CREDS } from '../support/test-app';

/**
 * The shards of a product and the sub-pools of a rain, loaded over HTTP on a 3-master cluster made by
 * `redis-cli --cluster create`, spread over the masters by their tags alone, for any id: 3 → one on each master,
 * 6 → two on each, 16 → five or six on each. And a sale loaded before spread tags (its record without `tags`, its
 * shards under the first tags and their salts) still sells where it was loaded.
 */
describe('shards and sub-pools spread over a 3-master cluster', () => {
  const c = useAppOnCluster('', { REDIS_COMMAND_TIMEOUT_MS: '2000', BALANCE_CHANNEL: 'wallet' });
  let sk: SeckillKit;
  let rk: RainKit;

  beforeAll(() => {
    sk = seckillKit(c.t);
    rk = rainKit(c.t);
  });

  /** The index of the master that stores `key`: the owner of its slot (CLUSTER KEYSLOT, CLUSTER SLOTS), which must hold it. */
  const holderOf = async (key: string) => {
    const slot = Number(await c.raw[0].cluster('KEYSLOT', key));
    const i = await c.masterOf(key);
    expect({ key, slot, stored: await c.raw[i].exists(key), inSlot: Number(await c.raw[i].cluster('COUNTKEYSINSLOT', slot)) >= 1 }).toEqual({
      key,
      slot,
      stored: 1,
      inSlot: true,
    });
    return i;
  };

  /** How many of the keys each master stores. */
  const perMaster = async (keys: string[]) => {
    const counts = [0, 0, 0];
    for (const k of keys) counts[await holderOf(k)]++;
    return counts;
  };

  /** 3 → [1,1,1], 6 → [2,2,2], 16 → five or six each. */
  const expectSpread = (n: number, counts: number[], label: string) => {
    expect({ label, n, total: counts.reduce((s, c) => s + c, 0) }).toEqual({ label, n, total: n });
    expect({ label, n, counts, even: counts.every((c) => Math.abs(c - n / 3) < 1) }).toEqual({ label, n, counts, even: true });
  };

  it('a product’s 3, 6 and 16 shards: one, two, five or six on each master (for several products)', async () => {
    for (let round = 0; round < 3; round++) {
      const id = activityId(`sp${round}`);
      const products = [3, 6, 16].map((n) => ({ productId: `p${n}`, stock: n, shards: n }));
      await sk.create(activityBody(id, products));
      for (const { productId, shards } of products) {
        const { p, keys } = await sk.shards(id, productId);
        expect(p.tags).toBe(2);
        expectSpread(shards, await perMaster(keys.map((k) => k.stock)), `${id} ${productId}`);
      }
      await sk.expectInvariant(id);
    }
  }, 60_000);

  it('a rain’s 3, 6 and 16 sub-pools: one, two, five or six on each master (for several rains)', async () => {
    for (let round = 0; round < 2; round++) {
      for (const n of [3, 6, 16]) {
        const id = rainId(`sp${n}`);
        await rk.fund(CREDS.merchantId, n * 100);
        await rk.create(rainBody(id, { totalAmount: n * 100, count: n * 2, subPools: n }));
        const a = await rk.activities.mustRead(id);
        expect(a.tags).toBe(2);
        const pools = Array.from({ length: n }, (_, k) => rk.store.pool(a, k));
        expectSpread(n, await perMaster(pools.map((k) => k.pool)), id);
        // Every key of a sub-pool in one slot.
        for (const k of pools) expect(new Set(await Promise.all([k.pool, k.stats, k.grabs].map((x) => c.raw[0].cluster('KEYSLOT', x)))).size).toBe(1);
        await rk.expectBalanced(id);
      }
    }
  }, 90_000);

  it('a sale loaded before spread tags (first tags and salts in its record) sells on the shards it was loaded on', async () => {
    const id = activityId('old');
    // Loaded as the previous build did: the record's product has no `tags`, shard 1 and 2 carry salts.
    const product = { productId: 'p', title: 'Product p', price: 990, currency: 'CNY', stock: 3, shards: 3, salts: [0, 4, 11] };
    const builder = new KeyBuilder(c.t.config);
    const now = await sk.store.now();
    const record: ActivityRecord = {
      activityId: id,
      merchantId: CREDS.merchantId,
      title: 'Old sale',
      startsAt: now - 1000,
      endsAt: now + 3600_000,
      payWindowMinutes: 15,
      perUserLimit: 1,
      restricted: false,
      eligibleCount: 0,
      products: [product],
      gen: 'g0',
      fingerprint: 'f'.repeat(64),
      createdAt: now,
      updatedAt: now,
      endedAt: 0,
    };
    const keys = [0, 1, 2].map((k) => shardKeys(builder, id, 'p', k, { shards: 3, salts: product.salts }));
    expect(keys.map((k) => k.stock)).toEqual(
      [`{p:${id}:p:0}`, `{p:${id}:p:1:4}`, `{p:${id}:p:2:11}`].map((tag) => `${c.t.config.redis.keyPrefix}:seckill:${tag}:stock`),
    );
    for (let k = 0; k < 3; k++) {
      const shard = { gen: 'g0', stock: 1, startsAt: record.startsAt, endsAt: record.endsAt, limit: 1, shard: k, expireAt: record.endsAt + 60_000 };
      expect(await sk.store.load(keys[k], shard)).toEqual({ loaded: true });
    }
    await sk.store.saveActivity(record, record.endsAt + 60_000, true);

    const buyers = ['acc_old1', 'acc_old2', 'acc_old3', 'acc_old4'];
    const answers = [];
    for (const b of buyers) answers.push(await sk.reserve(b, id, 'p', 1));
    expect(answers.map((r) => r.status)).toEqual([201, 201, 201, 409]);
    expect(answers[3].body.error).toBe('SOLD_OUT');
    // The units came from the shards under their first tags.
    expect((await Promise.all(keys.map((k) => sk.store.stock(k)))).map((s) => [s?.available, s?.reserved])).toEqual([
      [0, 1],
      [0, 1],
      [0, 1],
    ]);
    expect((await sk.admin().get(`/admin/seckill/activities/${id}/check`)).body).toMatchObject({ ok: true, problems: [] });
    await sk.expectInvariant(id);
  }, 30_000);
});
