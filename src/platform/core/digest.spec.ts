import { createHash } from 'node:crypto';
import { md5Bytes, md5Hex, sha256Hex } from './digest';

// Ids, home shards and cache keys made from these digests are stored: the one-shot forms must give the very bytes
// createHash gives (text as UTF-8).
describe('one-shot digests', () => {
  const inputs = ['', 'abc', 'act_1\nprod_2\nu123\nreq-9', 'Grüße 🧧 红包', Buffer.from([0, 255, 1, 128])];

  it.each(inputs.map((i) => [i]))('agree with createHash for %p', (input) => {
    expect(sha256Hex(input)).toBe(createHash('sha256').update(input).digest('hex'));
    expect(md5Hex(input)).toBe(createHash('md5').update(input).digest('hex'));
    expect(md5Bytes(input).equals(createHash('md5').update(input).digest())).toBe(true);
  });

  it('gives the known sha256 of "abc"', () => {
    expect(sha256Hex('abc')).toBe('ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad');
  });
});
