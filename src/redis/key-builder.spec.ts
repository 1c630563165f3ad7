import fc from 'fast-check';
import { loadConfig } from '../config/load-config';
import type { AppConfig } from '../config/app-config';
import { KeyBuilder, TAG_KINDS, type Feature, type TaggedKeys } from './key-builder';

// cluster-key-slot ships without types; it is the slot function ioredis itself uses.
const calculateSlot = require('cluster-key-slot') as (key: string) => number;

const builder = (prefix = 'rp') => new KeyBuilder(loadConfig({ NODE_ENV: 'test', REDIS_KEY_PREFIX: prefix }));
/** Calls tagged() the way no typed caller can (unknown features and kinds, ids where none belong). */
const untyped = (kb: KeyBuilder, ...args: unknown[]) => (kb.tagged as (...a: unknown[]) => TaggedKeys)(...args);

/** Everything a tag id or part id may contain: no braces, no whitespace. Includes ':' and non-ASCII. */
const idChar = fc.constantFrom(...'abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789:._-/@#$%^&*()[]<>|=+~', 'é', 'ß', '字', '🙂');
const anyId = (max: number) => fc.array(idChar, { minLength: 1, maxLength: max }).map((cs) => cs.join(''));
/** Every (feature, kind) of TAG_KINDS with whether it takes an id. */
const ALL_KINDS = Object.entries(TAG_KINDS).flatMap(([feature, kinds]) => Object.entries(kinds).map(([kind, arity]) => ({ feature: feature as Feature, kind, arity })));

