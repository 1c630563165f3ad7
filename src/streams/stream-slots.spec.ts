import { keySlot, readGroups, retryDelayMs } from './stream-slots';

describe('keySlot', () => {
  it('matches the slots Redis Cluster reports (CLUSTER KEYSLOT)', () => {
    expect(keySlot('123456789')).toBe(12739);
    expect(keySlot('foo')).toBe(12182);
    expect(keySlot('{a}x')).toBe(15495);
  });

  it('hashes only the first non-empty hash tag', () => {
    expect(keySlot('rp:orders:{s:3}:events')).toBe(keySlot('{s:3}'));
    expect(keySlot('rp:orders:{s:3}:events')).toBe(keySlot('other:{s:3}:dead-events'));
    expect(keySlot('a{}b')).toBe(keySlot('a{}b'));
    expect(keySlot('a{}{b}')).not.toBe(keySlot('b'));
  });
});

describe('readGroups', () => {
  const s = (key: string) => ({ key });

  it('reads every stream in one command when not on a cluster', () => {
    expect(readGroups([s('p:{s:0}:events'), s('p:{s:1}:events')], false)).toEqual([[s('p:{s:0}:events'), s('p:{s:1}:events')]]);
  });

  it('on a cluster, one read per slot, streams of a shared tag together, in the order given', () => {
    const groups = readGroups([s('p:{s:0}:events'), s('p:{s:1}:events'), s('p:{s:0}:credits')], true);
    expect(groups).toEqual([[s('p:{s:0}:events'), s('p:{s:0}:credits')], [s('p:{s:1}:events')]]);
  });

  it('no streams, no reads', () => {
    expect(readGroups([], false)).toEqual([]);
    expect(readGroups([], true)).toEqual([]);
  });
});

describe('retryDelayMs', () => {
  it('doubles from the base up to the cap, within the upper half of each step', () => {
    const top = () => 0.999999;
    const bottom = () => 0;
    expect([1, 2, 3, 4, 5, 6].map((n) => retryDelayMs(n, 100, 2000, top))).toEqual([100, 200, 400, 800, 1600, 2000]);
    expect([1, 2, 3, 10].map((n) => retryDelayMs(n, 100, 2000, bottom))).toEqual([50, 100, 200, 1000]);
  });

  it('stays at the cap however many attempts failed', () => {
    expect(retryDelayMs(10_000, 100, 2000, () => 0.999999)).toBe(2000);
  });
});
