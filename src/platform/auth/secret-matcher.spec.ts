import { SecretMatcher } from './secret-matcher';

const SECRETS = new Map([
  ['billing', 'billing-token-0123456789abcdef'],
  ['ledger', 'ledger-token-fedcba9876543210'],
  ['ops', 'ops-key-ÄÖÜ-unicode-0123456789'],
]);

describe(SecretMatcher.name, () => {
  const matcher = new SecretMatcher(SECRETS);

  it.each([...SECRETS])('names %s for its own secret', (name, secret) => {
    expect(matcher.match(secret)).toBe(name);
  });

  it.each([
    ['a wrong value', 'not-a-configured-token-000000'],
    ['an empty value', ''],
    ['a prefix of a secret', 'billing-token-0123456789abcde'],
    ['a one-character prefix', 'b'],
    ['a secret with an extra character', 'billing-token-0123456789abcdef0'],
    ['a secret with trailing whitespace', 'billing-token-0123456789abcdef '],
    ['a secret in another case', 'BILLING-TOKEN-0123456789ABCDEF'],
    ['the name instead of the secret', 'billing'],
    ['two secrets joined', 'billing-token-0123456789abcdefledger-token-fedcba9876543210'],
    ['a unicode secret normalised differently', 'ops-key-A\u0308ÖÜ-unicode-0123456789'],
  ])('rejects %s', (_label, presented) => {
    expect(matcher.match(presented)).toBeUndefined();
  });

  it('matches nothing when no secrets are configured', () => {
    expect(new SecretMatcher(new Map()).match('')).toBeUndefined();
    expect(new SecretMatcher(new Map()).match('anything-at-all-000000')).toBeUndefined();
  });

  it('keeps working after the source map changes (copies at construction)', () => {
    const source = new Map([['a', 'aaaaaaaaaaaaaaaa']]);
    const m = new SecretMatcher(source);
    source.set('a', 'bbbbbbbbbbbbbbbb');
    expect(m.match('aaaaaaaaaaaaaaaa')).toBe('a');
    expect(m.match('bbbbbbbbbbbbbbbb')).toBeUndefined();
  });

  it('returns the first configured name when two names share a secret', () => {
    const m = new SecretMatcher(
      new Map([
        ['first', 'shared-secret-00000000'],
        ['second', 'shared-secret-00000000'],
      ]),
    );
    expect(m.match('shared-secret-00000000')).toBe('first');
  });
});
