import { Injectable } from '@nestjs/common';
import { createHash } from 'node:crypto';
import { KeyBuilder } from '../redis/key-builder';
import { CACHE_KEY_RE, cacheValueKey } from './cache-keys';
import { CacheMetrics, PageCacheResult } from './cache.metrics';
import { CacheRedis } from './cache-redis';

/** What `PageCache.keyOf` accepts as a prefix: up to 64 of letters, digits, `_ . : -` (no braces or whitespace). */
const PREFIX_RE = /^[A-Za-z0-9_.:-]{0,64}$/;

/** One lookup-and-build of one key, shared by every caller that asks for the key while it runs. */
interface Flight {
  promise: Promise<unknown>;
  /** What the lookup came to, once known: counted once per caller. */
  result?: PageCacheResult;
}

/**
 * A read-through cache of whole rendered pages (or any JSON value) in the cache Redis (`CacheRedis`).
 *
 * `getOrBuild(key, ttlMs, build)` reads the key; on a hit it returns the cached value; otherwise it calls
 * `build` and writes the value back for `ttlMs` (without waiting for the write). Per instance, callers of
 * one key at a time share one lookup and one build (single-flight): a thousand requests for a cold page
 * make one GET and one build, not a thousand. A cache that fails or is slower than
 * `CACHE_COMMAND_TIMEOUT_MS` is a miss: the page is built and returned, and the caller never sees a cache
 * error. A build error is the caller's: it reaches every caller sharing that build, and nothing is cached.
 *
 * Values go through JSON: a hit returns `JSON.parse` of what was cached, so `T` should be plain JSON data.
 */
@Injectable()
export class PageCache {
  private readonly flights = new Map<string, Flight>();

  constructor(
    private readonly cache: CacheRedis,
    private readonly keys: KeyBuilder,
    private readonly metrics: CacheMetrics,
  ) {}

  /**
   * The cache key of a page: `prefix` and a 16-hex-character md5 of the inputs (the middle 16 of the 32
   * characters, `md5(JSON.stringify(inputs)).slice(8, 24)`), e.g. `keyOf('sk:list:', 'today', 1)`. Equal
   * inputs give equal keys (mind property order in objects). 64 bits of md5 leave a collision between two
   * of a million pages at about 1 in 4×10⁷; the short key is what a million cached pages save memory on.
   */
  static keyOf(prefix: string, ...inputs: unknown[]): string {
    if (typeof prefix !== 'string' || !PREFIX_RE.test(prefix)) throw new TypeError(`invalid cache key prefix ${JSON.stringify(prefix)}`);
    return prefix + createHash('md5').update(JSON.stringify(inputs)).digest('hex').slice(8, 24);
  }

  /**
   * The value cached at `key` (`hit: true`), or the one `build` makes (`hit: false`), cached for `ttlMs`.
   * `key` must come from `PageCache.keyOf` (a malformed one is a TypeError). Rejects only with `build`'s error.
   */
  async getOrBuild<T>(key: string, ttlMs: number, build: () => Promise<T>): Promise<{ value: T; hit: boolean }> {
    if (typeof key !== 'string' || !CACHE_KEY_RE.test(key)) throw new TypeError(`invalid cache key ${JSON.stringify(key)} (make it with PageCache.keyOf)`);
    if (!Number.isInteger(ttlMs) || ttlMs < 1) throw new TypeError(`invalid cache ttl ${ttlMs} ms`);
    let flight = this.flights.get(key);
    if (flight === undefined) {
      const started: Flight = { promise: Promise.resolve() };
      started.promise = this.lookUpOrBuild(cacheValueKey(this.keys, key), ttlMs, build, started).finally(() => this.flights.delete(key));
      this.flights.set(key, started);
      flight = started;
    }
    try {
      const value = (await flight.promise) as T;
      return { value, hit: flight.result === 'hit' };
    } finally {
      if (flight.result !== undefined) this.metrics.requests.inc({ result: flight.result });
    }
  }

  private async lookUpOrBuild<T>(redisKey: string, ttlMs: number, build: () => Promise<T>, flight: Flight): Promise<T> {
    const cached = await this.cache.get(redisKey);
    if (typeof cached === 'string') {
      try {
        const value = JSON.parse(cached) as T;
        flight.result = 'hit';
        return value;
      } catch {
        // Not JSON (written by something else, or cut short): rebuild it and write over it.
      }
    }
    flight.result = typeof cached === 'string' || cached === undefined ? 'error' : 'miss';
    this.metrics.builds.inc();
    const value = await build();
    // A cache that just failed or timed out is not written to (it is struggling); the next miss writes.
    const serialized = cached === undefined ? undefined : JSON.stringify(value);
    if (serialized !== undefined) void this.cache.set(redisKey, serialized, ttlMs);
    return value;
  }
}
