import { createHash, timingSafeEqual } from 'node:crypto';

/**
 * Finds which configured secret a presented one is, in constant time: every
 * candidate is compared (SHA-256 digests, so lengths match), no early exit.
 */
export class SecretMatcher {
  private readonly digests: Array<[name: string, digest: Buffer]>;

  constructor(secrets: ReadonlyMap<string, string>) {
    this.digests = [...secrets].map(([name, secret]) => [name, digest(secret)]);
  }

  /** The name of the matching secret, or undefined. */
  match(presented: string): string | undefined {
    const d = digest(presented);
    let found: string | undefined;
    for (const [name, candidate] of this.digests) {
      if (timingSafeEqual(d, candidate) && found === undefined) found = name;
    }
    return found;
  }
}

const digest = (s: string) => createHash('sha256').update(s, 'utf8').digest();
