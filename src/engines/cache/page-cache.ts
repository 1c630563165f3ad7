import { Injectable } from '@nestjs/common';
import { md5Hex } from '../../platform/core/digest';
import { KeyBuilder } from '../../platform/redis/key-builder';
import { CACHE_KEY_RE, cacheValueKey } from './cache.keys';
import { CacheMetrics, PageCacheResult } from './cache.metrics';
import { CacheRedis } from './cache-redis';

/** What `PageCache.keyOf` accepts as a prefix: up to 64 of letters, digits, `_ . : -` (no braces or whitespace). */
const PREFIX_RE = /^[A-Za-z0-9_.:-]{0,64}$/;

/** One lookup-and-build of one key, shared by every caller that asks for the key while it runs. */
/** A page: its JSON text, and the value when this flight built it. */
interface Page {
  json: string;
  value?: unknown;
}

interface Flight {
  promise: Promise<Page>;
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
    return prefix + md5Hex(JSON.stringify(inputs)).slice(8, 24);
  }

  /**
   * The value cached at `key` (`hit: true`), or the one `build` makes (`hit: false`), cached for `ttlMs`.
   * `key` must come from `PageCache.keyOf` (a malformed one is a TypeError). Rejects only with `build`'s error.
   */
  async getOrBuild<T>(key: string, ttlMs: number, build: () => Promise<T>): Promise<{ value: T; hit: boolean }> {
    const page = await this.page(key, ttlMs, build);
    if (page.value !== undefined) return { value: page.value as T, hit: page.hit };
    try {
      return { value: JSON.parse(page.json) as T, hit: page.hit };
    } catch {
      // Shaped like JSON but not JSON (not written by this cache): built for this caller; the next miss writes over it.
      return { value: await build(), hit: false };
    }
  }

  /**
   * As `getOrBuild`, answering the page as JSON text: a hit is handed on exactly as cached, never parsed, for a
   * caller that sends it as it is (a response body).
   */
  async getOrBuildJson<T>(key: string, ttlMs: number, build: () => Promise<T>): Promise<{ json: string; hit: boolean }> {
    const page = await this.page(key, ttlMs, build);
    return { json: page.json, hit: page.hit };
  }

  private async page(key: string, ttlMs: number, build: () => Promise<unknown>): Promise<Page & { hit: boolean }> {
    if (typeof key !== 'string' || !CACHE_KEY_RE.test(key)) throw new TypeError(`invalid cache key ${JSON.stringify(key)} (make it with PageCache.keyOf)`);
    if (!Number.isInteger(ttlMs) || ttlMs < 1) throw new TypeError(`invalid cache ttl ${ttlMs} ms`);
    let flight = this.flights.get(key);
    if (flight === undefined) {
      const started: Flight = { promise: Promise.resolve({ json: '' }) };
      started.promise = this.lookUpOrBuild(cacheValueKey(this.keys, key), ttlMs, build, started).finally(() => this.flights.delete(key));
      this.flights.set(key, started);
      flight = started;
    }
    try {
      return { ...(await flight.promise), hit: flight.result === 'hit' };
    } finally {
      if (flight.result !== undefined) this.metrics.requests.inc({ result: flight.result });
    }
  }

  private async lookUpOrBuild(redisKey: string, ttlMs: number, build: () => Promise<unknown>, flight: Flight): Promise<Page> {
    const cached = await this.cache.get(redisKey);
    // Pages are written as JSON.stringify of a value; a hit is taken as it is when it has the shape of one (an object,
    // an array or a string), and the value is parsed only by a caller that wants it. Anything else (written by
    // something else, or cut short) is rebuilt and written over.
    if (typeof cached === 'string' && looksLikeJson(cached)) {
      flight.result = 'hit';
      return { json: cached };
    }
    flight.result = typeof cached === 'string' || cached === undefined ? 'error' : 'miss';
    this.metrics.builds.inc();
    const value = await build();
    const json = JSON.stringify(value);
    // A cache that just failed or timed out is not written to (it is struggling); the next miss writes.
    if (cached !== undefined) void this.cache.set(redisKey, json, ttlMs);
    return { json, value };
  }
}

/** Whether a cached text can be what JSON.stringify wrote: an object, array or string by its first and last characters, or a JSON scalar. */
function looksLikeJson(text: string): boolean {
  const first = text[0];
  const last = text[text.length - 1];
  if (text.length >= 2 && ((first === '{' && last === '}') || (first === '[' && last === ']') || (first === '"' && last === '"'))) return true;
  // A number, true, false or null: short, so parsed to be sure.
  try {
    const v: unknown = JSON.parse(text);
    return typeof v !== 'object' || v === null;
  } catch {
    return false;
  }
}
