import type { KeyBuilder, KeySpace } from './key-builder';

/**
 * One kind of key a module makes, described for the key-space proof
 * (src/platform/redis/key-space.spec.ts): which kind of tag and part it is, what each
 * argument must match, how the module's keys file makes it, and which tag id
 * and part id the key carries. Each module lists its own, beside its keys file,
 * in `<keys file>.shapes.ts` (`export const KEY_SHAPES: KeyShape[]`); the proof
 * finds them by their names, so adding a module edits no shared list.
 */
export interface KeyShape {
  /** What the key is, for messages. */
  name: string;
  space: KeySpace;
  kind: string;
  part: string;
  /** The rule of each argument of `make`. */
  rules: readonly RegExp[];
  make: (b: KeyBuilder, args: string[]) => string;
  /** The tag id and part id the key carries. */
  carries: (args: string[]) => { id?: string; partId?: string };
}

/** The shape of a key named by one argument matching `rule`, which is the tag id the key carries. */
export const idKeyShape = (space: KeySpace, kind: string, part: string, name: string, rule: RegExp, make: (b: KeyBuilder, id: string) => string): KeyShape => ({
  name,
  space,
  kind,
  part,
  rules: [rule],
  make: (b, [id]) => make(b, id),
  carries: ([id]) => ({ id }),
});

/** The shape of a key made from no argument (one of its kind in the key space); it carries no id. */
export const fixedKeyShape = (space: KeySpace, kind: string, part: string, name: string, make: (b: KeyBuilder) => string): KeyShape => ({
  name,
  space,
  kind,
  part,
  rules: [],
  make: (b) => make(b),
  carries: () => ({}),
});

/**
 * The shapes of the keys of one record that has several parts (each part a key under the same tag), named
 * `${label} ${part}`: `make` gives all the parts' keys from the arguments, `carries` the tag id they share.
 */
export const partKeyShapes = <P extends string>(
  space: KeySpace,
  kind: string,
  parts: readonly P[],
  label: string,
  rules: readonly RegExp[],
  make: (b: KeyBuilder, args: string[]) => Record<P, string>,
  carries: (args: string[]) => { id?: string; partId?: string },
): KeyShape[] => parts.map((part) => ({ name: `${label} ${part}`, space, kind, part, rules, make: (b, args) => make(b, args)[part], carries }));
