import { createHash } from 'node:crypto';
import fc from 'fast-check';
import type { AppConfig } from '../../platform/config/app-config';
import { KeyBuilder } from '../../platform/redis/key-builder';
import { CACHE_KEY_RE, cacheValueKey } from './cache.keys';
import { PageCache } from './page-cache';

describe('PageCache.keyOf', () => {
  it('is the prefix and the middle 16 hex characters of md5(JSON.stringify(inputs))', () => {
    const md5 = createHash('md5')
      .update(JSON.stringify(['today', 1]))
      .digest('hex');
    const key = PageCache.keyOf('sk:list:', 'today', 1);
    expect(key).toBe(`sk:list:${md5.slice(8, 24)}`);
    expect(key.slice('sk:list:'.length)).toMatch(/^[0-9a-f]{16}$/);
    expect(PageCache.keyOf('')).toMatch(/^[0-9a-f]{16}$/);
  });

  it('is 16 hex characters after the prefix, the same for equal inputs and a valid cache key (property check)', () => {
    fc.assert(
      fc.property(fc.stringMatching(/^[A-Za-z0-9_.:-]{0,64}$/), fc.array(fc.jsonValue(), { maxLength: 4 }), (prefix, inputs) => {
        const key = PageCache.keyOf(prefix, ...inputs);
        expect(key.startsWith(prefix)).toBe(true);
        expect(key.slice(prefix.length)).toMatch(/^[0-9a-f]{16}$/);
        expect(PageCache.keyOf(prefix, ...(JSON.parse(JSON.stringify(inputs)) as unknown[]))).toBe(key);
        expect(CACHE_KEY_RE.test(key)).toBe(true);
      }),
    );
  });

  it('differs for different inputs', () => {
    const keys = [
      PageCache.keyOf('p:', 'today', 1),
      PageCache.keyOf('p:', 'today', 2),
      PageCache.keyOf('p:', 'today', '1'),
      PageCache.keyOf('p:', 'today'),
      PageCache.keyOf('p:', ['today', 1]),
      PageCache.keyOf('p:', { day: 'today', page: 1 }),
      PageCache.keyOf('p:'),
    ];
    expect(new Set(keys).size).toBe(keys.length);
    const many = new Set(Array.from({ length: 10_000 }, (_, i) => PageCache.keyOf('p:', i)));
    expect(many.size).toBe(10_000);
  });

  it('refuses a prefix that could not be part of a key (braces, whitespace, over 64 characters)', () => {
    for (const bad of ['{x}', 'a b', 'x'.repeat(65), 'tab\t']) expect(() => PageCache.keyOf(bad, 1)).toThrow(TypeError);
  });

  it('makes a short Redis key under the cache key space', () => {
    const builder = new KeyBuilder({ redis: { keyPrefix: 'rp' } } as AppConfig);
    const key = PageCache.keyOf('sk:', 1);
    expect(cacheValueKey(builder, key)).toBe(`rp:cache:{c:${key}}:v`);
    expect(builder.parse(cacheValueKey(builder, key))).toEqual({ feature: 'cache', kind: 'c', id: key, part: 'v' });
  });
});
