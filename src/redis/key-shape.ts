import type { KeyBuilder, KeySpace } from './key-builder';

/**
 * One kind of key a module makes, described for the key-space proof
 * (src/redis/key-space.spec.ts): which kind of tag and part it is, what each
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
