import type Redis from 'ioredis';
import { measureCacheKeyMemory } from '../support/cache-key-memory';
import { DecrCheckDesign, DesignCounters, LlenLpushDesign, runBaselineLoad, SeckillDesign, seckillLoadPlan } from '../support/seckill-baselines';
import { rawConnection } from '../harness/redis-process';
import { randomPrefix, RedisServerHandle, startRedisServer } from '../harness/redis-server';

/**
 * The naive flash-sale designs (test/support/seckill-baselines.ts) behave as
 * described on a real Redis: both end with exactly the stock sold under 200
 * requests in flight but pay for it in compensations, neither limits a buyer,
 * and each turns a buyer away while a unit is left when requests interleave;
 * the load runner's oversell count can fail; and 16-hex cache keys take less
 * memory than 32-hex ones (test/support/cache-key-memory.ts).
 */
describe('seckill benchmark baselines', () => {
  let redis: RedisServerHandle;
  let raw: Redis;
  let prefix: string;
  let n = 0;
  const product = () => `${prefix}:seckill:{p:${++n}}:stock`;

  beforeAll(async () => {
    redis = await startRedisServer({ appendonly: false });
    // The load runners count a thrown command as an error: a stalled test worker (a loaded CI machine) must not turn
    // into a 2 s command timeout and an uncounted unit.
    raw = rawConnection(redis, { commandTimeout: 60_000 });
    prefix = randomPrefix();
  });

  afterAll(async () => {
    raw?.disconnect();
    await redis?.destroy();
  });

  // 2,000 buyers × 3 tries, a buyer's tries back to back, 200 in flight, 100 units of 1.
  const load = { buyers: 2000, triesPerBuyer: 3, concurrency: 200, stock: 100, quantity: 1, order: 'grouped' as const };

  it('DECR-then-check: 200 in flight end with exactly the stock sold, every refusal compensated, buyers unlimited', async () => {
    const key = product();
    const r = await runBaselineLoad(new DecrCheckDesign(raw), { ...load, productKey: key });

    expect({ errors: r.errors, firstError: r.firstError }).toEqual({ errors: 0, firstError: undefined });
    expect(r.requests).toBe(6000);
    expect(r.ok).toBe(100);
    expect(r.refused).toBe(5900);
    expect(r.final.sold).toBe(100);
    expect(await raw.get(key)).toBe('0');
    expect(r.oversoldUnits).toBe(0);
    expect(r.undersoldUnits).toBe(0);
    expect(r.grantedMatchesHeld).toBe(true);
    // Every refusal went below zero and sent an INCRBY back; the counter was below zero meanwhile.
    expect(r.compensations).toBe(r.refused);
    expect(r.commands).toBe(r.requests + r.compensations);
    expect(r.peakOverStock).toBeGreaterThan(0);
    // No per-buyer check: a buyer's three overlapping tries all succeed while units are left.
    expect(r.buyersOverLimit).toBeGreaterThan(0);
    expect(r.unitsOverLimit).toBeGreaterThanOrEqual(r.buyersOverLimit);
    expect(r.rps).toBeGreaterThan(0);
  });

  it("the seed's LLEN/LPUSH list: 200 in flight push past the stock, compensate with LREM, and end with exactly the stock held", async () => {
    const key = product();
    const design = new LlenLpushDesign(raw);
    const r = await runBaselineLoad(design, { ...load, productKey: key });

    expect({ errors: r.errors, firstError: r.firstError }).toEqual({ errors: 0, firstError: undefined });
    expect(r.ok).toBe(100);
    expect(r.final.sold).toBe(100);
    expect(await raw.llen(key)).toBe(100);
    expect(r.oversoldUnits).toBe(0);
    expect(r.grantedMatchesHeld).toBe(true);
    // The first 200 LLENs all read 0 before any LPUSH: the list passes the stock and the extra pushes are taken back.
    expect(r.compensations).toBeGreaterThan(0);
    expect(r.peakOverStock).toBeGreaterThan(0);
    expect(r.commands).toBe(r.requests + (r.ok + r.compensations) + r.compensations);
    // The tokens in Redis name their buyers: one buyer holds several units.
    const held = [...(r.final.unitsByBuyer ?? new Map<string, number>()).values()];
    expect(held.reduce((a, b) => a + b, 0)).toBe(100);
    expect(Math.max(...held)).toBeGreaterThan(1);
    expect(r.buyersOverLimit).toBeGreaterThan(0);
  });

  it('DECR-then-check refuses a buyer of the last unit while a larger request is below zero, leaving it unsold', async () => {
    const key = product();
    const d = new DecrCheckDesign(raw);
    await d.setup(key, 5);
    expect(await d.reserve(key, 'b1', 4, 5)).toBe('ok');
    // Both DECRBYs leave on the one connection before either reply: 1 − 3 = −2, then −2 − 1 = −3.
    const [big, last] = await Promise.all([d.reserve(key, 'b2', 3, 5), d.reserve(key, 'b3', 1, 5)]);
    expect([big, last]).toEqual(['sold-out', 'sold-out']);
    expect(await d.inspect(key, 5)).toEqual({ sold: 4, raw: 1 });
    expect(d.counters()).toMatchObject<Partial<DesignCounters>>({ requests: 3, ok: 1, refused: 2, compensations: 2, peakReserved: 8 });
  });

  it("the seed's list refuses a buyer of the last unit while another's pushed tokens are waiting for their LREM", async () => {
    const key = product();
    const d = new LlenLpushDesign(raw);
    await d.setup(key, 5);
    expect(await d.reserve(key, 'b1', 2, 5)).toBe('ok');
    // Three LLENs read 2; then LPUSH b2 ×2 → 4 (ok), LPUSH b3 ×3 → 7 (over), LPUSH b4 ×1 → 8 (over) before b3's LREM.
    const out = await Promise.all([d.reserve(key, 'b2', 2, 5), d.reserve(key, 'b3', 3, 5), d.reserve(key, 'b4', 1, 5)]);
    expect(out).toEqual(['ok', 'sold-out', 'sold-out']);
    const end = await d.inspect(key, 5);
    expect(end.sold).toBe(4);
    expect(Object.fromEntries(end.unitsByBuyer ?? [])).toEqual({ b1: 2, b2: 2 });
    expect(d.counters()).toMatchObject<Partial<DesignCounters>>({ requests: 4, ok: 2, refused: 2, compensations: 2, peakReserved: 8 });
    // The same unit is then sold to the next buyer: nothing was lost for good, only that buyer turned away.
    expect(await d.reserve(key, 'b5', 1, 5)).toBe('ok');
  });

  it('the load runner reports units sold beyond the stock and buyers refused while units were left', async () => {
    const key = product();
    // A design with no check at all: every request is granted, on a real counter.
    let requests = 0;
    const unchecked: SeckillDesign = {
      id: 'unchecked',
      label: 'INCRBY sold, no check',
      setup: async (k) => void (await raw.set(k, 0)),
      reserve: async (k, _b, q) => {
        requests++;
        await raw.incrby(k, q);
        return 'ok';
      },
      inspect: async (k) => {
        const sold = Number(await raw.get(k));
        return { sold, raw: sold };
      },
      counters: () => ({ requests, ok: requests, refused: 0, compensations: 0, peakReserved: 0, commands: requests }),
      resetCounters: () => void (requests = 0),
    };
    const r = await runBaselineLoad(unchecked, { buyers: 50, triesPerBuyer: 2, concurrency: 20, stock: 30, productKey: key });
    expect(r.final.sold).toBe(100);
    expect(r.oversoldUnits).toBe(70);
    expect(r.buyersOverLimit).toBe(50);

    // Mixed quantities under contention: the list design turns buyers away whom the units left could serve.
    const mixed = await runBaselineLoad(new LlenLpushDesign(raw), {
      ...load,
      productKey: product(),
      quantity: (b, a) => 1 + ((b * 7 + a) % 3),
      order: 'shuffled',
    });
    expect(mixed.oversoldUnits).toBe(0);
    expect(mixed.final.sold).toBeLessThanOrEqual(100);
    expect(mixed.refusedWithStockLeft).toBeGreaterThan(0);
  });

  it('plans the same requests for every design: each buyer its tries, in a seeded order', () => {
    const a = seckillLoadPlan({ buyers: 100, triesPerBuyer: 3, order: 'shuffled', seed: 7 });
    expect(a).toHaveLength(300);
    expect(seckillLoadPlan({ buyers: 100, triesPerBuyer: 3, order: 'shuffled', seed: 7 })).toEqual(a);
    expect(new Set(a.map((p) => `${p.buyer}/${p.attempt}`)).size).toBe(300);
    expect(seckillLoadPlan({ buyers: 2, triesPerBuyer: 2, order: 'grouped' }).map((p) => p.buyer)).toEqual([0, 0, 1, 1]);
    expect(seckillLoadPlan({ buyers: 2, triesPerBuyer: 2, order: 'rounds' }).map((p) => p.buyer)).toEqual([0, 1, 0, 1]);
  });

  it('16-hex cache keys take less memory than 32-hex ones (20,000 keys, values of 32 bytes)', async () => {
    const own = await startRedisServer({ appendonly: false });
    try {
      const m = await measureCacheKeyMemory({ keys: 20_000, redisUrl: own.url, sample: 200 });
      const [v16, v32] = m.variants;
      expect(v16.dbsize).toBe(20_000);
      expect(v32.dbsize).toBe(20_000);
      expect(v16.exampleKey).toMatch(/^rp:seckill:list:[0-9a-f]{16}$/);
      expect(v32.exampleKey).toMatch(/^rp:seckill:list:[0-9a-f]{32}$/);
      expect(m.bytes16).toBeGreaterThan(20_000 * 32);
      expect(m.bytes16).toBeLessThan(m.bytes32);
      expect(m.perKey16).toBeCloseTo(m.bytes16 / 20_000, 6);
      expect(m.ratio).toBeGreaterThan(1);
      // 16 more bytes per key name, rounded to an allocator size class.
      expect(v32.memoryUsagePerKey - v16.memoryUsagePerKey).toBeGreaterThanOrEqual(16);
    } finally {
      await own.destroy();
    }
  });
});
