import { createHmac, generateKeyPairSync, type KeyObject } from 'node:crypto';
import { sign, type Algorithm, type SignOptions } from 'jsonwebtoken';
import { loadConfig } from '../config/load-config';
import { UnauthenticatedError } from '../core/domain.error';
import { JwtVerifier } from './jwt-verifier.service';

const SECRET = 'unit-test-jwt-secret-0123456789abcdef';
const now = () => Math.floor(Date.now() / 1000);
const b64url = (v: unknown) => Buffer.from(JSON.stringify(v)).toString('base64url');

/** Calls verify and returns the UnauthenticatedError it throws. */
function rejection(verifier: JwtVerifier, token: string): UnauthenticatedError {
  let caught: unknown;
  try {
    verifier.verify(token);
  } catch (err) {
    caught = err;
  }
  expect(caught).toBeInstanceOf(UnauthenticatedError);
  return caught as UnauthenticatedError;
}

describe(JwtVerifier.name, () => {
  describe('HS256', () => {
    const verifier = new JwtVerifier(loadConfig({ NODE_ENV: 'test', JWT_SECRET: SECRET }));
    const hs = (payload: object, opts: SignOptions = { expiresIn: 60 }, secret = SECRET) => sign(payload, secret, { algorithm: 'HS256', ...opts });

    it('returns sub for a valid token', () => {
      expect(verifier.verify(hs({ sub: 'acct_42' }))).toBe('acct_42');
    });

    it('checks a token the cache has just missed (the guard looked) without looking again, and remembers it', () => {
      const fresh = new JwtVerifier(loadConfig({ NODE_ENV: 'test', JWT_SECRET: SECRET }));
      const lookups = jest.spyOn((fresh as unknown as { verified: { get(token: string): unknown } }).verified, 'get');
      const token = hs({ sub: 'acct_new' });
      expect(fresh.verifiedSub(token) ?? fresh.verifyNew(token)).toBe('acct_new');
      expect(lookups).toHaveBeenCalledTimes(1);
      expect(fresh.verifiedSub(token)).toBe('acct_new');
    });

    it('remembers a verified token but still enforces its expiry', () => {
      jest.useFakeTimers({ now: Date.now() });
      try {
        const fresh = new JwtVerifier(loadConfig({ NODE_ENV: 'test', JWT_SECRET: SECRET, JWT_CLOCK_TOLERANCE_S: '0' }));
        const token = hs({ sub: 'acct_cached' }, { expiresIn: 2 });
        expect(fresh.verify(token)).toBe('acct_cached');
        expect(fresh.verify(token)).toBe('acct_cached'); // served from the cache
        jest.setSystemTime(Date.now() + 3000);
        expect(rejection(fresh, token).message).toBe('Bearer token has expired');
      } finally {
        jest.useRealTimers();
      }
    });

    it('remembers at most 50,000 tokens, forgetting the least recently used first', () => {
      const fresh = new JwtVerifier(loadConfig({ NODE_ENV: 'test', JWT_SECRET: SECRET }));
      const head = b64url({ alg: 'HS256', typ: 'JWT' });
      const exp = now() + 600;
      const token = (i: number) => {
        const unsigned = `${head}.${b64url({ sub: `acct_${i}`, exp })}`;
        return `${unsigned}.${createHmac('sha256', SECRET).update(unsigned).digest('base64url')}`;
      };
      for (let i = 0; i < 50_000; i++) fresh.verify(token(i));
      expect(fresh.verify(token(0))).toBe('acct_0'); // used again: now the most recent
      for (let i = 50_000; i < 50_002; i++) fresh.verify(token(i));
      expect(fresh.remembers(token(0))).toBe(true);
      expect(fresh.remembers(token(1))).toBe(false);
      expect(fresh.remembers(token(2))).toBe(false);
      expect(fresh.remembers(token(3))).toBe(true);
      expect(fresh.remembers(token(50_001))).toBe(true);
      expect(fresh.verify(token(1))).toBe('acct_1'); // forgotten, verified again
    });

    it('never caches a token that failed verification', () => {
      const forged = hs({ sub: 'acct_forged' }, { expiresIn: 60 }, 'another-secret-another-secret-0123');
      rejection(verifier, forged);
      rejection(verifier, forged);
    });

    it.each(['a', 'user:123', 'u.s-e_r', 'x'.repeat(64)])('accepts sub %j', (sub) => {
      expect(verifier.verify(hs({ sub }))).toBe(sub);
    });

    it('rejects an expired token with a message that says so', () => {
      const err = rejection(verifier, hs({ sub: 'acct_42', exp: now() - 60 }, {}));
      expect(err.message).toBe('Bearer token has expired');
    });

    it('allows the configured clock tolerance (5 s by default) but no more', () => {
      expect(verifier.verify(hs({ sub: 'acct_42', exp: now() - 2 }, {}))).toBe('acct_42');
      expect(rejection(verifier, hs({ sub: 'acct_42', exp: now() - 30 }, {})).message).toMatch(/expired/i);
    });

    it('honours JWT_CLOCK_TOLERANCE_S=0', () => {
      const strict = new JwtVerifier(loadConfig({ NODE_ENV: 'test', JWT_SECRET: SECRET, JWT_CLOCK_TOLERANCE_S: '0' }));
      expect(rejection(strict, hs({ sub: 'acct_42', exp: now() - 2 }, {})).message).toMatch(/expired/i);
    });

    it('rejects a token without exp', () => {
      expect(rejection(verifier, hs({ sub: 'acct_42' }, {})).message).toMatch(/exp/);
    });

    it('rejects a token whose exp is not a number', () => {
      const token = `${b64url({ alg: 'HS256', typ: 'JWT' })}.${b64url({ sub: 'acct_42', exp: String(now() + 60) })}`;
      const sig = createHmac('sha256', SECRET).update(token).digest('base64url');
      rejection(verifier, `${token}.${sig}`);
    });

    it('rejects a token that is not yet valid', () => {
      rejection(verifier, hs({ sub: 'acct_42', nbf: now() + 600 }));
    });

    it('rejects a token without sub', () => {
      expect(rejection(verifier, hs({ name: 'no subject' })).message).toMatch(/sub/);
    });

    it.each<[string, unknown]>([
      ['empty', ''],
      ['too long', 'x'.repeat(65)],
      ['with a space', 'acct 42'],
      ['with a slash', 'acct/42'],
      ['with braces', '{acct}'],
      ['a number', 42],
      ['an object', { id: 'acct_42' }],
    ])('rejects a sub that is %s', (_label, sub) => {
      // jsonwebtoken refuses to sign a non-string sub, so build those tokens by hand.
      const body = `${b64url({ alg: 'HS256', typ: 'JWT' })}.${b64url({ sub, exp: now() + 60 })}`;
      const token = `${body}.${createHmac('sha256', SECRET).update(body).digest('base64url')}`;
      expect(rejection(verifier, token).message).toMatch(/sub/);
    });

    it('rejects a token signed with another secret', () => {
      expect(rejection(verifier, hs({ sub: 'acct_42' }, { expiresIn: 60 }, `${SECRET}-other`)).message).toMatch(/invalid/);
    });

    it('rejects an unsigned token (alg none)', () => {
      const token = `${b64url({ alg: 'none', typ: 'JWT' })}.${b64url({ sub: 'acct_42', exp: now() + 60 })}.`;
      expect(rejection(verifier, token).message).toMatch(/invalid/);
    });

    it.each<Algorithm>(['HS384', 'HS512'])('rejects a token signed with %s even with the right secret', (algorithm) => {
      const token = sign({ sub: 'acct_42' }, SECRET, { algorithm, expiresIn: 60 });
      expect(rejection(verifier, token).message).toMatch(/invalid/);
    });

    it('rejects a tampered payload', () => {
      const [h, , s] = hs({ sub: 'acct_42' }).split('.');
      rejection(verifier, `${h}.${b64url({ sub: 'admin', exp: now() + 60 })}.${s}`);
    });

    it.each(['', 'not-a-jwt', 'a.b.c', 'Bearer x.y.z'])('rejects garbage %j', (token) => {
      rejection(verifier, token);
    });

    it('checks issuer and audience when configured', () => {
      const v = new JwtVerifier(loadConfig({ NODE_ENV: 'test', JWT_SECRET: SECRET, JWT_ISSUER: 'https://id.example', JWT_AUDIENCE: 'redis-pay' }));
      expect(v.verify(hs({ sub: 'acct_42' }, { expiresIn: 60, issuer: 'https://id.example', audience: 'redis-pay' }))).toBe('acct_42');
      rejection(v, hs({ sub: 'acct_42' }));
      rejection(v, hs({ sub: 'acct_42' }, { expiresIn: 60, issuer: 'https://evil.example', audience: 'redis-pay' }));
      rejection(v, hs({ sub: 'acct_42' }, { expiresIn: 60, issuer: 'https://id.example', audience: 'other' }));
    });
  });

  describe.each<['RS256' | 'ES256', () => { publicKey: KeyObject; privateKey: KeyObject }]>([
    ['RS256', () => generateKeyPairSync('rsa', { modulusLength: 2048 })],
    ['ES256', () => generateKeyPairSync('ec', { namedCurve: 'P-256' })],
  ])('%s', (algorithm, generate) => {
    const { publicKey, privateKey } = generate();
    const other = generate();
    const pem = publicKey.export({ type: 'spki', format: 'pem' }).toString();
    const verifier = new JwtVerifier(loadConfig({ NODE_ENV: 'test', JWT_ALGORITHM: algorithm, JWT_PUBLIC_KEY: pem }));

    it('returns sub for a token signed with the private key', () => {
      expect(verifier.verify(sign({ sub: 'acct_7' }, privateKey, { algorithm, expiresIn: 60 }))).toBe('acct_7');
    });

    it('rejects a token signed with another key pair', () => {
      rejection(verifier, sign({ sub: 'acct_7' }, other.privateKey, { algorithm, expiresIn: 60 }));
    });

    it('rejects an expired token', () => {
      expect(rejection(verifier, sign({ sub: 'acct_7', exp: now() - 60 }, privateKey, { algorithm })).message).toMatch(/expired/i);
    });

    it('rejects a token without exp', () => {
      rejection(verifier, sign({ sub: 'acct_7' }, privateKey, { algorithm }));
    });

    it('rejects HS256 signed with the public key as the secret (algorithm confusion)', () => {
      const body = `${b64url({ alg: 'HS256', typ: 'JWT' })}.${b64url({ sub: 'acct_7', exp: now() + 60 })}`;
      rejection(verifier, `${body}.${createHmac('sha256', pem).update(body).digest('base64url')}`);
    });

    it('rejects an HS256 token signed with the development secret', () => {
      rejection(verifier, sign({ sub: 'acct_7' }, 'dev-only-jwt-secret-change-me-0123456789abcdef', { algorithm: 'HS256', expiresIn: 60 }));
    });

    it('rejects alg none', () => {
      rejection(verifier, `${b64url({ alg: 'none', typ: 'JWT' })}.${b64url({ sub: 'acct_7', exp: now() + 60 })}.`);
    });
  });

  it('RS256 verifier rejects an ES256 token and vice versa', () => {
    const rsa = generateKeyPairSync('rsa', { modulusLength: 2048 });
    const ec = generateKeyPairSync('ec', { namedCurve: 'P-256' });
    const rsVerifier = new JwtVerifier(
      loadConfig({ NODE_ENV: 'test', JWT_ALGORITHM: 'RS256', JWT_PUBLIC_KEY: rsa.publicKey.export({ type: 'spki', format: 'pem' }).toString() }),
    );
    const esVerifier = new JwtVerifier(
      loadConfig({ NODE_ENV: 'test', JWT_ALGORITHM: 'ES256', JWT_PUBLIC_KEY: ec.publicKey.export({ type: 'spki', format: 'pem' }).toString() }),
    );
    rejection(rsVerifier, sign({ sub: 'a' }, ec.privateKey, { algorithm: 'ES256', expiresIn: 60 }));
    rejection(esVerifier, sign({ sub: 'a' }, rsa.privateKey, { algorithm: 'RS256', expiresIn: 60 }));
  });
});
