import fc from 'fast-check';
import {
  DEFAULT_MAX_SPLIT_COUNT,
  distribution,
  maxEnvelopeAmount,
  SplitInputError,
  splitAmounts,
  verifySplit,
  Xoshiro128ss,
  type SplitAmounts,
  type SplitTotals,
} from './split';

const MAX_SAFE = Number.MAX_SAFE_INTEGER;
const INT32_MAX = 0x7fff_ffff;

/** Valid totals: a count and minimum, and a total from count × minimum up to the largest safe integer. */
function validTotals(maxCount = 2_000): fc.Arbitrary<SplitTotals> {
  return fc
    .tuple(fc.integer({ min: 1, max: maxCount }), fc.oneof(fc.integer({ min: 1, max: 100 }), fc.integer({ min: 1, max: 1_000_000_000 })))
    .chain(([count, minAmount]) => {
      const room = MAX_SAFE - count * minAmount;
      return fc
        .oneof(
          fc.integer({ min: 0, max: Math.min(room, 3) }),
          fc.integer({ min: 0, max: Math.min(room, 100_000) }),
          fc.integer({ min: 0, max: Math.min(room, INT32_MAX) }),
          fc.integer({ min: 0, max: room }),
        )
        .map((slack) => ({ total: count * minAmount + slack, count, minAmount }));
    });
}

const seedArb = fc.string({ minLength: 1, maxLength: 40 });

/**
 * Checks a split on its own terms, in BigInt so nothing rounds: the exact count, every amount a safe integer within
 * [min, total − min × (count − 1)], the sum, and every amount but the last within its draw's bound
 * max(min, min(floor(2 × remaining / k), remaining − min × (k − 1))). Returns log2 of how many splits the draws could
 * have made along this path (the chance another seed repeats it is 2^-that).
 */
function checkSplit(amounts: SplitAmounts, { total, count, minAmount }: SplitTotals): number {
  expect(amounts.length).toBe(count);
  expect(amounts instanceof Int32Array).toBe(total <= INT32_MAX);
  const min = BigInt(minAmount);
  const maxEach = BigInt(maxEnvelopeAmount({ total, count, minAmount }));
  let remaining = BigInt(total);
  let log2Choices = 0;
  for (let i = 0; i < count; i++) {
    const amount = amounts[i];
    if (!Number.isSafeInteger(amount)) throw new Error(`amount #${i} is not a safe integer: ${amount}`);
    const a = BigInt(amount);
    if (a < min || a > maxEach) throw new Error(`amount #${i} = ${a} is outside [${min}, ${maxEach}]`);
    if (i < count - 1) {
      const k = BigInt(count - i);
      const twiceMean = (2n * remaining) / k;
      const cap = remaining - min * (k - 1n);
      let hi = twiceMean < cap ? twiceMean : cap;
      if (hi < min) hi = min;
      if (a > hi) throw new Error(`amount #${i} = ${a} exceeds its draw's bound ${hi} (remaining ${remaining}, k ${k})`);
      log2Choices += Math.log2(Number(hi - min + 1n));
    }
    remaining -= a;
  }
  expect(remaining).toBe(0n);
  return log2Choices;
}

function expectSplitError(fn: () => unknown, field: string): void {
  let thrown: unknown;
  try {
    fn();
  } catch (error) {
    thrown = error;
  }
  expect(thrown).toBeInstanceOf(RangeError);
  expect(thrown).toBeInstanceOf(SplitInputError);
  expect((thrown as SplitInputError).field).toBe(field);
  expect((thrown as SplitInputError).message.startsWith(`${field} `)).toBe(true);
}

describe('Xoshiro128ss', () => {
  it('gives the reference outputs of xoshiro128** from the state [1, 2, 3, 4]', () => {
    const rng = new Xoshiro128ss([1, 2, 3, 4]);
    const outputs = Array.from({ length: 6 }, () => rng.next());
    expect(outputs).toEqual([11520, 0, 5927040, 70819200, 2031721883, 1637235492]);
  });

  it('draws only within [lo, hi], every value of a small range, for ranges under and over 2^32', () => {
    const rng = Xoshiro128ss.fromSeed('range');
    const seen = new Set<number>();
    for (let i = 0; i < 2_000; i++) {
      const v = rng.between(-3, 3);
      expect(v).toBeGreaterThanOrEqual(-3);
      expect(v).toBeLessThanOrEqual(3);
      seen.add(v);
    }
    expect(seen.size).toBe(7);
    for (let i = 0; i < 2_000; i++) {
      const v = rng.between(5, 2 ** 40);
      expect(Number.isSafeInteger(v) && v >= 5 && v <= 2 ** 40).toBe(true);
    }
    expect(rng.between(9, 9)).toBe(9);
  });
});

