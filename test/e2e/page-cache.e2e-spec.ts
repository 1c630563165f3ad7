import { setTimeout as sleep } from 'node:timers/promises';
import Redis from 'ioredis';
import { CacheRedis } from '../../src/engines/cache/cache-redis';
import { cacheValueKey } from '../../src/engines/cache/cache.keys';
import { PageCache } from '../../src/engines/cache/page-cache';
import { MetricsService } from '../../src/platform/metrics/metrics.service';
import { KeyBuilder } from '../../src/platform/redis/key-builder';
import { RedisClusterHandle, startRedisCluster } from '../harness/redis-cluster';
import { waitUntil, withConnection } from '../harness/redis-process';
import { RedisServerHandle, startRedisServer } from '../harness/redis-server';
import { startTestApp, TestApp } from '../support/test-app';

/**
 * The page cache on real Redis, in the whole app built from its configuration: on the main connection
 * (standalone and a 3-master cluster) and on a dedicated cache Redis (REDIS_CACHE_URL) that is frozen
 * (SIGSTOP) and stopped under it.
 */

/** A build that counts its calls and takes `ms` to make its value. */
function counted<T>(make: () => T, ms = 10) {
  const b = {
    calls: 0,
    fn: async (): Promise<T> => {
      b.calls++;
      await sleep(ms);
      return make();
    },
  };
  return b;
}

/** The value of one series of a counter, from the app's registry. */
async function counter(t: TestApp, name: string, labels: Record<string, string> = {}): Promise<number> {
  const metric = t.app.get(MetricsService).registry.getSingleMetric(name);
  const { values } = await metric!.get();
  const match = values.find((v) => Object.entries(labels).every(([k, val]) => v.labels[k] === val));
  return match?.value ?? 0;
}

/** Resolves `p` and how long it took, in ms. */
async function timed<T>(p: () => Promise<T>): Promise<[T, number]> {
  const start = performance.now();
  const value = await p();
  return [value, performance.now() - start];
}

