import { createHash } from 'node:crypto';

/**
 * Splitting a red-envelope pool: the double-mean method in integer minor units.
 *
 * For every envelope but the last, with `remaining` minor units left for `k` envelopes (this one included), the amount is
 * drawn uniformly from the integers in [min, max] where
 *
 *     max = min(floor(2 × remaining / k), remaining − min × (k − 1))
 *
 * (the second bound leaves every later envelope its minimum; both are ≥ min whenever remaining ≥ k × min). The last
 * envelope takes what is left, which is then within [min, total − min × (count − 1)] too. So the amounts always add up to
 * the total, none is below the minimum, and the expected amount of every envelope is about total / count.
 *
 * The random numbers come from xoshiro128** (Blackman and Vigna) seeded with the first 16 bytes of sha256(seed), read as
 * four little-endian 32-bit words. Draws are unbiased (rejection sampling: one 32-bit output per draw when the range fits
 * 32 bits, two outputs making 53 bits otherwise) and all arithmetic is exact integer arithmetic, so the same seed gives
 * the same split on any machine: store the seed and a split can be reproduced and audited.
 */

/** The most envelopes one split makes unless the caller sets `maxCount`. */
export const DEFAULT_MAX_SPLIT_COUNT = 10_000_000;

/** The generator behind every split, as it should be recorded next to a stored seed. */
export const SPLIT_ALGORITHM = 'double-mean/xoshiro128**/sha256-seed/v1';

/**
 * The amounts in minor units, in envelope order: an Int32Array when the total fits in 32 bits (every amount then does),
 * otherwise a plain array of safe integers.
 */
export type SplitAmounts = Int32Array | number[];

export interface SplitTotals {
  /** The pool in minor units: a safe integer ≥ 1. */
  total: number;
  /** How many envelopes: a safe integer ≥ 1. */
  count: number;
  /** The least an envelope holds, in minor units: a safe integer ≥ 1. */
  minAmount: number;
}

export interface SplitOptions extends SplitTotals {
  /** The seed of the generator; the same seed gives the same split. A non-empty string. */
  seed: string;
  /** The largest count accepted (default {@link DEFAULT_MAX_SPLIT_COUNT}). */
  maxCount?: number;
}

export type SplitField = 'total' | 'count' | 'minAmount' | 'seed' | 'maxCount' | 'buckets' | 'amounts';

/** Bad input to a split: a RangeError whose `field` names the option at fault (the message starts with it too). */
export class SplitInputError extends RangeError {
  override readonly name = 'SplitInputError';
  constructor(
    readonly field: SplitField,
    message: string,
  ) {
    super(`${field} ${message}`);
  }
}

const TWO_32 = 0x1_0000_0000;
const TWO_53 = 2 ** 53;

function checkPositiveInteger(field: SplitField, value: unknown): asserts value is number {
  if (typeof value !== 'number' || !Number.isSafeInteger(value) || value < 1) {
    throw new SplitInputError(field, `must be a safe integer >= 1, got ${describe(value)}`);
  }
}

function describe(value: unknown): string {
  return typeof value === 'string' ? JSON.stringify(value) : String(value);
}

/** Throws a {@link SplitInputError} unless the totals can be split. */
function checkTotals({ total, count, minAmount }: SplitTotals, maxCount: number): void {
  checkPositiveInteger('total', total);
  checkPositiveInteger('count', count);
  checkPositiveInteger('minAmount', minAmount);
  if (count > maxCount) throw new SplitInputError('count', `must be at most ${maxCount}, got ${count}`);
  // count × minAmount is exact below 2^53; at or above it, the rounded product still exceeds any safe total.
  if (total < count * minAmount) {
    throw new SplitInputError('total', `must be at least count × minAmount (${count} × ${minAmount}), got ${total}`);
  }
}

/** The largest amount any one envelope may hold: total − minAmount × (count − 1). */
export function maxEnvelopeAmount({ total, count, minAmount }: SplitTotals): number {
  return total - minAmount * (count - 1);
}

/** floor(2 × remaining / k), exact for any safe remaining (2 × remaining may not be). */
function doubleMean(remaining: number, k: number): number {
  const q = Math.floor(remaining / k); // exact: a correctly rounded quotient of integers below 2^53 never rounds up to the next integer
  const r = remaining - q * k;
  return 2 * q + Math.floor((2 * r) / k);
}

