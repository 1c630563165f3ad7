import { readdirSync } from 'node:fs';
import { join } from 'node:path';
import fc from 'fast-check';
import { matching } from '../../../test/support/arbitraries';
import type { AppConfig } from '../config/app-config';
import { ACCOUNT_ID_RE, ORDER_ID_RE } from '../core/ids';
import { broadcastKeys, inboxKeys } from '../../features/messages/message.keys';
import { deadEventStreamKeys, eventStreamKeys, orderKeys, shardOf } from '../../features/orders/order.keys';
import { KeyBuilder, keySpaces } from './key-builder';
import type { KeyShape } from './key-shape';

/**
 * Every kind of key the service makes, walked through the functions that make
 * them, with ids drawn from each id rule: no two kinds of key can ever be the
 * same key (an account called `broadcast` once shared the broadcast feed's
 * keys), and each key parses back to its kind, its tag id and its part.
 *
 * No list here names the modules: every keys file under src/ (`*-keys.ts`,
 * `*.keys.ts`) is imported, which declares its key space, and every module's
 * `<keys file>.shapes.ts` says which keys it makes. A new module is covered
 * the day its keys file is added (and the proof fails until it lists its keys).
 */

const SRC = join(__dirname, '..', '..');
const srcFiles = (readdirSync(SRC, { recursive: true }) as string[]).map((f) => f.split('\\').join('/')).sort();
const KEYS_FILES = srcFiles.filter((f) => /(?:-keys|\.keys)\.ts$/.test(f));
const SHAPE_FILES = srcFiles.filter((f) => /(?:-keys|\.keys)\.shapes\.ts$/.test(f));
for (const f of KEYS_FILES) require(join(SRC, f));
const SHAPES_BY_FILE = SHAPE_FILES.map((f) => {
  const shapes = (require(join(SRC, f)) as { KEY_SHAPES?: KeyShape[] }).KEY_SHAPES;
  if (!Array.isArray(shapes)) throw new Error(`${f} exports no KEY_SHAPES`);
  return [f, shapes] as const;
});
const SPACES = keySpaces();

const builder = new KeyBuilder({ redis: { keyPrefix: 'rp' } } as AppConfig);

interface KeyKind extends KeyShape {
  feature: string;
}
const CATALOGUE: KeyKind[] = SHAPES_BY_FILE.flatMap(([, shapes]) => shapes.map((k) => ({ ...k, feature: k.space.feature })));

/** Ids chosen to forge another kind's tag or part: every feature, kind and part name, alone and as `<name>:x`, the old abbreviated features and the old fixed tags. */
const words = ['msg', 'ord', 'lock', 'dq', 'rate', 'broadcast', 'registry', 'o0', 'o15', 'plan:-', '-', '0', '3', '15'];
for (const space of SPACES) words.push(space.feature, ...Object.keys(space.kinds));
const PARTS = [...new Set(CATALOGUE.map((k) => k.part))];
words.push(...PARTS);
const TRICKY = [...new Set(words.flatMap((w) => [w, `${w}:x`, `x:${w}`, `${w}:${w}`]))];

/** Ids of one rule: random ones, and the tricky ones the rule allows (fast-check picks those often). */
const ids = (re: RegExp) => {
  const tricky = TRICKY.filter((t) => re.test(t));
  return tricky.length ? fc.oneof(matching(re), fc.constantFrom(...tricky)) : matching(re);
};

/** Valid arguments of each kind of key, by catalogue index. */
const ARGS = CATALOGUE.map((k) => fc.tuple(...k.rules.map(ids)));
const argsOf = (k: KeyKind) => ARGS[CATALOGUE.indexOf(k)];

/** Any tag id and part id the key builder takes (no braces, no whitespace), and the tricky ones. */
const ANY_TAG_ID_RE = /^[^{}\s]{1,128}$/;
const ANY_PART_ID_RE = /^[^{}\s]{1,256}$/;
const PART_NAME_RE = /^[a-z][a-z0-9-]{0,31}$/;

describe('the key space', () => {
  it('finds every keys file, and each declares one key space, named after its module folder', () => {
    expect(KEYS_FILES).toEqual(
      expect.arrayContaining([
        'features/orders/order.keys.ts',
        'features/messages/message.keys.ts',
        'engines/delay-queue/delay-queue.keys.ts',
        'engines/locks/lock.keys.ts',
      ]),
    );
    expect(SPACES.map((s) => s.feature)).toEqual(expect.arrayContaining(['auth', 'delay-queue', 'diagnostics', 'locks', 'messages', 'orders', 'rate-limit']));
    for (const f of KEYS_FILES) {
      const exported: unknown[] = Object.values(require(join(SRC, f)) as object);
      const declared = SPACES.filter((s) => exported.includes(s));
      // One space per keys file, named after the module's folder (`src/engines/delay-queue/…` declares `delay-queue`).
      expect([f, declared.map((s) => s.feature)]).toEqual([f, [f.split('/')[1]]]);
    }
  });

  it('the catalogue covers every kind of tag of every declared key space, and every kind of key appears once', () => {
    const covered = new Set(CATALOGUE.map((k) => `${k.feature}/${k.kind}`));
    expect([...covered].sort()).toEqual(SPACES.flatMap((s) => Object.keys(s.kinds).map((k) => `${s.feature}/${k}`)).sort());
    const kinds = CATALOGUE.map((k) => `${k.feature}/${k.kind}/${k.part}`);
    expect(new Set(kinds).size).toBe(kinds.length);
    // Each module lists its own keys only.
    for (const [f, shapes] of SHAPES_BY_FILE) expect([f, ...new Set(shapes.map((k) => k.space.feature))]).toEqual([f, expect.any(String)]);
  });

  it('over every declared kind of tag and any ids and parts, a key parses back to what made it, so no two differ only in spelling (property check)', () => {
    const kinds = SPACES.flatMap((space) => Object.entries(space.kinds).map(([kind, arity]) => ({ space, kind, arity })));
    const anyIds = (re: RegExp) => fc.oneof(matching(re), fc.constantFrom(...TRICKY.filter((t) => re.test(t))));
    const parts = fc.oneof(fc.constantFrom(...PARTS), matching(PART_NAME_RE));
    fc.assert(
      fc.property(
        fc.constantFrom(...kinds),
        anyIds(ANY_TAG_ID_RE),
        parts,
        fc.option(anyIds(ANY_PART_ID_RE), { nil: undefined }),
        ({ space, kind, arity }, id, part, partId) => {
          const tagged = (builder.tagged as (...a: unknown[]) => ReturnType<KeyBuilder['tagged']>)(space, kind, ...(arity === 'id' ? [id] : []));
          const expected = { feature: space.feature, kind, ...(arity === 'id' ? { id } : {}), part, ...(partId === undefined ? {} : { partId }) };
          expect(builder.parse(tagged.key(part, partId))).toEqual(expected);
        },
      ),
      { numRuns: 5000 },
    );
  });

  it.each(CATALOGUE.map((k) => [k.name, k] as const))(
    'a %s key parses back to its kind, its tag id and its part, for any valid ids (property check)',
    (_name, k) => {
      fc.assert(
        fc.property(argsOf(k), (args) => {
          expect(builder.parse(k.make(builder, args))).toEqual({ feature: k.feature, kind: k.kind, part: k.part, ...k.carries(args) });
        }),
        { numRuns: 300 },
      );
    },
  );

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
        expect(builder.parse(deadEventStreamKeys(builder)[shardOf(o)])).toEqual({ feature: 'orders', kind: 's', id: String(shardOf(o)), part: 'dead-events' });
      }),
    );
  });
});
