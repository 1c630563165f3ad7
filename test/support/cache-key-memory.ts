import { createHash } from 'node:crypto';
import Redis from 'ioredis';
import { forEachLimit } from '../../src/platform/core/for-each-limit';
import { memoryUsage, usedMemory } from '../../bench/lib/redis-memory';

/**
 * Redis memory of cached listing pages keyed by an md5 of the query, with the
 * digest cut to 16 hex characters or kept at 32: the seckill article in
 * shared/seeds reports about 130 MB for 1,000,000 keys with 16-character
 * digests and 32-character values, and about 160 MB with 32-character digests.
 *
 * Each variant is loaded into the given redis-server, flushed first, with
 * pipelined SETs, and measured two ways: the INFO used_memory delta
 * over the load (every byte the keys cost, the main dictionary's buckets and
 * the allocator's rounding included) and MEMORY USAGE … SAMPLES 0 of a sample
 * of keys (what Redis attributes to one key).
 */

/** Options of {@link measureCacheKeyMemory}. */
export interface CacheKeyMemoryOptions {
  /** Keys per variant (default 1,000,000). */
  keys: number;
  /** Key prefix, the same for both variants (default `rp:seckill:list:`, 16 characters). */
  prefix: string;
  /** Length of each cached value in bytes (default 32, as in the article). */
  valueBytes: number;
  /** TTL of each key in seconds (SET … EX); 0: no TTL (default), as the article's figure. A TTL adds an expires-dictionary entry per key. */
  ttlSeconds: number;
  /** Keys whose MEMORY USAGE is read, spread evenly over the key space (default 1,000). */
  sample: number;
  /** Keys per pipeline (default 5,000: SET … EX each, or MSETs of 500 keys without a TTL) and pipelines in flight (default 4). */
  pipeline: number;
  inFlight: number;
  /** The Redis to load; it is FLUSHALLed before each variant. */
  redisUrl?: string;
}

export const DEFAULT_CACHE_KEY_MEMORY: CacheKeyMemoryOptions = {
  keys: 1_000_000,
  prefix: 'rp:seckill:list:',
  valueBytes: 32,
  ttlSeconds: 0,
  sample: 1000,
  pipeline: 5000,
  inFlight: 4,
};

/** One variant's figures. */
export interface CacheKeyVariant {
  hexChars: 16 | 32;
  /** Example key. */
  exampleKey: string;
  /** used_memory after the load minus before it. */
  bytes: number;
  perKey: number;
  /** Mean MEMORY USAGE … SAMPLES 0 of the sampled keys. */
  memoryUsagePerKey: number;
  /** Seconds the load took. */
  loadS: number;
  /** DBSIZE after the load (equals `keys` unless two queries' digests collided). */
  dbsize: number;
}

/** The result: the brief's figures on top, then each variant in full. */
export interface CacheKeyMemoryResult {
  keys: number;
  /** used_memory delta of the 16-hex variant, bytes. */
  bytes16: number;
  /** used_memory delta of the 32-hex variant, bytes. */
  bytes32: number;
  perKey16: number;
  perKey32: number;
  /** bytes32 / bytes16. */
  ratio: number;
  variants: [CacheKeyVariant, CacheKeyVariant];
  prefix: string;
  valueBytes: number;
  ttlSeconds: number;
  redisVersion: string;
}

/** The JSON of listing query `i`, as the article's key builder serialises its arguments (user id, query, paging). */
export const listingQueryJson = (i: number) =>
  JSON.stringify([
    100_000 + (i % 50_000),
    { category: `c${i % 37}`, keyword: `k${i % 1013}`, sort: i % 2 ? 'price' : 'time' },
    { page: 1 + (i % 20), size: 20, n: i },
  ]);

/** Keys per MSET when no TTL is asked for. */
const MSET_PAIRS = 500;

const md5 = (s: string) => createHash('md5').update(s).digest('hex');

