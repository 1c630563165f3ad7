import fc from 'fast-check';
import { matching } from '../../test/support/arbitraries';
import type { AppConfig } from '../config/app-config';
import { MERCHANT_RE, NONCE_RE, nonceKey } from '../auth/merchant-verifier.service';
import { SUB_RE } from '../auth/jwt-verifier.service';
import { queueKeys, QUEUE_NAME_RE, registryKey } from '../delay-queue/delay-queue.keys';
import { visitsKey } from '../diagnostics/diagnostics.service';
import { lockKeys } from '../locks/lock-keys';
import { LOCK_NAME_RE } from '../locks/lock.service';
import { ACCOUNT_ID_RE, broadcastKeys, INBOX_PARTS, inboxKeys } from '../messages/message-keys';
import { deadEventStreamKeys, eventStreamKeys, ORDER_ID_RE, orderKeys, PLAN_ID_RE, shardOf } from '../orders/order-keys';
import { rateLimitKey } from '../rate-limit/rate-limit.scripts';
import { KeyBuilder, TAG_KINDS } from './key-builder';

/**
 * Every kind of key the service makes, walked through the functions that make
 * them, with ids drawn from each id rule: no two kinds of key can ever be the
 * same key (an account called `broadcast` once shared the broadcast feed's
 * keys), and each key parses back to its kind, its tag id and its part.
 */

const builder = new KeyBuilder({ redis: { keyPrefix: 'rp' } } as AppConfig);

/** Labels of the diagnostics visit counters (TouchDto). */
const LABEL_RE = /^[A-Za-z0-9_-]{1,32}$/;
/** Service and admin key names (load-config's credential names). */
const CREDENTIAL_NAME_RE = /^[A-Za-z0-9_.-]{1,64}$/;
/** Anonymous callers go by their IP address; any id the key builder takes stands in for it. */
const ANY_TAG_ID_RE = /^[^{}\s]{1,128}$/;

/** Ids chosen to forge another kind's tag or part: every feature, kind and part name, alone and as `<name>:x`, and the old fixed tags. */
const words = ['msg', 'ord', 'lock', 'dq', 'rate', 'auth', 'diagnostics', 'broadcast', 'registry', 'o0', 'o15', 'plan:-', '-', '0', '3', '15'];
for (const [feature, kinds] of Object.entries(TAG_KINDS)) words.push(feature, ...Object.keys(kinds));
const PARTS = ['inbox', 'bodies', 'idem', 'read', 'meta', 'stream', 'order', 'plan', 'no-plan', 'events', 'dead-events', 'pending', 'ready', 'inflight', 'dead', 'payload', 'attempts', 'errors', 'lease', 'seq', 'queues', 'h', 'fence', 'released', 'window', 'nonce', 'visits'];
words.push(...PARTS);
const TRICKY = [...new Set(words.flatMap((w) => [w, `${w}:x`, `x:${w}`, `${w}:${w}`]))];

/** Ids of one rule: random ones, and the tricky ones the rule allows (fast-check picks those often). */
const ids = (re: RegExp) => {
  const tricky = TRICKY.filter((t) => re.test(t));
  return tricky.length ? fc.oneof(matching(re), fc.constantFrom(...tricky)) : matching(re);
};

interface KeyKind {
  /** What the key is, for messages. */
  name: string;
  feature: string;
  kind: string;
  part: string;
  /** The rule of each argument of `make`. */
  rules: RegExp[];
  make: (b: KeyBuilder, args: string[]) => string;
  /** The tag id and part id the key carries. */
  carries: (args: string[]) => { id?: string; partId?: string };
}