describe('page cache on the main Redis', () => {
  let redis: RedisServerHandle;
  let t: TestApp;
  let raw: Redis;
  let pages: PageCache;
  let redisKey: (key: string) => string;

  beforeAll(async () => {
    redis = await startRedisServer();
    // A generous cache timeout here: these tests prove hits and misses, not the timeout, on a shared machine.
    t = await startTestApp(redis.url, { CACHE_COMMAND_TIMEOUT_MS: '250' });
    raw = new Redis(redis.url);
    pages = t.app.get(PageCache);
    const keys = t.app.get(KeyBuilder);
    redisKey = (key) => cacheValueKey(keys, key);
  });
  afterAll(async () => {
    raw?.disconnect();
    await t?.close();
    await redis?.destroy();
  });

  it('shares the main connection when REDIS_CACHE_URL is unset', () => {
    expect(t.app.get(CacheRedis).dedicated).toBe(false);
  });

  it('misses, builds and caches; then hits with the cached value; a different key builds separately', async () => {
    const key = PageCache.keyOf('sk:list:', 'today', 1);
    const page = { items: [{ sku: 'a', price: 100 }], page: 1 };
    const build = counted(() => page);
    expect(await pages.getOrBuild(key, 60_000, build.fn)).toEqual({ value: page, hit: false });
    await waitUntil('the page written', async () => (await raw.exists(redisKey(key))) === 1, 2000);
    expect(JSON.parse((await raw.get(redisKey(key)))!)).toEqual(page);
    expect(await raw.pttl(redisKey(key))).toBeGreaterThan(50_000);
    expect(redisKey(key)).toBe(`${t.config.redis.keyPrefix}:cache:{c:${key}}:v`);

    expect(await pages.getOrBuild(key, 60_000, build.fn)).toEqual({ value: page, hit: true });
    expect(build.calls).toBe(1);

    const other = PageCache.keyOf('sk:list:', 'today', 2);
    expect(await pages.getOrBuild(other, 60_000, build.fn)).toEqual({ value: page, hit: false });
    expect(build.calls).toBe(2);
  });

  it('expires a page after its TTL, and builds it again', async () => {
    const key = PageCache.keyOf('sk:ttl:', Date.now());
    let n = 0;
    const build = counted(() => ++n);
    expect(await pages.getOrBuild(key, 300, build.fn)).toEqual({ value: 1, hit: false });
    await waitUntil('the page written', async () => (await raw.exists(redisKey(key))) === 1, 2000);
    expect(await pages.getOrBuild(key, 300, build.fn)).toEqual({ value: 1, hit: true });
    await waitUntil('the page expired', async () => (await raw.exists(redisKey(key))) === 0, 3000);
    expect(await pages.getOrBuild(key, 300, build.fn)).toEqual({ value: 2, hit: false });
    expect(build.calls).toBe(2);
  });

  it('1,000 concurrent calls for one cold key build once; 1,000 for a second key build once more', async () => {
    const a = PageCache.keyOf('sk:hot:', 'a', Date.now());
    const b = PageCache.keyOf('sk:hot:', 'b', Date.now());
    const buildA = counted(() => ({ page: 'a' }), 30);
    const buildB = counted(() => ({ page: 'b' }), 30);
    const buildsBefore = await counter(t, 'page_cache_builds_total');
    const missesBefore = await counter(t, 'page_cache_requests_total', { result: 'miss' });
    const calls = Array.from({ length: 2000 }, (_, i) => (i % 2 ? pages.getOrBuild(b, 60_000, buildB.fn) : pages.getOrBuild(a, 60_000, buildA.fn)));
    const results = await Promise.all(calls);
    expect([buildA.calls, buildB.calls]).toEqual([1, 1]);
    expect(results.filter((r, i) => r.value.page !== (i % 2 ? 'b' : 'a'))).toEqual([]);
    expect(results.filter((r) => r.hit)).toEqual([]);
    expect(await counter(t, 'page_cache_builds_total')).toBe(buildsBefore + 2);
    expect(await counter(t, 'page_cache_requests_total', { result: 'miss' })).toBe(missesBefore + 2000);

    // Once written, another burst is all hits and builds nothing.
    await waitUntil('both pages written', async () => (await raw.exists(redisKey(a), redisKey(b))) === 2, 2000);
    const again = await Promise.all(Array.from({ length: 200 }, () => pages.getOrBuild(a, 60_000, buildA.fn)));
    expect(again.every((r) => r.hit && r.value.page === 'a')).toBe(true);
    expect(buildA.calls).toBe(1);
  });

  it('a build error reaches every caller sharing the build, is not cached, and the next call builds again', async () => {
    const key = PageCache.keyOf('sk:err:', Date.now());
    let fail = true;
    const build = counted(() => {
      if (fail) throw new Error('listing unavailable');
      return 'ok';
    });
    const settled = await Promise.allSettled(Array.from({ length: 50 }, () => pages.getOrBuild(key, 60_000, build.fn)));
    expect(build.calls).toBe(1);
    expect(settled.map((s) => (s.status === 'rejected' ? (s.reason as Error).message : 'fulfilled'))).toEqual(Array(50).fill('listing unavailable'));
    await sleep(50);
    expect(await raw.exists(redisKey(key))).toBe(0);
    fail = false;
    expect(await pages.getOrBuild(key, 60_000, build.fn)).toEqual({ value: 'ok', hit: false });
    expect(build.calls).toBe(2);
  });

  it('a cached value that is not JSON is rebuilt and written over, counted as an error', async () => {
    const key = PageCache.keyOf('sk:bad:', Date.now());
    await raw.set(redisKey(key), '{not json', 'PX', 60_000);
    const errorsBefore = await counter(t, 'page_cache_requests_total', { result: 'error' });
    expect(await pages.getOrBuild(key, 60_000, async () => [1, 2])).toEqual({ value: [1, 2], hit: false });
    expect(await counter(t, 'page_cache_requests_total', { result: 'error' })).toBe(errorsBefore + 1);
    await waitUntil('the page rewritten', async () => (await raw.get(redisKey(key))) === '[1,2]', 2000);
  });

  it('refuses a key PageCache.keyOf did not make', async () => {
    for (const bad of ['plain', 'x{y}0123456789abcdef', 'sk:0123456789ABCDEF']) {
      await expect(pages.getOrBuild(bad, 1000, async () => 1)).rejects.toThrow(TypeError);
    }
  });
});

describe('page cache on the main Redis as a 3-master cluster', () => {
  let cluster: RedisClusterHandle;
  let t: TestApp;

  beforeAll(async () => {
    cluster = await startRedisCluster();
    t = await startTestApp('', { REDIS_CLUSTER_NODES: cluster.envValue, CACHE_COMMAND_TIMEOUT_MS: '250' });
  });
  afterAll(async () => {
    await t?.close();
    await cluster?.destroy();
  });

  it('caches pages spread over the masters, with single-flight builds', async () => {
    const pages = t.app.get(PageCache);
    const keys = Array.from({ length: 30 }, (_, i) => PageCache.keyOf('sk:c:', i));
    const build = counted(() => 'page');
    const first = await Promise.all(keys.flatMap((k) => [pages.getOrBuild(k, 60_000, build.fn), pages.getOrBuild(k, 60_000, build.fn)]));
    expect(first.every((r) => r.value === 'page' && !r.hit)).toBe(true);
    expect(build.calls).toBe(30);
    await waitUntil(
      'every page written',
      async () => {
        const counts = await Promise.all(cluster.nodes.map((n) => withConnection(n, (c) => c.dbsize())));
        // Every master holds some of the pages (the key is the hash tag), and all 30 are there.
        return counts.every((c) => c > 0) && counts.reduce((x, y) => x + y, 0) >= 30 ? true : `per master: ${counts.join(', ')}`;
      },
      3000,
    );
    const again = await Promise.all(keys.map((k) => pages.getOrBuild(k, 60_000, build.fn)));
    expect(again.every((r) => r.hit && r.value === 'page')).toBe(true);
    expect(build.calls).toBe(30);
  });
});

