import calculateSlot from 'cluster-key-slot';
import fc from 'fast-check';
import type { AppConfig } from '../config/app-config';
import { defineKeySpace, KeyBuilder } from './key-builder';
import { SLOT_COUNT, slotRange, spreadSlot, spreadTagId, SUFFIX_TABLE, tagForSlot } from './slot-tags';

/** The masters' slot ranges as `redis-cli --cluster create` assigns them (clusterManagerCommandCreate). */
function redisCliRanges(masters: number): [number, number][] {
  const per = SLOT_COUNT / masters;
  const out: [number, number][] = [];
  let first = 0;
  let cursor = 0;
  for (let i = 0; i < masters; i++) {
    let last = Math.round(cursor + per - 1);
    if (last > SLOT_COUNT || i === masters - 1) last = SLOT_COUNT - 1;
    if (last < first) last = first;
    out.push([first, last]);
    first = last + 1;
    cursor += per;
  }
  return out;
}
const masterOf = (ranges: [number, number][], slot: number) => ranges.findIndex(([a, b]) => slot >= a && slot <= b);

describe('slot tags', () => {
  it('the suffix table reaches every slot exactly, whatever comes before the suffix', () => {
    expect(SUFFIX_TABLE).toHaveLength(14);
    for (const base of ['p:a', 'p:sale-1:phone:3', 'p:x'.repeat(40)]) {
      for (let slot = 0; slot < SLOT_COUNT; slot++) {
        const tag = tagForSlot(base, slot);
        if (calculateSlot(tag) !== slot) throw new Error(`${tag} is in slot ${calculateSlot(tag)}, not ${slot}`);
        expect(tag.startsWith(`${base}:`) && /:[@A-O]{4}$/.test(tag)).toBe(true);
      }
    }
  });

  it('the n ranges of n tile the slots, in order and equal to within one slot', () => {
    for (let n = 1; n <= 16; n++) {
      const ranges = Array.from({ length: n }, (_, r) => slotRange(r, n));
      expect(ranges[0][0]).toBe(0);
      expect(ranges[n - 1][1]).toBe(SLOT_COUNT - 1);
      for (let r = 1; r < n; r++) expect(ranges[r][0]).toBe(ranges[r - 1][1] + 1);
      const widths = ranges.map(([a, b]) => b - a + 1);
      expect(Math.max(...widths) - Math.min(...widths)).toBeLessThanOrEqual(1);
    }
  });

  it('shard k of n lies in its own range: every range once, for any thing (property check)', () => {
    fc.assert(
      fc.property(fc.string({ minLength: 1, maxLength: 60 }), fc.integer({ min: 1, max: 16 }), (spread, n) => {
        const ranges = Array.from({ length: n }, (_, k) => {
          const slot = spreadSlot(spread, k, n);
          return Array.from({ length: n }, (__, r) => slotRange(r, n)).findIndex(([a, b]) => slot >= a && slot <= b);
        });
        expect(new Set(ranges).size).toBe(n);
      }),
      { numRuns: 2000 },
    );
  });

  it('on m masters of equal ranges (redis-cli layout), the shards of one thing are n/m per master, within one', () => {
    for (let m = 3; m <= 8; m++) {
      const masters = redisCliRanges(m);
      for (let n = 1; n <= 16; n++) {
        for (const spread of ['sale-1:phone', 'sale-2:tv', 'rain-7', 'x']) {
          const counts = new Array<number>(m).fill(0);
          for (let k = 0; k < n; k++) counts[masterOf(masters, spreadSlot(spread, k, n))]++;
          const label = `${n} shards of ${spread} on ${m} masters: ${counts.join(',')}`;
          if (n >= m) expect({ label, ok: counts.every((c) => Math.abs(c - n / m) < 1) }).toEqual({ label, ok: true });
          else expect({ label, ok: counts.every((c) => c <= 1) }).toEqual({ label, ok: true });
          if (n % m === 0) expect({ label, ok: counts.every((c) => c === n / m) }).toEqual({ label, ok: true });
        }
      }
    }
  });

  it('the first shards of many products spread over the masters, and their shards over many slots', () => {
    const masters = redisCliRanges(3);
    for (const n of [1, 2, 3, 4]) {
      const firsts = new Array<number>(3).fill(0);
      const slots = new Set<number>();
      for (let i = 0; i < 600; i++) {
        firsts[masterOf(masters, spreadSlot(`sale:p${i}`, 0, n))]++;
        slots.add(spreadSlot(`sale:p${i}`, 0, n));
      }
      // 200 each on average: none below 100.
      expect({ n, firsts }).toEqual({ n, firsts: firsts.map((c) => (c >= 100 ? c : -c)) });
      expect(slots.size).toBeGreaterThan(300);
    }
  });

  it('the key a KeyBuilder writes with a spread tag id is in the shard’s slot', () => {
    const space = defineKeySpace('slot-tags-test', { p: 'id' });
    const b = new KeyBuilder({ redis: { keyPrefix: 'rp' } } as AppConfig);
    for (let n = 1; n <= 16; n++) {
      for (let k = 0; k < n; k++) {
        const key = b.tagged(space, 'p', spreadTagId('p', `sale:phone:${k}`, 'sale:phone', k, n)).key('stock');
        expect(calculateSlot(key)).toBe(spreadSlot('sale:phone', k, n));
      }
    }
  });

  it('refuses a shard that is not one of n', () => {
    expect(() => spreadSlot('x', 3, 3)).toThrow(RangeError);
    expect(() => spreadSlot('x', 0, 0)).toThrow(RangeError);
    expect(() => spreadSlot('x', -1, 2)).toThrow(RangeError);
  });
});