/** The cache key of query `i`: the prefix and the md5 of its JSON, 32 hex characters or the middle 16 (as the common md5_16 does). */
export function cacheKey(prefix: string, i: number, hexChars: 16 | 32): string {
  const digest = md5(listingQueryJson(i));
  return prefix + (hexChars === 16 ? digest.slice(8, 24) : digest);
}

/** A value of exactly `bytes` ASCII bytes, different per key. */
const cacheValue = (i: number, bytes: number) =>
  md5(`v${i}`)
    .repeat(Math.ceil(bytes / 32))
    .slice(0, bytes);

async function measureVariant(url: string, hexChars: 16 | 32, o: CacheKeyMemoryOptions, flush: boolean): Promise<CacheKeyVariant> {
  const r = new Redis(url, { maxRetriesPerRequest: 1 });
  try {
    if (flush) await r.flushall();
    const before = await usedMemory(r);
    const t0 = performance.now();
    const batches = Math.ceil(o.keys / o.pipeline);
    await forEachLimit(batches, o.inFlight, async (b) => {
      const p = r.pipeline();
      // Without a TTL, one MSET per MSET_PAIRS keys (far less parsing on both sides than one SET each).
      let pairs: string[] = [];
      for (let i = b * o.pipeline; i < Math.min(o.keys, (b + 1) * o.pipeline); i++) {
        const key = cacheKey(o.prefix, i, hexChars);
        if (o.ttlSeconds > 0) p.set(key, cacheValue(i, o.valueBytes), 'EX', o.ttlSeconds);
        else if (pairs.push(key, cacheValue(i, o.valueBytes)) >= 2 * MSET_PAIRS) {
          p.mset(...pairs);
          pairs = [];
        }
      }
      if (pairs.length > 0) p.mset(...pairs);
      for (const [err] of (await p.exec()) ?? []) if (err) throw err;
    });
    const loadS = (performance.now() - t0) / 1000;
    const bytes = (await usedMemory(r)) - before;
    const dbsize = await r.dbsize();
    const n = Math.min(o.sample, o.keys);
    const sampled = Array.from({ length: n }, (_, s) => cacheKey(o.prefix, Math.floor((s * o.keys) / n), hexChars));
    const usage = (await memoryUsage(r, sampled, () => 'all')).get('all') ?? 0;
    return { hexChars, exampleKey: cacheKey(o.prefix, 0, hexChars), bytes, perKey: bytes / o.keys, memoryUsagePerKey: n > 0 ? usage / n : NaN, loadS, dbsize };
  } finally {
    r.disconnect();
  }
}

/**
 * Loads `keys` cached listing pages with 16-hex-character digests, then the
 * same pages with 32-hex-character digests, each into the given redis-server
 * (flushed first), and returns the used_memory delta of
 * each, per key and their ratio. Takes a few seconds per million keys.
 */
export async function measureCacheKeyMemory(options: Partial<CacheKeyMemoryOptions> & { redisUrl: string }): Promise<CacheKeyMemoryResult> {
  const o = { ...DEFAULT_CACHE_KEY_MEMORY, ...options };
  const variants: CacheKeyVariant[] = [];
  let redisVersion: string;
  for (const hexChars of [16, 32] as const) variants.push(await measureVariant(o.redisUrl, hexChars, o, true));
  const r = new Redis(o.redisUrl, { maxRetriesPerRequest: 1 });
  try {
    redisVersion = /redis_version:(\S+)/.exec(await r.info('server'))?.[1] ?? 'unknown';
    await r.flushall();
  } finally {
    r.disconnect();
  }
  const [v16, v32] = variants as [CacheKeyVariant, CacheKeyVariant];
  return {
    keys: o.keys,
    bytes16: v16.bytes,
    bytes32: v32.bytes,
    perKey16: v16.perKey,
    perKey32: v32.perKey,
    ratio: v32.bytes / v16.bytes,
    variants: [v16, v32],
    prefix: o.prefix,
    valueBytes: o.valueBytes,
    ttlSeconds: o.ttlSeconds,
    redisVersion,
  };
}
