import fc from 'fast-check';
import { loadConfig } from '../config/load-config';
import type { AppConfig } from '../config/app-config';
import { AUTH_KEYS } from '../auth/auth.keys';
import { DIAGNOSTICS_KEYS } from '../diagnostics/diagnostics.keys';
import { DELAY_QUEUE_KEYS } from '../../engines/delay-queue/delay-queue.keys';
import { LOCK_KEYS } from '../../engines/locks/lock.keys';
import { MESSAGE_KEYS } from '../../features/messages/message.keys';
import { ORDER_KEYS } from '../../features/orders/order.keys';
import { RATE_LIMIT_KEYS } from '../rate-limit/rate-limit.keys';
import { defineKeySpace, KeyBuilder, keySpaces, type TaggedKeys } from './key-builder';

// cluster-key-slot ships without types; it is the slot function ioredis itself uses.
const calculateSlot = require('cluster-key-slot') as (key: string) => number;

const builder = (prefix = 'rp') => new KeyBuilder(loadConfig({ NODE_ENV: 'test', REDIS_KEY_PREFIX: prefix }));
/** Calls tagged() the way no typed caller can (unknown features and kinds, ids where none belong). */
const untyped = (kb: KeyBuilder, ...args: unknown[]) => (kb.tagged as (...a: unknown[]) => TaggedKeys)(...args);

/** Everything a tag id or part id may contain: no braces, no whitespace. Includes ':' and non-ASCII. */
const idChar = fc.constantFrom(...'abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789:._-/@#$%^&*()[]<>|=+~', 'é', 'ß', '字', '🙂');
const anyId = (max: number) => fc.array(idChar, { minLength: 1, maxLength: max }).map((cs) => cs.join(''));
/** Every (space, kind) declared by the keys files imported above, with whether it takes an id. */
const ALL_KINDS = keySpaces().flatMap((space) => Object.entries(space.kinds).map(([kind, arity]) => ({ space, feature: space.feature, kind, arity })));