describe('splitAmounts', () => {
  it('adds up to the total, with every amount within its bounds and the exact count, for any valid total, count and minimum (property)', () => {
    fc.assert(
      fc.property(validTotals(), seedArb, (totals, seed) => {
        const amounts = splitAmounts({ ...totals, seed });
        checkSplit(amounts, totals);
        expect(verifySplit(amounts, totals)).toEqual([]);
      }),
      { numRuns: 300 },
    );
  });

  it('gives the same split for the same seed (property)', () => {
    fc.assert(
      fc.property(validTotals(500), seedArb, (totals, seed) => {
        expect(Array.from(splitAmounts({ ...totals, seed }))).toEqual(Array.from(splitAmounts({ ...totals, seed })));
      }),
    );
  });

  it('gives different splits for different seeds when there is room to vary (property)', () => {
    // "Room to vary": along the first split's path the draws could have made at least 2^40 splits, so the chance
    // that another seed repeats it is at most 2^-40 a run.
    const roomy = fc.oneof(
      // totals that fit 32 bits (Int32Array), many draws
      fc
        .tuple(fc.integer({ min: 20, max: 2_000 }), fc.integer({ min: 1, max: 100 }))
        .chain(([count, minAmount]) =>
          fc.integer({ min: count * 1_000, max: INT32_MAX - count * minAmount }).map((slack) => ({ total: count * minAmount + slack, count, minAmount })),
        ),
      // large totals (plain arrays), as few as two envelopes
      fc
        .tuple(fc.integer({ min: 2, max: 50 }), fc.integer({ min: 1, max: 1_000_000 }))
        .chain(([count, minAmount]) => fc.integer({ min: 2 ** 41, max: 2 ** 50 }).map((slack) => ({ total: count * minAmount + slack, count, minAmount }))),
    );
    fc.assert(
      fc.property(
        roomy,
        fc.tuple(seedArb, seedArb).filter(([a, b]) => a !== b),
        (totals, [seedA, seedB]) => {
          const a = splitAmounts({ ...totals, seed: seedA });
          fc.pre(checkSplit(a, totals) >= 40);
          const b = splitAmounts({ ...totals, seed: seedB });
          checkSplit(b, totals);
          expect(Array.from(a)).not.toEqual(Array.from(b));
        },
      ),
      { numRuns: 100 },
    );
  });

  it('reproduces a stored seed exactly (the split is part of an audit record and must never change)', () => {
    const amounts = splitAmounts({ total: 1_000, count: 10, minAmount: 1, seed: 'activity-2024-quiz-final' });
    expect(Array.from(amounts)).toEqual([185, 8, 124, 46, 76, 157, 99, 90, 59, 156]);
    const big = splitAmounts({ total: 2 ** 40 + 7, count: 3, minAmount: 5, seed: 'audit' });
    expect(big).toBeInstanceOf(Array);
    expect(big).toEqual([307509927256, 276285645402, 515716055125]);
  });

  it('gives every envelope the minimum when the total is exactly count × minimum (property)', () => {
    fc.assert(
      fc.property(fc.integer({ min: 1, max: 5_000 }), fc.integer({ min: 1, max: 1_000_000 }), seedArb, (count, minAmount, seed) => {
        const amounts = splitAmounts({ total: count * minAmount, count, minAmount, seed });
        expect(amounts.length).toBe(count);
        expect(Array.from(amounts).every((a) => a === minAmount)).toBe(true);
      }),
    );
  });

  it('gives one envelope minimum + 1 and the rest the minimum when the total is count × minimum + 1 (property)', () => {
    fc.assert(
      fc.property(fc.integer({ min: 1, max: 5_000 }), fc.integer({ min: 1, max: 1_000_000 }), seedArb, (count, minAmount, seed) => {
        const totals = { total: count * minAmount + 1, count, minAmount };
        const amounts = Array.from(splitAmounts({ ...totals, seed }));
        expect(amounts.filter((a) => a === minAmount + 1)).toHaveLength(1);
        expect(amounts.filter((a) => a === minAmount)).toHaveLength(count - 1);
        expect(verifySplit(amounts, totals)).toEqual([]);
      }),
    );
  });

  it('handles one envelope (it takes the whole total) and totals up to the largest safe integer', () => {
    expect(Array.from(splitAmounts({ total: 42, count: 1, minAmount: 42, seed: 's' }))).toEqual([42]);
    expect(Array.from(splitAmounts({ total: 42, count: 1, minAmount: 1, seed: 's' }))).toEqual([42]);
    const totals = { total: MAX_SAFE, count: 1_000, minAmount: 1 };
    checkSplit(splitAmounts({ ...totals, seed: 'max' }), totals);
    const tight = { total: MAX_SAFE, count: 3, minAmount: Math.floor(MAX_SAFE / 3) };
    checkSplit(splitAmounts({ ...tight, seed: 'tight' }), tight);
  });

  it('refuses a total, count or minimum that is not a safe integer >= 1 with a RangeError naming the field (property)', () => {
    const bad = fc.oneof(
      fc.constantFrom<unknown>(0, -1, 0.5, 1.5, NaN, Infinity, -Infinity, 2 ** 53, 2 ** 60, '5', null, undefined, 10n),
      fc.integer({ max: 0 }),
      fc.double({ noNaN: true }).filter((d) => !Number.isInteger(d)),
    );
    fc.assert(
      fc.property(fc.constantFrom('total', 'count', 'minAmount'), bad, (field, value) => {
        const opts = { total: 1_000, count: 10, minAmount: 1, seed: 'x', [field]: value };
        expectSplitError(() => splitAmounts(opts as never), field);
      }),
    );
  });

  it('refuses a total below count × minimum, naming the total (property)', () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 1, max: 100_000 }),
        fc.integer({ min: 1, max: 100_000 }),
        fc.double({ min: 0, max: 1, noNaN: true }),
        seedArb,
        (count, minAmount, f, seed) => {
          fc.pre(count * minAmount >= 2);
          const total = 1 + Math.floor(f * (count * minAmount - 2));
          expectSplitError(() => splitAmounts({ total, count, minAmount, seed }), 'total');
        },
      ),
    );
    // count × minimum past 2^53 does not round into acceptance
    expectSplitError(() => splitAmounts({ total: MAX_SAFE, count: 10_000_000, minAmount: 2 ** 40, seed: 'x' }), 'total');
    expectSplitError(() => splitAmounts({ total: MAX_SAFE, count: 3, minAmount: Math.floor(MAX_SAFE / 3) + 1, seed: 'x' }), 'total');
  });

  it('refuses a count above maxCount (default 10,000,000) without allocating, naming the count (property)', () => {
    fc.assert(
      fc.property(fc.integer({ min: 1, max: 1_000 }), fc.integer({ min: 1, max: 1_000 }), (maxCount, over) => {
        const count = maxCount + over;
        expectSplitError(() => splitAmounts({ total: count, count, minAmount: 1, seed: 'x', maxCount }), 'count');
        expect(splitAmounts({ total: maxCount, count: maxCount, minAmount: 1, seed: 'x', maxCount })).toHaveLength(maxCount);
      }),
      { numRuns: 50 },
    );
    expect(DEFAULT_MAX_SPLIT_COUNT).toBe(10_000_000);
    expectSplitError(() => splitAmounts({ total: 2 ** 40, count: DEFAULT_MAX_SPLIT_COUNT + 1, minAmount: 1, seed: 'x' }), 'count');
    expectSplitError(() => splitAmounts({ total: 2 ** 40, count: 2 ** 52, minAmount: 1, seed: 'x' }), 'count');
  });

  it('refuses an empty or missing seed and a bad maxCount, naming them', () => {
    expectSplitError(() => splitAmounts({ total: 10, count: 2, minAmount: 1, seed: '' }), 'seed');
    expectSplitError(() => splitAmounts({ total: 10, count: 2, minAmount: 1 } as never), 'seed');
    expectSplitError(() => splitAmounts({ total: 10, count: 2, minAmount: 1, seed: 'x', maxCount: 0 }), 'maxCount');
    expectSplitError(() => splitAmounts({ total: 10, count: 2, minAmount: 1, seed: 'x', maxCount: 1.5 }), 'maxCount');
  });

  it('splits 1,000,000 envelopes: they add up, no amount exceeds twice the running mean (its draw bound), the mean is total / count in every tenth, and the seed reproduces it', () => {
    const totals = { total: 100_000_000, count: 1_000_000, minAmount: 1 };
    const amounts = splitAmounts({ ...totals, seed: 'rain-1m' });
    expect(amounts).toBeInstanceOf(Int32Array);
    expect(verifySplit(amounts, totals)).toEqual([]);
    checkSplit(amounts, totals);

    const stats = distribution(amounts);
    expect(stats.count).toBe(1_000_000);
    expect(stats.mean).toBe(100);
    expect(stats.min).toBeGreaterThanOrEqual(1);
    expect(stats.p50).toBeLessThanOrEqual(stats.p90);
    expect(stats.p90).toBeLessThanOrEqual(stats.p99);
    expect(stats.p99).toBeLessThanOrEqual(stats.max);
    expect(stats.histogram.reduce((n, b) => n + b.count, 0)).toBe(1_000_000);

    // The expected amount of every envelope is total / count whatever its place: each tenth of the rain averages
    // within 2% of 100 (the standard error of a tenth's mean is about 0.2%).
    for (let tenth = 0; tenth < 10; tenth++) {
      let sum = 0;
      for (let i = tenth * 100_000; i < (tenth + 1) * 100_000; i++) sum += amounts[i];
      expect(Math.abs(sum / 100_000 - 100)).toBeLessThan(2);
    }

    const again = splitAmounts({ ...totals, seed: 'rain-1m' }) as Int32Array;
    expect(Buffer.compare(Buffer.from(again.buffer), Buffer.from((amounts as Int32Array).buffer))).toBe(0);
  });
});