const shardId = (orderId: string) => String(shardOf(orderId));
const orderOfPlan = (planId: string) => PLAN_ID_RE.exec(planId)![1];
const CATALOGUE: KeyKind[] = [
  ...INBOX_PARTS.map(
    (part, i): KeyKind => ({ name: `inbox ${part}`, feature: 'msg', kind: 'a', part, rules: [ACCOUNT_ID_RE], make: (b, [acc]) => inboxKeys(b, acc)[i], carries: ([acc]) => ({ id: acc }) }),
  ),
  ...['stream', 'bodies', 'meta'].map((part, i): KeyKind => ({ name: `broadcast ${part}`, feature: 'msg', kind: 'bc', part, rules: [], make: (b) => broadcastKeys(b)[i], carries: () => ({}) })),
  { name: 'order', feature: 'ord', kind: 's', part: 'order', rules: [ORDER_ID_RE], make: (b, [o]) => orderKeys(b, o)[0], carries: ([o]) => ({ id: shardId(o), partId: o }) },
  { name: 'plan', feature: 'ord', kind: 's', part: 'plan', rules: [PLAN_ID_RE], make: (b, [p]) => orderKeys(b, orderOfPlan(p), p)[1], carries: ([p]) => ({ id: shardId(orderOfPlan(p)), partId: p }) },
  { name: 'no plan', feature: 'ord', kind: 's', part: 'no-plan', rules: [ORDER_ID_RE], make: (b, [o]) => orderKeys(b, o)[1], carries: ([o]) => ({ id: shardId(o) }) },
  { name: 'order events', feature: 'ord', kind: 's', part: 'events', rules: [ORDER_ID_RE], make: (b, [o]) => orderKeys(b, o)[2], carries: ([o]) => ({ id: shardId(o) }) },
  { name: 'dead order events', feature: 'ord', kind: 's', part: 'dead-events', rules: [ORDER_ID_RE], make: (b, [o]) => deadEventStreamKeys(b)[shardOf(o)], carries: ([o]) => ({ id: shardId(o) }) },
  ...['pending', 'ready', 'inflight', 'dead', 'payload', 'attempts', 'errors', 'lease', 'seq'].map(
    (part, i): KeyKind => ({ name: `queue ${part}`, feature: 'dq', kind: 'q', part, rules: [QUEUE_NAME_RE], make: (b, [q]) => queueKeys(b, q).keys[i], carries: ([q]) => ({ id: q }) }),
  ),
  { name: 'queue channel', feature: 'dq', kind: 'q', part: 'events', rules: [QUEUE_NAME_RE], make: (b, [q]) => queueKeys(b, q).channel, carries: ([q]) => ({ id: q }) },
  { name: 'queue registry', feature: 'dq', kind: 'reg', part: 'queues', rules: [], make: (b) => registryKey(b), carries: () => ({}) },
  ...(['hash', 'fence', 'channel'] as const).map(
    (which, i): KeyKind => ({
      name: `lock ${which}`,
      feature: 'lock',
      kind: 'n',
      part: ['h', 'fence', 'released'][i],
      rules: [LOCK_NAME_RE],
      make: (b, [name]) => lockKeys(b, name)[which],
      carries: ([name]) => ({ id: name }),
    }),
  ),
  ...(
    [
      ['user', SUB_RE],
      ['merchant', MERCHANT_RE],
      ['service', CREDENTIAL_NAME_RE],
      ['admin', CREDENTIAL_NAME_RE],
      ['anonymous', ANY_TAG_ID_RE],
    ] as const
  ).map(
    ([kind, rule]): KeyKind => ({ name: `rate window of ${kind}`, feature: 'rate', kind, part: 'window', rules: [rule], make: (b, [id]) => rateLimitKey(b, { kind, id }), carries: ([id]) => ({ id }) }),
  ),
  { name: 'merchant nonce', feature: 'auth', kind: 'm', part: 'nonce', rules: [MERCHANT_RE, NONCE_RE], make: (b, [m, n]) => nonceKey(b, m, n), carries: ([m, n]) => ({ id: m, partId: n }) },
  { name: 'diagnostics visits', feature: 'diagnostics', kind: 'a', part: 'visits', rules: [SUB_RE, LABEL_RE], make: (b, [acc, label]) => visitsKey(b, acc, label), carries: ([acc, label]) => ({ id: acc, partId: label }) },
];
/** Valid arguments of each kind of key, by catalogue index. */
const ARGS = CATALOGUE.map((k) => fc.tuple(...k.rules.map(ids)));
const argsOf = (k: KeyKind) => ARGS[CATALOGUE.indexOf(k)];

