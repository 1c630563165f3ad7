import type { KeyShape } from '../../platform/redis/key-shape';
import { CACHE_KEY_RE, CACHE_KEYS, cacheValueKey } from './cache.keys';

/** The caches' keys, for the key-space proof (src/platform/redis/key-space.spec.ts). */
export const KEY_SHAPES: KeyShape[] = [
  {
    name: 'cached value',
    space: CACHE_KEYS,
    kind: 'c',
    part: 'v',
    rules: [CACHE_KEY_RE],
    make: (b, [cacheKey]) => cacheValueKey(b, cacheKey),
    carries: ([cacheKey]) => ({ id: cacheKey }),
  },
];
