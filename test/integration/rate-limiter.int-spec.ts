import Redis from 'ioredis';
import { loadConfig } from '../../src/platform/config/load-config';
import { MetricsService } from '../../src/platform/metrics/metrics.service';
import { KeyBuilder } from '../../src/platform/redis/key-builder';
import { RedisUnavailableError } from '../../src/platform/redis/redis-unavailable.error';
import { RedisService } from '../../src/platform/redis/redis.service';
import { RateLimitScripts } from '../../src/platform/rate-limit/rate-limit.scripts';
import { RateLimiter } from '../../src/platform/rate-limit/rate-limiter.service';
import { ScriptRegistry } from '../../src/platform/scripts/script-registry.service';
import { randomPrefix, RedisServerHandle, startRedisServer } from '../harness/redis-server';

/** One "instance": its own connection, registry and limiter, sharing Redis and the key prefix. */
async function instance(url: string, prefix: string, env: Record<string, string> = {}) {
  const config = loadConfig({ NODE_ENV: 'test', REDIS_URL: url, REDIS_KEY_PREFIX: prefix, REDIS_COMMAND_TIMEOUT_MS: '500', ...env });
  const metrics = new MetricsService();
  const redis = new RedisService(config, metrics);
  const scripts = new ScriptRegistry(redis);
  await redis.warmUp();
  await scripts.loadAll();
  const rateLimitScripts = new RateLimitScripts(scripts, new KeyBuilder(config), redis);
  const limiter = new RateLimiter(config, rateLimitScripts);
  return { limiter, rateLimitScripts, close: () => redis.close() };
}

