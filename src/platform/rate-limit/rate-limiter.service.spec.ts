import type { AppConfig } from '../config/app-config';
import { RateLimiter } from './rate-limiter.service';
import { loadConfig } from '../config/load-config';
import { MetricsService } from '../metrics/metrics.service';
import { KeyBuilder } from '../redis/key-builder';
import { RedisService } from '../redis/redis.service';
import type { ScriptRegistry } from '../scripts/script-registry.service';
import { type RateLimitLease, RateLimitScripts } from './rate-limit.scripts';

const config = { rateLimit: { windowMs: 1000, maxLease: 100 } } as unknown as AppConfig;
const caller = { kind: 'user' as const, id: 'acct_1' };

/** A RateLimitScripts whose leases answer with `reply` (a promise made per call), counting the calls. */
function scripts(reply: () => Promise<RateLimitLease>) {
  const calls: boolean[] = [];
  const fake = { keyOf: () => 'rl:key', lease: (_k: string, _l: number, _w: number, _want: number, opening: boolean) => (calls.push(opening), reply()) };
  return { fake: fake as unknown as RateLimitScripts, calls };
}

/** Microtask turns until `p` settles, once its Redis reply is there. */
async function turnsToSettle(p: Promise<unknown>): Promise<number> {
  let settled = false;
  p.then(
    () => (settled = true),
    () => (settled = true),
  );
  let turns = 0;
  while (!settled && turns < 50) {
    await Promise.resolve();
    turns++;
  }
  return turns;
}

describe(RateLimiter.name, () => {
  it("grants a new caller's first request from its first lease, and spends the rest of the lease locally", async () => {
    const { fake } = scripts(() => Promise.resolve({ granted: 10, remaining: 90, resetMs: 1000 }));
    const limiter = new RateLimiter(config, fake);
    const verdict = limiter.take(caller, 100);
    await expect(verdict).resolves.toEqual({ allowed: true, limit: 100, remaining: 99, resetMs: expect.any(Number) });
    // The rest of the lease is spent here, without Redis.
    expect(limiter.takeLocal(caller, 100)).toMatchObject({ allowed: true, remaining: 98 });
  });

  it("answers a new caller's first request within four microtask turns of Redis's reply to its SET NX (chained, not awaited layer by layer)", async () => {
    // A Redis that is never reached: the command connection's client is replaced below.
    const cfg = loadConfig({ NODE_ENV: 'test', JWT_SECRET: 'x'.repeat(32), REDIS_URL: 'redis://127.0.0.1:1' });
    const redis = new RedisService(cfg, new MetricsService());
    const set = jest.fn(() => Promise.resolve('OK'));
    Object.defineProperty(redis, 'client', { value: { set } });
    const limiter = new RateLimiter(cfg, new RateLimitScripts({} as ScriptRegistry, new KeyBuilder(cfg), redis));
    const verdict = limiter.take(caller, 100);
    const turns = await turnsToSettle(verdict);
    expect(turns).toBeLessThanOrEqual(4);
    expect(set).toHaveBeenCalledTimes(1);
    await expect(verdict).resolves.toMatchObject({ allowed: true });
  });

  it('lets concurrent first requests of one caller share one lease, and its failure', async () => {
    let fail!: (err: Error) => void;
    const { fake, calls } = scripts(() => new Promise((_, reject) => (fail = reject)));
    const limiter = new RateLimiter(config, fake);
    const all = Promise.allSettled([limiter.take(caller, 100), limiter.take(caller, 100), limiter.take(caller, 100)]);
    await Promise.resolve();
    fail(new Error('redis down'));
    const outcomes = await all;
    expect(calls).toEqual([true]);
    expect(outcomes.map((o) => (o.status === 'rejected' ? (o.reason as Error).message : o.status))).toEqual(['redis down', 'redis down', 'redis down']);
    // Nothing is left behind: the next request leases again.
    const again = limiter.take(caller, 100);
    fail(new Error('still down'));
    await expect(again).rejects.toThrow('still down');
    expect(calls).toEqual([true, true]);
  });

  it('refuses a new caller whose window another instance spent, with the time until it ends', async () => {
    const { fake } = scripts(() => Promise.resolve({ granted: 0, remaining: 0, resetMs: 400 }));
    const limiter = new RateLimiter(config, fake);
    const verdict = await limiter.take(caller, 100);
    expect(verdict).toMatchObject({ allowed: false, limit: 100, remaining: 0 });
    expect(verdict.resetMs).toBeGreaterThan(0);
    expect(verdict.resetMs).toBeLessThanOrEqual(450); // the window's 400 ms, from the moment the request came
  });
});
