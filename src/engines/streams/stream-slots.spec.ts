import { keySlot, readGroups } from './stream-slots';

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