describe(RateLimiter.name, () => {
  let server: RedisServerHandle;
  beforeAll(async () => {
    server = await startRedisServer();
  });
  afterAll(() => server.destroy());

  it('never grants more than the limit across five instances under concurrency, and grants all of it when demand exceeds it', async () => {
    const prefix = randomPrefix();
    const instances = await Promise.all(Array.from({ length: 5 }, () => instance(server.url, prefix, { RATE_LIMIT_WINDOW_MS: '20000' })));
    try {
      const limit = 200; // lease of 20 per instance
      const verdicts = await Promise.all(Array.from({ length: 1000 }, (_, i) => instances[i % 5].limiter.take({ kind: 'user', id: 'acc_burst' }, limit)));
      expect(verdicts.filter((v) => v.allowed)).toHaveLength(limit);
      const denied = verdicts.filter((v) => !v.allowed);
      expect(denied).toHaveLength(800);
      for (const v of denied) expect(v.resetMs).toBeGreaterThan(0);
    } finally {
      await Promise.all(instances.map((x) => x.close()));
    }
  });

  it('is exact for small limits: one request per Redis call', async () => {
    const prefix = randomPrefix();
    const [a, b] = [await instance(server.url, prefix), await instance(server.url, prefix)];
    try {
      const results: boolean[] = [];
      for (let i = 0; i < 7; i++) results.push((await (i % 2 ? a : b).limiter.take({ kind: 'user', id: 'acc_small' }, 5)).allowed);
      expect(results).toEqual([true, true, true, true, true, false, false]);
    } finally {
      await a.close();
      await b.close();
    }
  });

  it("opens a new caller's window with one SET NX and no script; a window another instance opened goes through the script and counts what both granted", async () => {
    const prefix = randomPrefix();
    const [a, b] = [await instance(server.url, prefix), await instance(server.url, prefix)];
    const raw = new Redis(server.url);
    const calls = async (cmd: string) =>
      Number(/calls=(\d+)/.exec((await raw.info('commandstats')).split('\n').find((l) => l.startsWith(`cmdstat_${cmd}:`)) ?? '')?.[1] ?? 0);
    try {
      const key = `${prefix}:rate-limit:{user:acc_new}:window`;
      const before = { evalsha: await calls('evalsha'), set: await calls('set') };
      expect((await a.limiter.take({ kind: 'user', id: 'acc_new' }, 30)).allowed).toBe(true);
      expect(await calls('evalsha')).toBe(before.evalsha);
      expect(await calls('set')).toBe(before.set + 1);
      // The counter holds a's whole lease (a tenth of the limit) and the window's expiry.
      expect(await raw.get(key)).toBe('3');
      expect(await raw.pttl(key)).toBeGreaterThan(0);
      // b knows no window: its SET NX finds a's, and the script grants from what is left.
      const seen = await b.limiter.take({ kind: 'user', id: 'acc_new' }, 30);
      expect(seen).toMatchObject({ allowed: true, remaining: 26 });
      expect(await calls('evalsha')).toBe(before.evalsha + 1);
      expect(await raw.get(key)).toBe('6');
    } finally {
      raw.disconnect();
      await a.close();
      await b.close();
    }
  });

  it('opens a new window when the old one ends', async () => {
    const x = await instance(server.url, randomPrefix(), { RATE_LIMIT_WINDOW_MS: '300' });
    try {
      expect((await x.limiter.take({ kind: 'user', id: 'acc_w' }, 1)).allowed).toBe(true);
      const denied = await x.limiter.take({ kind: 'user', id: 'acc_w' }, 1);
      expect(denied.allowed).toBe(false);
      await new Promise((r) => setTimeout(r, denied.resetMs + 50));
      expect((await x.limiter.take({ kind: 'user', id: 'acc_w' }, 1)).allowed).toBe(true);
    } finally {
      await x.close();
    }
  });

  it('repairs a spent counter that lost its expiry, so the caller is not blocked for good', async () => {
    const prefix = randomPrefix();
    const x = await instance(server.url, prefix);
    const raw = new Redis(server.url);
    try {
      const key = `${prefix}:rate-limit:{user:acc_stuck}:window`;
      await raw.set(key, '999'); // no TTL, over the limit
      expect((await x.limiter.take({ kind: 'user', id: 'acc_stuck' }, 5)).allowed).toBe(false);
      const ttl = await raw.pttl(key);
      expect(ttl).toBeGreaterThan(0);
      expect(ttl).toBeLessThanOrEqual(1000);
    } finally {
      raw.disconnect();
      await x.close();
    }
  });

  it('keeps callers apart', async () => {
    const x = await instance(server.url, randomPrefix());
    try {
      expect((await x.limiter.take({ kind: 'user', id: 'acc_1' }, 1)).allowed).toBe(true);
      expect((await x.limiter.take({ kind: 'user', id: 'acc_1' }, 1)).allowed).toBe(false);
      expect((await x.limiter.take({ kind: 'user', id: 'acc_2' }, 1)).allowed).toBe(true);
      expect((await x.limiter.take({ kind: 'service', id: 'billing' }, 1)).allowed).toBe(true);
    } finally {
      await x.close();
    }
  });

  it('fails with RedisUnavailableError (a 503) when it needs Redis and Redis is down', async () => {
    const x = await instance(server.url, randomPrefix());
    await server.stop();
    try {
      await expect(x.limiter.take({ kind: 'user', id: 'acc_down' }, 5)).rejects.toBeInstanceOf(RedisUnavailableError);
    } finally {
      await server.start();
      await x.close();
    }
  });

  it('with Redis hung, concurrent requests of one caller share the one lease request and its 503, instead of each timing out in turn', async () => {
    const x = await instance(server.url, randomPrefix());
    const lease = x.rateLimitScripts.lease.bind(x.rateLimitScripts);
    let leaseCalls = 0;
    x.rateLimitScripts.lease = (...args: Parameters<typeof lease>) => {
      leaseCalls++;
      return lease(...args);
    };
    process.kill(server.pid!, 'SIGSTOP');
    try {
      const outcomes = await Promise.allSettled(Array.from({ length: 8 }, () => x.limiter.take({ kind: 'user', id: 'acc_hung' }, 50)));
      for (const o of outcomes) {
        expect(o.status).toBe('rejected');
        expect((o as PromiseRejectedResult).reason).toBeInstanceOf(RedisUnavailableError);
      }
      expect(leaseCalls).toBe(1);
    } finally {
      process.kill(server.pid!, 'SIGCONT');
      await x.close();
    }
    // Redis back: the caller is served again.
    const y = await instance(server.url, randomPrefix());
    try {
      expect((await y.limiter.take({ kind: 'user', id: 'acc_hung' }, 50)).allowed).toBe(true);
    } finally {
      await y.close();
    }
  });
});
