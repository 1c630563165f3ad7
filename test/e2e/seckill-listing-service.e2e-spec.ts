import { userToken } from '../support/test-app';
import { startRedisServer, type RedisServerHandle } from '../harness/redis-server';
import { activityBody, activityId, seckillKit, type SeckillKit } from '../support/seckill';
import { startTestApp, type TestApp } from '../support/test-app';

/**
 * The flash sale's product listing on real Redis: 1,000 concurrent requests for one cold page build it once on
 * the instance; a page's `available` is never older than SECKILL_LISTING_TTL_MS plus the build; with the cache
 * Redis (REDIS_CACHE_URL) frozen or stopped, pages still come from the core Redis, promptly.
 * After each test, each product's stock still adds up: initial = available + reserved + sold.
 */

const TTL_MS = 500;
let main: RedisServerHandle;
let cache: RedisServerHandle;
let plain: TestApp;
let cached: TestApp;
let kit: SeckillKit;
const touched: string[] = [];

beforeAll(async () => {
  [main, cache] = await Promise.all([startRedisServer(), startRedisServer({ appendonly: false })]);
  plain = await startTestApp(main.url, { RATE_LIMIT_ENABLED: 'false', SECKILL_LISTING_TTL_MS: String(TTL_MS) });
  cached = await startTestApp(main.url, {
    RATE_LIMIT_ENABLED: 'false',
    REDIS_KEY_PREFIX: plain.config.redis.keyPrefix,
    REDIS_CACHE_URL: cache.url,
    CACHE_COMMAND_TIMEOUT_MS: '200',
  });
  kit = seckillKit(plain);
}, 30_000);
afterAll(async () => {
  if (cache?.pid) process.kill(cache.pid, 'SIGCONT');
  await Promise.all([plain?.close(), cached?.close()]);
  await Promise.all([main?.destroy(), cache?.destroy()]);
});
afterEach(async () => {
  for (const id of touched.splice(0)) await kit.expectInvariant(id);
});

async function sale(products: Parameters<typeof activityBody>[1]) {
  const id = activityId('l');
  await kit.create(activityBody(id, products, { perUserLimit: 5 }));
  touched.push(id);
  return id;
}

/** One listing page through Fastify's inject (no sockets), with the time it took. */
async function page(t: TestApp, account: string, id: string, size = 8) {
  const started = Date.now();
  const res = await t.app.inject({
    method: 'GET',
    url: `/seckill/activities/${id}/products?page=1&size=${size}`,
    headers: { authorization: `Bearer ${userToken(account)}` },
  });
  return { status: res.statusCode, body: res.json(), started, ms: Date.now() - started };
}

describe('the product listing', () => {
  it('1,000 concurrent requests for one cold page: built once on the instance, every answer the same page', async () => {
    const id = await sale([
      { productId: 'p1', stock: 10 },
      { productId: 'p2', stock: 5, shards: 3 },
    ]);
    const before = await kit.metrics();
    const all = await Promise.all(Array.from({ length: 1000 }, () => page(plain, 'acc_sf', id)));
    const after = await kit.metrics();
    expect(all.filter((r) => r.status !== 200)).toEqual([]);
    expect(after.page_cache_builds_total - (before.page_cache_builds_total ?? 0)).toBe(1);
    expect(new Set(all.map((r) => r.body.builtAt)).size).toBe(1);
    expect(all[0].body.items.map((i: { productId: string; available: number }) => [i.productId, i.available]).sort()).toEqual([
      ['p1', 10],
      ['p2', 5],
    ]);
    // Another visitor's page is its own key: one more build.
    await page(plain, 'acc_sf2', id);
    expect((await kit.metrics()).page_cache_builds_total - after.page_cache_builds_total).toBe(1);
  });

  it('available is never older than the TTL plus the build while units sell', async () => {
    const id = await sale([{ productId: 'p', stock: 2000 }]);
    // When each reservation began, and what was left after it.
    const history: { began: number; left: number }[] = [];
    let stale = 0;
    const deadline = Date.now() + 3000;
    let i = 0;
    while (Date.now() < deadline) {
      const began = Date.now();
      const r = await kit.reserve(`acc_st${i++}`, id, 'p', 1, 's');
      expect(r.status).toBe(201);
      history.push({ began, left: 2000 - history.length - 1 });
      const shown = await page(plain, 'acc_viewer', id);
      const v = shown.body.items[0].available as number;
      const answeredAt = Date.now();
      // The first reservation that made the true count drop below what the page shows: the page is at most that old.
      const drop = history.find((h) => h.left < v);
      if (drop) {
        stale++;
        expect({ age: answeredAt - drop.began, ok: answeredAt - drop.began <= TTL_MS + shown.ms + 100 }).toMatchObject({ ok: true });
      }
      expect(answeredAt - Date.parse(shown.body.builtAt)).toBeLessThanOrEqual(TTL_MS + 100);
      expect(v).toBeGreaterThanOrEqual(history[history.length - 1].left);
    }
    // The cache was in use (pages were served stale at times), and fresh ones came.
    expect(stale).toBeGreaterThan(0);
    expect(stale).toBeLessThan(history.length);
  });

  it('the cache Redis frozen (SIGSTOP), then stopped: pages still 200 from the core Redis, promptly', async () => {
    const id = await sale([{ productId: 'p', stock: 7 }]);
    expect((await page(cached, 'acc_c', id)).status).toBe(200);
    process.kill(cache.pid!, 'SIGSTOP');
    try {
      for (let n = 0; n < 5; n++) {
        expect((await kit.reserve(`acc_cf${n}`, id, 'p')).status).toBe(201);
        const r = await page(cached, `acc_cf_view${n % 2}`, id);
        expect({ status: r.status, fast: r.ms < 1000 }).toEqual({ status: 200, fast: true });
        // Built from the core on every call while the cache cannot answer: always current.
        expect(r.body.items[0].available).toBe(6 - n);
      }
    } finally {
      process.kill(cache.pid!, 'SIGCONT');
    }
    await cache.stop();
    try {
      const r = await page(cached, 'acc_c', id);
      expect({ status: r.status, fast: r.ms < 1000, available: r.body.items[0].available }).toEqual({ status: 200, fast: true, available: 2 });
    } finally {
      await cache.start();
    }
  });
});
