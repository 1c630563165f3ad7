import { createHash, createHmac } from 'node:crypto';
import { canonicalString, sha256Hex, signatureMatches, signRequest, type SignedParts } from './merchant-signature';

const SECRET = 'merchant-secret-0123456789abcdef';
const BODY = '{"orderId":"o-1","amount":1999,"currency":"EUR"}';
const PARTS: SignedParts = {
  method: 'POST',
  path: '/merchant/orders?x=1&y=two',
  timestamp: '1700000000123',
  nonce: 'nonce_abcdefghijklmnop',
  body: BODY,
};

/** The reference computation, written from the documented layout rather than the module. */
const reference = (secret: string, p: { method: string; path: string; timestamp: string; nonce: string; body: string }) =>
  createHmac('sha256', secret)
    .update(`${p.method}\n${p.path}\n${p.timestamp}\n${p.nonce}\n${createHash('sha256').update(p.body).digest('hex')}`)
    .digest('hex');

describe('MerchantSignature', () => {
  describe(canonicalString.name, () => {
    it('is METHOD, path?query, timestamp, nonce and hex sha256(body), one per line', () => {
      const lines = canonicalString(PARTS).split('\n');
      expect(lines).toEqual(['POST', '/merchant/orders?x=1&y=two', '1700000000123', 'nonce_abcdefghijklmnop', createHash('sha256').update(BODY).digest('hex')]);
    });

    it('hashes an empty body to the well-known empty sha256 and has no trailing newline', () => {
      const s = canonicalString({ ...PARTS, method: 'GET', body: '' });
      expect(s).toBe(
        'GET\n/merchant/orders?x=1&y=two\n1700000000123\nnonce_abcdefghijklmnop\ne3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855',
      );
    });

    it('upper-cases the method', () => {
      expect(canonicalString({ ...PARTS, method: 'post' })).toBe(canonicalString(PARTS));
    });

    it('treats a Buffer body like the same bytes as a string', () => {
      expect(canonicalString({ ...PARTS, body: Buffer.from(BODY, 'utf8') })).toBe(canonicalString(PARTS));
    });

    it('hashes raw bytes, so a re-serialised body differs', () => {
      expect(canonicalString({ ...PARTS, body: JSON.stringify(JSON.parse(BODY), null, 1) })).not.toBe(canonicalString(PARTS));
    });
  });

  describe(sha256Hex.name, () => {
    it('is lower-case hex sha256', () => {
      expect(sha256Hex('abc')).toBe('ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad');
    });
  });

  describe(signRequest.name, () => {
    it('matches an independent HMAC-SHA256 over the canonical string (known answer)', () => {
      const expected = reference(SECRET, { ...PARTS, body: BODY });
      expect(signRequest(SECRET, PARTS)).toBe(expected);
      expect(signRequest(SECRET, PARTS)).toMatch(/^[0-9a-f]{64}$/);
    });

    it('matches the reference for a GET with no body', () => {
      const p = { method: 'GET', path: '/merchant/orders/o-1', timestamp: '1700000000000', nonce: 'n0000000000000000', body: '' };
      expect(signRequest(SECRET, p)).toBe(reference(SECRET, p));
    });

    it('depends on the secret', () => {
      expect(signRequest(`${SECRET}x`, PARTS)).not.toBe(signRequest(SECRET, PARTS));
    });
  });

  describe(signatureMatches.name, () => {
    const good = reference(SECRET, { ...PARTS, body: BODY });

    it('accepts the right signature, in lower or upper case hex', () => {
      expect(signatureMatches(SECRET, PARTS, good)).toBe(true);
      expect(signatureMatches(SECRET, PARTS, good.toUpperCase())).toBe(true);
    });

    it('accepts a lower-case method when the signature was made over the upper-case one', () => {
      expect(signatureMatches(SECRET, { ...PARTS, method: 'post' }, good)).toBe(true);
    });

    it.each<[string, Partial<SignedParts>]>([
      ['method', { method: 'PUT' }],
      ['path', { path: '/merchant/orders/x?x=1&y=two' }],
      ['query', { path: '/merchant/orders?x=2&y=two' }],
      ['query order', { path: '/merchant/orders?y=two&x=1' }],
      ['missing query', { path: '/merchant/orders' }],
      ['timestamp', { timestamp: '1700000000124' }],
      ['nonce', { nonce: 'nonce_abcdefghijklmnoq' }],
      ['body', { body: BODY.replace('1999', '1998') }],
      ['empty body', { body: '' }],
      ['body whitespace', { body: `${BODY} ` }],
    ])('rejects a signature when the %s changed', (_field, change) => {
      expect(signatureMatches(SECRET, { ...PARTS, ...change }, good)).toBe(false);
    });

    it('rejects the right parts with another secret', () => {
      expect(signatureMatches('another-merchant-secret-0000', PARTS, good)).toBe(false);
    });

    it('rejects a signature with one flipped nibble', () => {
      const flipped = good[10] === '0' ? '1' : '0';
      expect(signatureMatches(SECRET, PARTS, good.slice(0, 10) + flipped + good.slice(11))).toBe(false);
    });

    it.each([
      ['empty', ''],
      ['short', 'abcdef'],
      ['63 hex', good.slice(0, 63)],
      ['65 hex', `${good}0`],
      ['non-hex character', `${good.slice(0, 63)}g`],
      ['0x prefix', `0x${good.slice(2)}`],
      ['trailing newline', `${good}\n`],
      ['surrounding spaces', ` ${good.slice(1)}`],
      ['base64 of the digest', Buffer.from(good, 'hex').toString('base64')],
      ['sha256= prefix', `sha256=${good}`],
    ])('returns false without throwing for a %s signature', (_label, sig) => {
      expect(() => signatureMatches(SECRET, PARTS, sig)).not.toThrow();
      expect(signatureMatches(SECRET, PARTS, sig)).toBe(false);
    });
  });
});