describe('page cache on a dedicated cache Redis (REDIS_CACHE_URL)', () => {
  let main: RedisServerHandle;
  let cache: RedisServerHandle;
  let t: TestApp;
  let rawMain: Redis;
  let rawCache: Redis;
  let pages: PageCache;
  let redisKey: (key: string) => string;
  const TIMEOUT_MS = 100;

  beforeAll(async () => {
    main = await startRedisServer();
    // As the cache role runs: no persistence, evicts least recently used keys.
    cache = await startRedisServer({ appendonly: false, args: ['--maxmemory', '64mb', '--maxmemory-policy', 'allkeys-lru'] });
    t = await startTestApp(main.url, { REDIS_CACHE_URL: cache.url, CACHE_COMMAND_TIMEOUT_MS: String(TIMEOUT_MS) });
    rawMain = new Redis(main.url);
    rawCache = new Redis(cache.url, { retryStrategy: () => 100 });
    rawCache.on('error', () => undefined);
    pages = t.app.get(PageCache);
    const keys = t.app.get(KeyBuilder);
    redisKey = (key) => cacheValueKey(keys, key);
  });
  afterAll(async () => {
    if (cache?.pid !== undefined) process.kill(cache.pid, 'SIGCONT');
    rawMain?.disconnect();
    rawCache?.disconnect();
    await t?.close();
    await cache?.destroy();
    await main?.destroy();
  });

  /** Waits until a fresh page is cached again: a miss that writes, then a hit. */
  async function cachesAgain(tag: string): Promise<void> {
    await waitUntil(
      'the cache to serve hits again',
      async () => {
        const key = PageCache.keyOf('sk:again:', tag, Date.now());
        await pages.getOrBuild(key, 60_000, async () => tag);
        await sleep(20);
        const second = await pages.getOrBuild(key, 60_000, async () => 'rebuilt');
        return second.hit && second.value === tag ? true : JSON.stringify(second);
      },
      15_000,
      100,
    );
  }

  it('owns a connection named redis-pay:cache to the cache Redis, and writes pages there only', async () => {
    expect(t.app.get(CacheRedis).dedicated).toBe(true);
    const key = PageCache.keyOf('sk:ded:', 1);
    expect(await pages.getOrBuild(key, 60_000, async () => 'v1')).toEqual({ value: 'v1', hit: false });
    await waitUntil('the page written', async () => (await rawCache.exists(redisKey(key))) === 1, 2000);
    expect(await rawMain.exists(redisKey(key))).toBe(0);
    expect(await pages.getOrBuild(key, 60_000, async () => 'v2')).toEqual({ value: 'v1', hit: true });
    expect(String(await rawCache.client('LIST'))).toMatch(/ name=redis-pay:cache /);
  });

  it('with the cache Redis frozen (SIGSTOP), every call still returns the built value promptly and never throws; after it resumes, it caches again', async () => {
    const errorsBefore = await counter(t, 'page_cache_requests_total', { result: 'error' });
    process.kill(cache.pid!, 'SIGSTOP');
    try {
      const hot = PageCache.keyOf('sk:frozen:', 'hot');
      const build = counted(() => 'built', 5);
      for (let i = 0; i < 10; i++) {
        // One cold key per round and a burst on one hot key, all while the cache does not answer.
        const [results, ms] = await timed(() =>
          Promise.all([
            pages.getOrBuild(PageCache.keyOf('sk:frozen:', i), 60_000, build.fn),
            ...Array.from({ length: 20 }, () => pages.getOrBuild(hot, 60_000, build.fn)),
          ]),
        );
        expect(results.every((r) => r.value === 'built' && !r.hit)).toBe(true);
        expect(ms).toBeLessThan(600);
      }
      // One build per key per round: the cold key and the hot key's shared build.
      expect(build.calls).toBe(20);
      expect(await counter(t, 'page_cache_requests_total', { result: 'error' })).toBe(errorsBefore + 210);
      expect(await counter(t, 'cache_redis_errors_total', { op: 'get' })).toBeGreaterThanOrEqual(20);
    } finally {
      process.kill(cache.pid!, 'SIGCONT');
    }
    await cachesAgain('after-freeze');
  });

  it('with the cache Redis stopped, every call still returns the built value promptly and never throws; after it restarts, it caches again', async () => {
    await cache.stop();
    const build = counted(() => 'built', 5);
    for (let i = 0; i < 20; i++) {
      const [result, ms] = await timed(() => pages.getOrBuild(PageCache.keyOf('sk:down:', i % 3), 60_000, build.fn));
      expect(result).toEqual({ value: 'built', hit: false });
      expect(ms).toBeLessThan(600);
      await sleep(20);
    }
    expect(build.calls).toBe(20);
    expect(await counter(t, 'cache_redis_errors_total', { op: 'connection' })).toBeGreaterThan(0);
    await cache.start();
    await cachesAgain('after-restart');
  });
});
