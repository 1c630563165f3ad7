import { defineKeySpace, KeyBuilder } from '../../platform/redis/key-builder';

/**
 * The caches' keys: one cached value per tag, `{c:<cache key>}`, where the cache key is
 * `PageCache.keyOf(prefix, ...inputs)`: the caller's prefix and a 16-hex-character md5.
 */
export const CACHE_KEYS = defineKeySpace('cache', { c: 'id' });

/**
 * A cache key as `PageCache.keyOf` makes it: a short prefix (letters, digits, `_ . : -`, up to 64) and 16
 * lower-case hex characters. No braces or whitespace, so it is a valid tag id.
 */
export const CACHE_KEY_RE = /^[A-Za-z0-9_.:-]{0,64}[0-9a-f]{16}$/;

/**
 * The Redis key of one cached value: `rp:cache:{c:<cache key>}:v`, e.g. `rp:cache:{c:sk:list:1f0c…}:v`.
 *
 * Kept as short as the key conventions allow, since a cache may hold a million pages and every byte of
 * key is paid per page (in the key and in Redis's dictionary entry): the cache key is only the caller's
 * prefix and 16 hex characters (not the inputs, not a full 32-character md5), the kind is one letter, and
 * the part (which the builder requires) is one letter too. The cache key is the tag's id, not a part under
 * one fixed tag, so on Redis Cluster the pages spread over every slot instead of all landing on one node.
 */
export function cacheValueKey(builder: KeyBuilder, cacheKey: string): string {
  return builder.tagged(CACHE_KEYS, 'c', cacheKey).key('v');
}