describe('verifySplit', () => {
  const totals = { total: 100, count: 5, minAmount: 10 }; // each amount within [10, 60]

  it('finds nothing wrong with a valid split', () => {
    expect(verifySplit([10, 20, 30, 20, 20], totals)).toEqual([]);
    expect(verifySplit(Int32Array.of(60, 10, 10, 10, 10), totals)).toEqual([]);
  });

  it('names a wrong count, an amount out of bounds, a non-integer, and a wrong sum', () => {
    expect(verifySplit([20, 30, 30, 20], totals)).toEqual(['count: expected 5 amounts, got 4']);
    expect(verifySplit([20, 20, 20, 20, 20, 0], totals)).toEqual(['count: expected 5 amounts, got 6', 'amount #5 is 0, outside [10, 60]']);
    expect(verifySplit([9, 21, 30, 20, 20], totals)).toEqual(['amount #0 is 9, outside [10, 60]']);
    expect(verifySplit([61, 9, 10, 10, 10], totals)).toEqual(['amount #0 is 61, outside [10, 60]', 'amount #1 is 9, outside [10, 60]']);
    expect(verifySplit([20.5, 19.5, 20, 20, 20], totals)).toEqual([
      'amount #0 is not a safe integer: 20.5',
      'amount #1 is not a safe integer: 19.5',
      'sum: the amounts cannot be added up exactly, so they cannot be shown to make the total 100',
    ]);
    expect(verifySplit([20, 20, 20, 20, NaN], totals)[0]).toBe('amount #4 is not a safe integer: NaN');
    expect(verifySplit([20, 20, 20, 20, 21], totals)).toEqual(['sum: the amounts add up to 101, not the total 100']);
    expect(verifySplit([20, 20, 20, 20, -20], totals)).toEqual(['amount #4 is -20, outside [10, 60]', 'sum: the amounts add up to 60, not the total 100']);
  });

  it('lists at most ten bad amounts and counts the rest', () => {
    const problems = verifySplit(new Array(25).fill(0), { total: 25, count: 25, minAmount: 1 });
    expect(problems).toHaveLength(12);
    expect(problems[10]).toBe('… and 15 more amounts that are not integers within bounds');
    expect(problems[11]).toBe('sum: the amounts add up to 0, not the total 25');
  });

  it('reports totals that cannot be split instead of throwing', () => {
    expect(verifySplit([1], { total: 0, count: 1, minAmount: 1 })).toEqual(['total must be a safe integer >= 1, got 0']);
    expect(verifySplit([1, 1], { total: 3, count: 2, minAmount: 2 })).toEqual(['total must be at least count × minAmount (2 × 2), got 3']);
  });

  it('notices any one amount of a valid split changed: the sum no longer matches (property)', () => {
    fc.assert(
      fc.property(
        validTotals(200),
        seedArb,
        fc.nat(),
        fc.integer({ min: -3, max: 3 }).filter((d) => d !== 0),
        (t, seed, at, delta) => {
          const amounts = Array.from(splitAmounts({ ...t, seed }));
          const i = at % amounts.length;
          fc.pre(Number.isSafeInteger(amounts[i] + delta) && Number.isSafeInteger(t.total + delta));
          amounts[i] += delta;
          expect(verifySplit(amounts, t)).toContain(`sum: the amounts add up to ${t.total + delta}, not the total ${t.total}`);
        },
      ),
    );
  });
});