describe(KeyBuilder.name, () => {
  it('takes its prefix from the configuration, and refuses one that would break the layout', () => {
    expect(builder().prefix).toBe('rp');
    expect(builder('shop-1').prefix).toBe('shop-1');
    for (const prefix of ['', 'a:b', 'a{b', 'a}b', 'a b']) {
      expect(() => new KeyBuilder({ redis: { keyPrefix: prefix } } as AppConfig)).toThrow(`invalid key prefix ${JSON.stringify(prefix)}`);
    }
  });

  it('builds keys as prefix:feature:{kind:id}:part, and {kind} for a fixed kind', () => {
    const inbox = builder().tagged(MESSAGE_KEYS, 'a', 'acc_1');
    expect(inbox.key('inbox')).toBe('rp:messages:{a:acc_1}:inbox');
    expect(builder().tagged(MESSAGE_KEYS, 'bc').key('stream')).toBe('rp:messages:{bc}:stream');
    expect(builder('shop-1.v2').tagged(AUTH_KEYS, 'm', 'merchant_1').key('nonce', 'abc')).toBe('shop-1.v2:auth:{m:merchant_1}:nonce:abc');
    expect(builder().tagged(ORDER_KEYS, 's', '3').key('order', 'ord_1')).toBe('rp:orders:{s:3}:order:ord_1');
    expect(builder().tagged(DELAY_QUEUE_KEYS, 'reg').key('queues')).toBe('rp:delay-queue:{reg}:queues');
    expect(builder().tagged(RATE_LIMIT_KEYS, 'user', 'acc_1').key('window')).toBe('rp:rate-limit:{user:acc_1}:window');
    expect(builder().tagged(LOCK_KEYS, 'n', 'x').key('h')).toBe('rp:locks:{n:x}:h');
    expect(builder().tagged(DIAGNOSTICS_KEYS, 'a', 'acc_1').key('visits', 'home')).toBe('rp:diagnostics:{a:acc_1}:visits:home');
  });

  it('names each feature as a word, after its module folder', () => {
    expect(
      keySpaces()
        .map((s) => s.feature)
        .sort(),
    ).toEqual(['auth', 'delay-queue', 'diagnostics', 'locks', 'messages', 'orders', 'rate-limit']);
  });

  it('knows only the declared key spaces and their kinds, and an id exactly where the kind takes one', () => {
    const kb = builder();
    expect(() => untyped(kb, 'seckill', 'a', 'x')).toThrow('unknown key space "seckill"');
    expect(() => untyped(kb, undefined, 'a', 'x')).toThrow('unknown key space undefined');
    // A look-alike of a declared space is not the space: only what defineKeySpace returned is.
    expect(() => untyped(kb, { feature: 'messages', kinds: { a: 'id', bc: 'fixed', x: 'fixed' } }, 'x')).toThrow('unknown key space "messages"');
    expect(() => untyped(kb, { feature: 'constructor', kinds: {} }, 'a', 'x')).toThrow('unknown key space "constructor"');
    expect(() => untyped(kb, MESSAGE_KEYS, 'broadcast')).toThrow('invalid key kind "broadcast" of messages');
    expect(() => untyped(kb, MESSAGE_KEYS, 'toString', 'x')).toThrow('invalid key kind "toString" of messages');
    expect(() => untyped(kb, MESSAGE_KEYS, 'bc', 'x')).toThrow('key kind messages/bc takes no id');
    expect(() => untyped(kb, MESSAGE_KEYS, 'a')).toThrow('invalid key tag id undefined');
    // The type system says the same: only declared kinds, an id kind needs its id, a fixed kind takes none.
    // @ts-expect-error a fixed kind takes no id
    expect(() => kb.tagged(MESSAGE_KEYS, 'bc', 'x')).toThrow(TypeError);
    // @ts-expect-error an id kind needs its id
    expect(() => kb.tagged(MESSAGE_KEYS, 'a')).toThrow(TypeError);
    // @ts-expect-error orders declare no kind `a`
    expect(() => kb.tagged(ORDER_KEYS, 'a', 'x')).toThrow('invalid key kind "a" of orders');
  });

  it('every feature and kind name is a plain word without ":", so the kind is what precedes the first ":" of a tag', () => {
    for (const { kind } of ALL_KINDS) expect(kind).toMatch(/^[a-z][a-z0-9-]*$/);
    for (const { feature } of keySpaces()) expect(feature).toMatch(/^[a-z][a-z0-9-]*$/);
  });

  describe(defineKeySpace.name, () => {
    it('registers the space, so that tagged() and parse() know it', () => {
      const space = defineKeySpace('seckill-test', { e: 'id', all: 'fixed' });
      expect(keySpaces()).toContain(space);
      expect(Object.isFrozen(space) && Object.isFrozen(space.kinds)).toBe(true);
      const key = builder().tagged(space, 'e', 'evt_1').key('stock');
      expect(key).toBe('rp:seckill-test:{e:evt_1}:stock');
      expect(builder().parse(key)).toEqual({ feature: 'seckill-test', kind: 'e', id: 'evt_1', part: 'stock' });
      expect(builder().parse(builder().tagged(space, 'all').key('events'))).toEqual({ feature: 'seckill-test', kind: 'all', part: 'events' });
    });

    it('refuses a feature name declared twice (two modules, one feature)', () => {
      expect(() => defineKeySpace('orders', { s: 'id' })).toThrow('key space "orders" is declared twice');
      expect(() => defineKeySpace('messages', { x: 'fixed' })).toThrow('key space "messages" is declared twice');
      expect(keySpaces().filter((s) => s.feature === 'orders')).toEqual([ORDER_KEYS]);
    });

    it('refuses the second of two modules that declare one feature, when it is imported', () => {
      jest.isolateModules(() => {
        const { defineKeySpace: define } = require('./key-builder') as typeof import('./key-builder');
        require('../../features/orders/order.keys');
        expect(() => define('orders', { s: 'id' })).toThrow('key space "orders" is declared twice');
      });
    });

    it.each(['', 'Orders', 'ord:x', 'a b', '{a}', '1orders', 'a_b', 'o'.repeat(33)])('refuses the feature name %j', (name) => {
      expect(() => defineKeySpace(name, { a: 'id' })).toThrow(`invalid key space name ${JSON.stringify(name)}`);
    });

    it.each(['', 'A', 'a:b', 'a{', 'a b', '1a'])('refuses the kind name %j', (kind) => {
      expect(() => defineKeySpace('kind-test', { [kind]: 'id' })).toThrow(`invalid key kind ${JSON.stringify(kind)} of kind-test`);
    });

    it('refuses a space without kinds, or a kind neither id nor fixed', () => {
      expect(() => defineKeySpace('empty-test', {})).toThrow('key space empty-test declares no kind');
      expect(() => defineKeySpace('arity-test', { a: 'many' } as unknown as Record<string, 'id'>)).toThrow("key kind arity-test/a must be 'id' or 'fixed'");
      expect(keySpaces().map((s) => s.feature)).not.toEqual(expect.arrayContaining(['empty-test', 'arity-test', 'kind-test']));
    });
  });

  describe('tag ids', () => {
    it.each(['x', 'm:merchant_1', 'user@example.com', '字', 't'.repeat(128), 'bc', 'a:b'])('accepts %j', (id) => {
      expect(builder().tagged(LOCK_KEYS, 'n', id).key('h')).toBe(`rp:locks:{n:${id}}:h`);
    });

    it.each(['', '{', '}', 'a{b', 'a}b', '{a}', 'a b', ' a', 'a\t', 'a\nb', 'a\u00a0b', 't'.repeat(129)])('rejects %j', (id) => {
      expect(() => builder().tagged(LOCK_KEYS, 'n', id)).toThrow(TypeError);
      expect(() => builder().tagged(LOCK_KEYS, 'n', id)).toThrow(`invalid key tag id ${JSON.stringify(id)}`);
    });
  });

  describe('parts', () => {
    const keys = builder().tagged(DIAGNOSTICS_KEYS, 'a', 'tag');

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
        fc.property(
          fc.constantFrom(...ALL_KINDS),
          anyId(128),
          fc.constantFrom('h', 'inbox', 'dead-events', 'x1'),
          fc.option(anyId(256), { nil: undefined }),
          (k, id, part, partId) => {
            const tagged = k.arity === 'id' ? untyped(kb, k.space, k.kind, id) : untyped(kb, k.space, k.kind);
            const key = tagged.key(part, partId);
            expect(kb.parse(key)).toEqual({
              feature: k.feature,
              kind: k.kind,
              ...(k.arity === 'id' ? { id } : {}),
              part,
              ...(partId === undefined ? {} : { partId }),
            });
          },
        ),
        { numRuns: 2000 },
      );
    });

    it.each([
      'other:messages:{a:x}:inbox',
      'rp:messages:{x}:inbox',
      'rp:messages:{bc:x}:stream',
      'rp:messages:{broadcast}:bodies',
      'rp:nope:{a:x}:inbox',
      'rp:messages:{a:x}:Inbox',
      'rp:messages:{a:x}',
      'rp:messages:a:x:inbox',
      'rp:messages:{a:x}:inbox:',
      'rp:messages:{a:}:inbox',
      // The old abbreviated feature names are no feature any more.
      'rp:msg:{a:x}:inbox',
      'rp:ord:{s:3}:events',
      'rp:dq:{reg}:queues',
      'rp:lock:{n:x}:h',
      'rp:rate:{user:x}:window',
      'rp:delay:{q:x}:pending',
      'rp:delay-queue-x:{q:x}:pending',
    ])('refuses %j, which no call builds', (key) => {
      expect(builder().parse(key)).toBeUndefined();
    });
  });

  describe('cluster slots', () => {
    it('puts every key under one tag in the slot of that tag, `<kind>:<id>` or `<kind>` (property check)', () => {
      fc.assert(
        fc.property(
          fc.constantFrom('rp', 'shop-1.v2', 'A_b'),
          fc.constantFrom(...ALL_KINDS),
          anyId(40),
          fc.array(anyId(60), { minLength: 1, maxLength: 8 }),
          (prefix, k, id, partIds) => {
            const tagged = k.arity === 'id' ? untyped(builder(prefix), k.space, k.kind, id) : untyped(builder(prefix), k.space, k.kind);
            const slot = calculateSlot(k.arity === 'id' ? `${k.kind}:${id}` : k.kind);
            expect(calculateSlot(tagged.key('p'))).toBe(slot);
            for (const partId of partIds) expect(calculateSlot(tagged.key('p', partId))).toBe(slot);
          },
        ),
        { numRuns: 500 },
      );
    });

    it('the check is meaningful: the same keys without a hash tag spread over many slots', () => {
      const slots = new Set(Array.from({ length: 50 }, (_, i) => calculateSlot(`rp:messages:a:acc_1:visits:${i}`)));
      expect(slots.size).toBeGreaterThan(40);
    });

    it('keys of different tags usually land in different slots', () => {
      const kb = builder();
      const slots = new Set(Array.from({ length: 100 }, (_, i) => calculateSlot(kb.tagged(MESSAGE_KEYS, 'a', `acc${i}`).key('inbox'))));
      expect(slots.size).toBeGreaterThan(90);
    });
  });
});
