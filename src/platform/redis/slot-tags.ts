import calculateSlot from 'cluster-key-slot';

/**
 * Hash tags that place the shards of one thing evenly over a Redis Cluster, by construction.
 *
 * Shard k of n is given a tag whose slot lies in one of n equal slot ranges (range r of n: slots
 * floor(r·16384/n) .. floor((r+1)·16384/n) − 1), each shard of the thing in a range of its own. On a cluster whose masters
 * own equal contiguous ranges (the layout `redis-cli --cluster create` makes) the shards of one thing therefore spread
 * over the masters: n/m on each of m masters when m divides n, and within one of n/m otherwise (tested for 1 to 16 shards
 * on 3 to 8 masters in slot-tags.spec.ts).
 *
 * - Which range: shard k takes range (k + r₀) mod n, r₀ a hash of the thing (`spread`), so the first shard of every product
 *   does not sit on the first master.
 * - Where in the range: near its centre (within an eighth of the range of it), moved by the same hash, so that the shards
 *   of different things land on different slots (a slot is what ops move), and a range that straddles two masters goes
 *   to the one that owns its middle. With one or two shards the whole range is used (away from its two edge slots), so
 *   such products still spread over every master in sum.
 *
 * How a tag reaches its slot: CRC16 (XMODEM, as Cluster hashes tags) is linear over GF(2), so the tag `<base>:<4 chars>`,
 * each char `@`..`O` (0x40 with a 4-bit value in its low bits), has the slot slot(`<base>:@@@@`) XOR a linear function of
 * the 16 bits chosen. `SUFFIX_TABLE` (computed once at load, checked against every slot by the unit test) holds, per slot
 * bit, the 16 bits that flip that bit of the slot alone; any slot is the XOR of its rows. No search, one CRC per tag.
 */

/** Cluster slots. */
export const SLOT_COUNT = 16384;

/** The scheme number recorded on the things whose shard tags are made here (records without it keep their first tags). */
export const SPREAD_TAGS = 2;

const SUFFIX_CHARS = 4;
const BASE_CHAR = 0x40; // '@'
const BASE_SUFFIX = String.fromCharCode(BASE_CHAR).repeat(SUFFIX_CHARS);
const SLOT_BITS = 14;

/** The suffix whose 4-bit values are `v` (char i: bits 4i..4i+3). */
const suffixOf = (v: number) => String.fromCharCode(...Array.from({ length: SUFFIX_CHARS }, (_, i) => BASE_CHAR | ((v >>> (4 * i)) & 15)));

/**
 * Per slot bit i, the suffix values whose slot differs from the base suffix's in bit i only. By linearity that
 * difference does not depend on what comes before the suffix.
 */
export const SUFFIX_TABLE: readonly number[] = (() => {
  const base = calculateSlot(BASE_SUFFIX);
  // Each suffix bit's effect on the slot, then Gauss-Jordan elimination to one suffix combination per slot bit.
  const rows = Array.from({ length: SUFFIX_CHARS * 4 }, (_, j) => ({ slot: calculateSlot(suffixOf(1 << j)) ^ base, v: 1 << j }));
  const table: number[] = new Array<number>(SLOT_BITS);
  let used = 0;
  for (let bit = SLOT_BITS - 1; bit >= 0; bit--) {
    const i = rows.findIndex((r, idx) => idx >= used && (r.slot >>> bit) & 1);
    if (i < 0) throw new Error(`slot-tags: slot bit ${bit} cannot be reached by the suffix`);
    [rows[used], rows[i]] = [rows[i], rows[used]];
    for (let r = 0; r < rows.length; r++) {
      if (r !== used && (rows[r].slot >>> bit) & 1) rows[r] = { slot: rows[r].slot ^ rows[used].slot, v: rows[r].v ^ rows[used].v };
    }
    used++;
  }
  for (let r = 0; r < SLOT_BITS; r++) table[31 - Math.clz32(rows[r].slot)] = rows[r].v;
  return Object.freeze(table);
})();

/** A hash tag's content `<base>:<4 chars>` whose Cluster slot is `slot` (the tag as written between the braces). */
export function tagForSlot(base: string, slot: number): string {
  let delta = calculateSlot(`${base}:${BASE_SUFFIX}`) ^ slot;
  let v = 0;
  for (let bit = 0; delta; bit++, delta >>>= 1) if (delta & 1) v ^= SUFFIX_TABLE[bit];
  return `${base}:${suffixOf(v)}`;
}

/** Range r of n equal slot ranges: [first, last]. */
export function slotRange(r: number, n: number): [number, number] {
  return [Math.floor((r * SLOT_COUNT) / n), Math.floor(((r + 1) * SLOT_COUNT) / n) - 1];
}

/** FNV-1a, 32 bits: the thing's hash that rotates its ranges and places its shards in them. */
function hash32(s: string): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < s.length; i++) h = Math.imul(h ^ s.charCodeAt(i), 0x01000193);
  return h >>> 0;
}

/** The slot of shard k of n of the thing named `spread` (see above). */
export function spreadSlot(spread: string, k: number, n: number): number {
  if (!Number.isInteger(n) || n < 1 || !Number.isInteger(k) || k < 0 || k >= n) throw new RangeError(`slot-tags: no shard ${k} of ${n}`);
  const h = hash32(spread);
  const [first, last] = slotRange((k + (h % n)) % n, n);
  const width = last - first + 1;
  const at = h >>> 8;
  if (n <= 2) return first + 2 + (at % (width - 4));
  const span = Math.max(1, Math.floor(width / 4));
  return first + Math.floor(width / 2) - Math.floor(span / 2) + (at % span);
}

/**
 * The tag id of shard k of n, for `KeyBuilder.tagged(space, kind, id)`: `<id>:<4 chars>`, such that the tag it writes,
 * `{<kind>:<id>:<4 chars>}`, is in the shard's own slot range (see above). `spread` names the thing whose shards these are
 * (the same for all its shards).
 */
export function spreadTagId(kind: string, id: string, spread: string, k: number, n: number): string {
  return tagForSlot(`${kind}:${id}`, spreadSlot(spread, k, n)).slice(kind.length + 1);
}