describe(KeyBuilder.name, () => {
  it('takes its prefix from the configuration, and refuses one that would break the layout', () => {
    expect(builder().prefix).toBe('rp');
    expect(builder('shop-1').prefix).toBe('shop-1');
    for (const prefix of ['', 'a:b', 'a{b', 'a}b', 'a b']) {
      expect(() => new KeyBuilder({ redis: { keyPrefix: prefix } } as AppConfig)).toThrow(`invalid key prefix ${JSON.stringify(prefix)}`);
    }
  });

  it('builds keys as prefix:feature:{kind:id}:part, and {kind} for a fixed kind', () => {
    const inbox = builder().tagged('msg', 'a', 'acc_1');
    expect(inbox.key('inbox')).toBe('rp:msg:{a:acc_1}:inbox');
    expect(builder().tagged('msg', 'bc').key('stream')).toBe('rp:msg:{bc}:stream');
    expect(builder('shop-1.v2').tagged('auth', 'm', 'merchant_1').key('nonce', 'abc')).toBe('shop-1.v2:auth:{m:merchant_1}:nonce:abc');
    expect(builder().tagged('ord', 's', '3').key('order', 'ord_1')).toBe('rp:ord:{s:3}:order:ord_1');
  });

  it('knows only the features and kinds of TAG_KINDS, and an id exactly where the kind takes one', () => {
    const kb = builder();
    expect(() => untyped(kb, 'seckill', 'a', 'x')).toThrow('invalid feature "seckill"');
    expect(() => untyped(kb, 'constructor', 'a', 'x')).toThrow('invalid feature "constructor"');
    expect(() => untyped(kb, 'msg', 'broadcast')).toThrow('invalid key kind "broadcast" of msg');
    expect(() => untyped(kb, 'msg', 'toString', 'x')).toThrow('invalid key kind "toString" of msg');
    expect(() => untyped(kb, 'msg', 'bc', 'x')).toThrow('key kind msg/bc takes no id');
    expect(() => untyped(kb, 'msg', 'a')).toThrow('invalid key tag id undefined');
    // The type system says the same: an id kind needs its id, a fixed kind takes none.
    // @ts-expect-error a fixed kind takes no id
    expect(() => kb.tagged('msg', 'bc', 'x')).toThrow(TypeError);
    // @ts-expect-error an id kind needs its id
    expect(() => kb.tagged('msg', 'a')).toThrow(TypeError);
  });

  it('every kind name is a plain word without ":", so the kind is what precedes the first ":" of a tag', () => {
    for (const { kind } of ALL_KINDS) expect(kind).toMatch(/^[a-z][a-z0-9-]*$/);
    for (const feature of Object.keys(TAG_KINDS)) expect(feature).toMatch(/^[a-z][a-z0-9-]*$/);
  });

  describe('tag ids', () => {
    it.each(['x', 'm:merchant_1', 'user@example.com', '字', 't'.repeat(128), 'bc', 'a:b'])('accepts %j', (id) => {
      expect(builder().tagged('lock', 'n', id).key('h')).toBe(`rp:lock:{n:${id}}:h`);
    });

    it.each(['', '{', '}', 'a{b', 'a}b', '{a}', 'a b', ' a', 'a\t', 'a\nb', 'a\u00a0b', 't'.repeat(129)])('rejects %j', (id) => {
      expect(() => builder().tagged('lock', 'n', id)).toThrow(TypeError);
      expect(() => builder().tagged('lock', 'n', id)).toThrow(`invalid key tag id ${JSON.stringify(id)}`);
    });
  });

  describe('parts', () => {
    const keys = builder().tagged('diagnostics', 'a', 'tag');

    it.each([
      [['p'], 'p'],
      [['nonce', 'abc'], 'nonce:abc'],
      [['dead-events'], 'dead-events'],
      [['visits', 'a:b/c'], 'visits:a:b/c'],
      [['p', 'x'.repeat(256)], `p:${'x'.repeat(256)}`],
    ])('accepts %j', (args, part) => {
      expect(keys.key(...(args as [string, string?]))).toBe(`rp:diagnostics:{a:tag}:${part}`);
    });

    it.each(['', 'P', '1p', 'a:b', 'a_b', '{x}', 'a b', 'p'.repeat(33)])('rejects the part name %j', (part) => {
      expect(() => keys.key(part)).toThrow(`invalid key part ${JSON.stringify(part)}`);
    });

    it.each(['', '{', '}', 'a b', '\t', 'a\r\n', 'p'.repeat(257)])('rejects the part id %j', (id) => {
      expect(() => keys.key('p', id)).toThrow(`invalid key part id ${JSON.stringify(id)}`);
    });
  });

  describe('parse', () => {
    it('takes apart what tagged().key() builds, for every kind and any ids (property check)', () => {
      const kb = builder('shop-1.v2');
      fc.assert(
        fc.property(fc.constantFrom(...ALL_KINDS), anyId(128), fc.constantFrom('h', 'inbox', 'dead-events', 'x1'), fc.option(anyId(256), { nil: undefined }), (k, id, part, partId) => {
          const tagged = k.arity === 'id' ? untyped(kb, k.feature, k.kind, id) : untyped(kb, k.feature, k.kind);
          const key = tagged.key(part, partId);
          expect(kb.parse(key)).toEqual({ feature: k.feature, kind: k.kind, ...(k.arity === 'id' ? { id } : {}), part, ...(partId === undefined ? {} : { partId }) });
        }),
        { numRuns: 2000 },
      );
    });

    it.each([
      'other:msg:{a:x}:inbox',
      'rp:msg:{x}:inbox',
      'rp:msg:{bc:x}:stream',
      'rp:msg:{broadcast}:bodies',
      'rp:nope:{a:x}:inbox',
      'rp:msg:{a:x}:Inbox',
      'rp:msg:{a:x}',
      'rp:msg:a:x:inbox',
      'rp:msg:{a:x}:inbox:',
      'rp:msg:{a:}:inbox',
    ])('refuses %j, which no call builds', (key) => {
      expect(builder().parse(key)).toBeUndefined();
    });
  });

  describe('cluster slots', () => {
    it('puts every key under one tag in the slot of that tag, `<kind>:<id>` or `<kind>` (property check)', () => {
      fc.assert(
        fc.property(fc.constantFrom('rp', 'shop-1.v2', 'A_b'), fc.constantFrom(...ALL_KINDS), anyId(40), fc.array(anyId(60), { minLength: 1, maxLength: 8 }), (prefix, k, id, partIds) => {
          const tagged = k.arity === 'id' ? untyped(builder(prefix), k.feature, k.kind, id) : untyped(builder(prefix), k.feature, k.kind);
          const slot = calculateSlot(k.arity === 'id' ? `${k.kind}:${id}` : k.kind);
          expect(calculateSlot(tagged.key('p'))).toBe(slot);
          for (const partId of partIds) expect(calculateSlot(tagged.key('p', partId))).toBe(slot);
        }),
        { numRuns: 500 },
      );
    });

    it('the check is meaningful: the same keys without a hash tag spread over many slots', () => {
      const slots = new Set(Array.from({ length: 50 }, (_, i) => calculateSlot(`rp:msg:a:acc_1:visits:${i}`)));
      expect(slots.size).toBeGreaterThan(40);
    });

    it('keys of different tags usually land in different slots', () => {
      const kb = builder();
      const slots = new Set(Array.from({ length: 100 }, (_, i) => calculateSlot(kb.tagged('msg', 'a', `acc${i}`).key('inbox'))));
      expect(slots.size).toBeGreaterThan(90);
    });
  });
});