/**
 * xoshiro128** (Blackman and Vigna), a 128-bit state of four 32-bit words. {@link Xoshiro128ss.fromSeed} is how a split
 * seeds it; the constructor takes a state directly so the generator can be checked against the reference outputs.
 */
export class Xoshiro128ss {
  private s0: number;
  private s1: number;
  private s2: number;
  private s3: number;

  constructor(state: readonly [number, number, number, number]) {
    [this.s0, this.s1, this.s2, this.s3] = state.map((word) => word | 0);
    // The all-zero state is the one state xoshiro never leaves; sha256 will not produce it, but never run from it.
    if ((this.s0 | this.s1 | this.s2 | this.s3) === 0) this.s0 = 1;
  }

  /** The state is the first 16 bytes of sha256(seed as UTF-8), as four little-endian 32-bit words. */
  static fromSeed(seed: string): Xoshiro128ss {
    const digest = createHash('sha256').update(seed, 'utf8').digest();
    return new Xoshiro128ss([digest.readUInt32LE(0), digest.readUInt32LE(4), digest.readUInt32LE(8), digest.readUInt32LE(12)]);
  }

  /** The next output, an unsigned 32-bit integer. */
  next(): number {
    const s1 = this.s1;
    const x = Math.imul(s1, 5);
    const result = Math.imul((x << 7) | (x >>> 25), 9) >>> 0;
    const t = s1 << 9;
    this.s2 ^= this.s0;
    this.s3 ^= s1;
    this.s1 = s1 ^ this.s2;
    this.s0 ^= this.s3;
    this.s2 ^= t;
    this.s3 = (this.s3 << 11) | (this.s3 >>> 21);
    return result;
  }

  /** A uniform integer in [lo, hi] (lo ≤ hi, both safe): rejection sampling, so no value is favoured. */
  between(lo: number, hi: number): number {
    const range = hi - lo + 1;
    if (range === 1) return lo;
    if (range <= TWO_32) {
      const limit = TWO_32 - (TWO_32 % range);
      let x = this.next();
      while (x >= limit) x = this.next();
      return lo + (x % range);
    }
    const limit = TWO_53 - (TWO_53 % range);
    let x = (this.next() >>> 11) * TWO_32 + this.next();
    while (x >= limit) x = (this.next() >>> 11) * TWO_32 + this.next();
    return lo + (x % range);
  }
}

/**
 * Splits `total` minor units into `count` envelopes of at least `minAmount` each (double-mean method, see above),
 * deterministically from `seed`. Throws a {@link SplitInputError} (a RangeError) naming the field when total, count or
 * minAmount is not a safe integer ≥ 1, when count exceeds `maxCount`, or when total < count × minAmount.
 */
export function splitAmounts(opts: SplitOptions): SplitAmounts {
  const maxCount = opts.maxCount ?? DEFAULT_MAX_SPLIT_COUNT;
  checkPositiveInteger('maxCount', maxCount);
  checkTotals(opts, maxCount);
  if (typeof opts.seed !== 'string' || opts.seed.length === 0) {
    throw new SplitInputError('seed', `must be a non-empty string, got ${describe(opts.seed)}`);
  }
  const { total, count, minAmount } = opts;
  const rng = Xoshiro128ss.fromSeed(opts.seed);
  const out: SplitAmounts = total <= 0x7fff_ffff ? new Int32Array(count) : new Array<number>(count);
  let remaining = total;
  for (let i = 0; i < count - 1; i++) {
    const k = count - i;
    const mean2 = doubleMean(remaining, k);
    const cap = remaining - minAmount * (k - 1);
    const hi = Math.max(minAmount, mean2 < cap ? mean2 : cap);
    const amount = rng.between(minAmount, hi);
    out[i] = amount;
    remaining -= amount;
  }
  out[count - 1] = remaining;
  return out;
}

/** At most this many envelope-level problems are listed one by one; the rest are counted. */
const MAX_LISTED_PROBLEMS = 10;

/**
 * The problems with a split, empty when it is valid: the count is exact, every amount is an integer within
 * [minAmount, total − minAmount × (count − 1)], and the amounts add up to the total. Bad totals are reported as a problem
 * rather than thrown. Runs before an activity is armed.
 */
