import fc from 'fast-check';

/**
 * `fc.stringMatching` for the service's id rules. fast-check cannot generate
 * from a negative lookahead (the rules use one to refuse "." and ".."), so it
 * generates from the rule without it and keeps what the whole rule accepts.
 */
export function matching(re: RegExp): fc.Arbitrary<string> {
  const withoutLookahead = new RegExp(re.source.replace(/\(\?![^)]*\)/g, ''), re.flags);
  return fc.stringMatching(withoutLookahead).filter((s) => re.test(s));
}
