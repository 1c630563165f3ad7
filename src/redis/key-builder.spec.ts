import { loadConfig } from '../config/load-config';
import { KeyBuilder, TaggedKeys } from './key-builder';

// cluster-key-slot ships without types; it is the slot function ioredis itself uses.
const calculateSlot = require('cluster-key-slot') as (key: string) => number;

const builder = (prefix = 'rp') => new KeyBuilder(loadConfig({ NODE_ENV: 'test', REDIS_KEY_PREFIX: prefix }));

/** Small deterministic PRNG (mulberry32) so the property check is reproducible. */
function rng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

// Everything a tag or part may contain: no braces, no whitespace. Includes ':' and non-ASCII.
const ALPHABET = [...'abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789:._-/@#$%^&*()[]<>|=+~', 'é', 'ß', '字', '🙂'];
const randomString = (next: () => number, min: number, max: number) => {
  const len = min + Math.floor(next() * (max - min + 1));
  let s = '';
  for (let i = 0; i < len; i++) s += ALPHABET[Math.floor(next() * ALPHABET.length)];
  return s;
};

describe(KeyBuilder.name, () => {
  it('takes its prefix from the configuration', () => {
    expect(builder().prefix).toBe('rp');
    expect(builder('shop-1').prefix).toBe('shop-1');
  });

  it('builds keys as prefix:feature:{tag}:part', () => {
    const keys = builder().tagged('seckill', 'sale42');
    expect(keys).toBeInstanceOf(TaggedKeys);
    expect(keys.key('stock')).toBe('rp:seckill:{sale42}:stock');
    expect(keys.key('buyers:set')).toBe('rp:seckill:{sale42}:buyers:set');
    expect(keys.head).toBe('rp:seckill:{sale42}:');
  });

  it('uses the configured prefix', () => {
    expect(builder('shop-1.v2').tagged('auth', 'm:merchant_1').key('nonce:abc')).toBe('shop-1.v2:auth:{m:merchant_1}:nonce:abc');
  });

  it('every key starts with head', () => {
    const keys = builder().tagged('wallet', 'acct-9');
    for (const part of ['balance', 'ledger', 'x']) expect(keys.key(part).startsWith(keys.head)).toBe(true);
  });

  describe('feature names', () => {
    it.each(['a', 'seckill', 'rate-limit', 'v2', `a${'b'.repeat(31)}`])('accepts %j', (feature) => {
      expect(builder().tagged(feature, 't').key('p')).toBe(`rp:${feature}:{t}:p`);
    });

    it.each(['', 'Seckill', '1abc', '-abc', 'a_b', 'a.b', 'a:b', 'a{b}', 'a b', 'a\n', `a${'b'.repeat(32)}`])('rejects %j', (feature) => {
      expect(() => builder().tagged(feature, 't')).toThrow(TypeError);
      expect(() => builder().tagged(feature, 't')).toThrow(`invalid feature ${JSON.stringify(feature)}`);
    });
  });

  describe('tags', () => {
    it.each(['x', 'm:merchant_1', 'user@example.com', '字', 't'.repeat(128)])('accepts %j', (tag) => {
      expect(builder().tagged('f', tag).head).toBe(`rp:f:{${tag}}:`);
    });

    it.each(['', '{', '}', 'a{b', 'a}b', '{a}', 'a b', ' a', 'a\t', 'a\nb', 'a\u00a0b', 't'.repeat(129)])('rejects %j', (tag) => {
      expect(() => builder().tagged('f', tag)).toThrow(TypeError);
      expect(() => builder().tagged('f', tag)).toThrow(`invalid key tag ${JSON.stringify(tag)}`);
    });
  });

  describe('parts', () => {
    const keys = builder().tagged('f', 'tag');

    it.each(['p', 'nonce:abc', 'a/b', 'p'.repeat(256)])('accepts %j', (part) => {
      expect(keys.key(part)).toBe(`rp:f:{tag}:${part}`);
    });

    it.each(['', '{', '}', '{x}', 'a}', 'a b', '\t', 'a\r\n', 'p'.repeat(257)])('rejects %j', (part) => {
      expect(() => keys.key(part)).toThrow(TypeError);
      expect(() => keys.key(part)).toThrow(`invalid key part ${JSON.stringify(part)}`);
    });
  });

  describe('cluster slots', () => {
    it('puts every key of one tagged() group in the slot of its tag (property check)', () => {
      const next = rng(0xc0ffee);
      const features = ['seckill', 'auth', 'rate-limit', 'wallet', 'x'];
      const prefixes = ['rp', 'shop-1.v2', 'A_b'];
      let checked = 0;
      for (let i = 0; i < 300; i++) {
        const prefix = prefixes[i % prefixes.length];
        const feature = features[i % features.length];
        const tag = randomString(next, 1, 40);
        const keys = builder(prefix).tagged(feature, tag);
        const slot = calculateSlot(tag);
        for (let j = 0; j < 8; j++) {
          const key = keys.key(randomString(next, 1, 60));
          expect(calculateSlot(key)).toBe(slot);
          checked++;
        }
        expect(calculateSlot(keys.head + 'x')).toBe(slot);
      }
      expect(checked).toBe(2400);
    });

    it('the check is meaningful: the same keys without a hash tag spread over many slots', () => {
      const next = rng(42);
      const slots = new Set<number>();
      for (let j = 0; j < 50; j++) slots.add(calculateSlot(`rp:seckill:sale42:${randomString(next, 1, 30)}`));
      expect(slots.size).toBeGreaterThan(40);
    });

    it('keys of different tags usually land in different slots', () => {
      const kb = builder();
      const slots = new Set(Array.from({ length: 100 }, (_, i) => calculateSlot(kb.tagged('seckill', `sale${i}`).key('stock'))));
      expect(slots.size).toBeGreaterThan(90);
    });
  });
});