describe('distribution', () => {
  it('gives one bucket for an all-equal split', () => {
    expect(distribution(Int32Array.of(7, 7, 7, 7))).toEqual({
      count: 4,
      min: 7,
      max: 7,
      mean: 7,
      p50: 7,
      p90: 7,
      p99: 7,
      histogram: [{ from: 7, to: 7, count: 4 }],
    });
  });

  it('cuts the span into buckets of equal integer width, or one per integer when the span is narrower', () => {
    const amounts = Array.from({ length: 100 }, (_, i) => i + 1); // 1..100
    const d = distribution(amounts, 4);
    expect(d.histogram).toEqual([
      { from: 1, to: 25, count: 25 },
      { from: 26, to: 50, count: 25 },
      { from: 51, to: 75, count: 25 },
      { from: 76, to: 100, count: 25 },
    ]);
    expect([d.min, d.max, d.mean, d.p50, d.p90, d.p99]).toEqual([1, 100, 50.5, 50, 90, 99]);
    expect(distribution([3, 1, 2, 3], 20).histogram).toEqual([
      { from: 1, to: 1, count: 1 },
      { from: 2, to: 2, count: 1 },
      { from: 3, to: 3, count: 2 },
    ]);
  });

  it('covers [min, max] with contiguous buckets whose counts add up, with nearest-rank percentiles, and leaves the amounts alone (property)', () => {
    fc.assert(
      fc.property(
        fc.array(fc.oneof(fc.integer({ min: 1, max: 1_000 }), fc.integer({ min: 1, max: MAX_SAFE })), { minLength: 1, maxLength: 300 }),
        fc.integer({ min: 1, max: 50 }),
        fc.boolean(),
        (values, buckets, typed) => {
          const input: SplitAmounts = typed ? Int32Array.from(values.map((v) => v % INT32_MAX)) : values;
          const before = Array.from(input);
          const d = distribution(input, buckets);
          expect(Array.from(input)).toEqual(before);
          const sorted = [...before].sort((a, b) => a - b);
          const n = sorted.length;
          const rank = (p: number) => sorted[Math.max(0, Math.ceil((p / 100) * n) - 1)];
          expect(d).toMatchObject({ count: n, min: sorted[0], max: sorted[n - 1], p50: rank(50), p90: rank(90), p99: rank(99) });
          expect(d.histogram.length).toBe(Math.min(buckets, sorted[n - 1] - sorted[0] + 1));
          expect(d.histogram[0].from).toBe(sorted[0]);
          expect(d.histogram[d.histogram.length - 1].to).toBe(sorted[n - 1]);
          const widths = new Set<number>();
          d.histogram.forEach((b, i) => {
            if (i > 0) expect(b.from).toBe(d.histogram[i - 1].to + 1);
            expect(b.to).toBeGreaterThanOrEqual(b.from);
            widths.add(b.to - b.from);
            expect(b.count).toBe(sorted.filter((v) => v >= b.from && v <= b.to).length);
          });
          expect(Math.max(...widths) - Math.min(...widths)).toBeLessThanOrEqual(1);
          expect(d.histogram.reduce((s, b) => s + b.count, 0)).toBe(n);
        },
      ),
    );
  });

  it('refuses an empty list, a non-integer amount and a bad bucket count, naming them', () => {
    expectSplitError(() => distribution([]), 'amounts');
    expectSplitError(() => distribution([1, 2.5]), 'amounts');
    expectSplitError(() => distribution([1, 2], 0), 'buckets');
    expectSplitError(() => distribution([1, 2], 1.5), 'buckets');
  });
});
