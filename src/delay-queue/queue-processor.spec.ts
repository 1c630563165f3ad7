import { backoffDelay } from './queue-processor';

describe(backoffDelay.name, () => {
  const b = { initialMs: 1000, maxMs: 60_000, factor: 2 };

  it('doubles per failed attempt, with half of each delay random', () => {
    expect([1, 2, 3, 4].map((a) => backoffDelay(a, b, () => 0))).toEqual([500, 1000, 2000, 4000]);
    expect([1, 2, 3, 4].map((a) => backoffDelay(a, b, () => 1))).toEqual([1000, 2000, 4000, 8000]);
  });

  it('never exceeds the cap, and keeps at least half of it', () => {
    expect(backoffDelay(30, b, () => 1)).toBe(60_000);
    expect(backoffDelay(30, b, () => 0)).toBe(30_000);
  });

  it('spreads retries of items that failed together', () => {
    const delays = new Set(Array.from({ length: 50 }, () => backoffDelay(3, b)));
    expect(delays.size).toBeGreaterThan(10);
    for (const d of delays) {
      expect(d).toBeGreaterThanOrEqual(2000);
      expect(d).toBeLessThanOrEqual(4000);
    }
  });

  it('allows retrying at once when asked to', () => {
    expect(backoffDelay(5, { initialMs: 0, maxMs: 0, factor: 2 })).toBe(0);
  });
});