describe('the key space', () => {
  it('the catalogue covers every kind of tag in TAG_KINDS, and every kind of key appears once', () => {
    const covered = new Set(CATALOGUE.map((k) => `${k.feature}/${k.kind}`));
    expect([...covered].sort()).toEqual(Object.entries(TAG_KINDS).flatMap(([f, kinds]) => Object.keys(kinds).map((k) => `${f}/${k}`)).sort());
    const kinds = CATALOGUE.map((k) => `${k.feature}/${k.kind}/${k.part}`);
    expect(new Set(kinds).size).toBe(kinds.length);
  });

  it.each(CATALOGUE.map((k) => [k.name, k] as const))('a %s key parses back to its kind, its tag id and its part, for any valid ids (property check)', (_name, k) => {
    fc.assert(
      fc.property(argsOf(k), (args) => {
        expect(builder.parse(k.make(builder, args))).toEqual({ feature: k.feature, kind: k.kind, part: k.part, ...k.carries(args) });
      }),
      { numRuns: 300 },
    );
  });

  it('no two kinds of key are ever the same key, for any valid ids (property check)', () => {
    const pair = fc
      .tuple(fc.nat(CATALOGUE.length - 1), fc.nat(CATALOGUE.length - 1))
      .filter(([i, j]) => i !== j)
      .chain(([i, j]) => fc.tuple(fc.constant(CATALOGUE[i]), fc.constant(CATALOGUE[j]), ARGS[i], ARGS[j]));
    fc.assert(
      fc.property(pair, ([a, b, argsA, argsB]) => {
        const label = `${a.name} / ${b.name}: `;
        expect(label + a.make(builder, argsA)).not.toBe(label + b.make(builder, argsB));
      }),
      { numRuns: 20_000 },
    );
  });

  it('no id that forges another kind (`broadcast`, `bc`, `a:x`, `reg`, …) makes a key of another kind or of another id', () => {
    const seen = new Map<string, string>();
    const clashes: string[] = [];
    for (const k of CATALOGUE) {
      // Valid arguments drawn from the rules, then each of them with every tricky id its rule allows in one position.
      const argLists = fc.sample(argsOf(k), { numRuns: 5, seed: 7 });
      for (const sample of [...argLists]) {
        k.rules.forEach((rule, i) => {
          for (const t of TRICKY.filter((x) => rule.test(x))) argLists.push(sample.map((a, j) => (j === i ? t : a)));
        });
      }
      for (const args of argLists) {
        const key = k.make(builder, args);
        const label = `${k.name}(${args.join(', ')})`;
        const before = seen.get(key);
        if (before !== undefined && before !== label) clashes.push(`${label} = ${before} = ${key}`);
        seen.set(key, label);
      }
    }
    expect(clashes).toEqual([]);
    // The reported case: an account named `broadcast` (a valid account id) and the broadcast feed.
    expect(ACCOUNT_ID_RE.test('broadcast')).toBe(true);
    expect(inboxKeys(builder, 'broadcast').filter((k) => broadcastKeys(builder).includes(k))).toEqual([]);
    expect(seen.size).toBeGreaterThan(1000);
  });

  it("every shard's events stream is the one orderKeys names for the shard's orders, with its dead-events stream beside it", () => {
    fc.assert(
      fc.property(fc.stringMatching(ORDER_ID_RE), (o) => {
        expect(eventStreamKeys(builder)[shardOf(o)]).toBe(orderKeys(builder, o)[2]);
        expect(builder.parse(deadEventStreamKeys(builder)[shardOf(o)])).toEqual({ feature: 'ord', kind: 's', id: String(shardOf(o)), part: 'dead-events' });
      }),
    );
  });
});