export function verifySplit(amounts: ArrayLike<number>, totals: SplitTotals): string[] {
  try {
    checkTotals(totals, Number.MAX_SAFE_INTEGER);
  } catch (error) {
    return [(error as Error).message];
  }
  const { total, count, minAmount } = totals;
  const problems: string[] = [];
  if (amounts.length !== count) problems.push(`count: expected ${count} amounts, got ${amounts.length}`);
  const maxAmount = maxEnvelopeAmount(totals);
  let bad = 0;
  let sum = 0;
  let sumExact = true;
  for (let i = 0; i < amounts.length; i++) {
    const amount = amounts[i];
    if (!Number.isSafeInteger(amount)) {
      if (++bad <= MAX_LISTED_PROBLEMS) problems.push(`amount #${i} is not a safe integer: ${describe(amount)}`);
      sumExact = false;
      continue;
    }
    if (amount < minAmount || amount > maxAmount) {
      if (++bad <= MAX_LISTED_PROBLEMS) problems.push(`amount #${i} is ${amount}, outside [${minAmount}, ${maxAmount}]`);
    }
    sum += amount;
    if (!Number.isSafeInteger(sum)) sumExact = false;
  }
  if (bad > MAX_LISTED_PROBLEMS) problems.push(`… and ${bad - MAX_LISTED_PROBLEMS} more amounts that are not integers within bounds`);
  if (!sumExact) problems.push(`sum: the amounts cannot be added up exactly, so they cannot be shown to make the total ${total}`);
  else if (sum !== total) problems.push(`sum: the amounts add up to ${sum}, not the total ${total}`);
  return problems;
}

export interface HistogramBucket {
  /** The least amount the bucket holds (inclusive). */
  from: number;
  /** The greatest amount the bucket holds (inclusive). */
  to: number;
  count: number;
}

export interface SplitDistribution {
  count: number;
  min: number;
  max: number;
  mean: number;
  /** Percentiles by the nearest-rank method: the smallest amount with at least p% of the amounts at or below it. */
  p50: number;
  p90: number;
  p99: number;
  /** Contiguous buckets covering [min, max], in order. */
  histogram: HistogramBucket[];
}

/**
 * Summary statistics and a histogram of integer amounts. The span [min, max] is cut into `buckets` ranges of integers of
 * equal width (to within one: a span of S integers gives widths floor(S / n) or ceil(S / n)), or into one bucket per
 * integer when the span holds fewer integers than `buckets`, so an all-equal split has a single bucket. Sorts a typed copy;
 * the amounts are not changed.
 */
export function distribution(amounts: ArrayLike<number>, buckets = 20): SplitDistribution {
  checkPositiveInteger('buckets', buckets);
  const n = amounts.length;
  if (n === 0) throw new SplitInputError('amounts', 'must not be empty');
  const sorted = amounts instanceof Int32Array ? amounts.slice() : Float64Array.from(amounts);
  let sum = 0;
  for (let i = 0; i < n; i++) {
    const v = sorted[i];
    if (!Number.isSafeInteger(v)) throw new SplitInputError('amounts', `must all be safe integers, got ${describe(v)} at #${i}`);
    sum += v;
  }
  sorted.sort();
  const min = sorted[0];
  const max = sorted[n - 1];
  const rank = (p: number): number => sorted[Math.max(0, Math.ceil((p / 100) * n) - 1)];

  const span = max - min + 1; // how many integers [min, max] holds
  const bucketCount = Math.min(buckets, span);
  const q = Math.floor(span / bucketCount);
  const r = span - q * bucketCount;
  // Bucket b starts at min + floor(b × span / bucketCount), computed without the product (it may pass 2^53).
  const startOf = (b: number): number => min + b * q + Math.floor((b * r) / bucketCount);
  const histogram: HistogramBucket[] = [];
  let j = 0;
  for (let b = 0; b < bucketCount; b++) {
    const from = startOf(b);
    const to = b === bucketCount - 1 ? max : startOf(b + 1) - 1;
    const start = j;
    while (j < n && sorted[j] <= to) j++;
    histogram.push({ from, to, count: j - start });
  }
  return { count: n, min, max, mean: sum / n, p50: rank(50), p90: rank(90), p99: rank(99), histogram };
}
