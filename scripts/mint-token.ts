/**
 * Mints a development app-user token: `npm run token -- <accountId> [ttlSeconds]`.
 * Uses JWT_SECRET from the environment or `.env`, else the development default, and adds the `iss` and `aud`
 * the service requires when JWT_ISSUER / JWT_AUDIENCE are set there.
 * Refuses to run with NODE_ENV=production: production tokens come from the identity provider.
 */
import { existsSync } from 'node:fs';
import { ACCOUNT_ID_RE } from '../src/platform/core/ids';
import { DEV_DEFAULTS } from '../src/platform/config/load-config';
import { devTokenSigner } from '../src/platform/auth/dev-token';

if (existsSync('.env')) process.loadEnvFile('.env');
const [accountId, ttl = '86400'] = process.argv.slice(2);
// The service's own rule for `sub`: a token it would refuse is never printed.
if (!accountId || !ACCOUNT_ID_RE.test(accountId) || !/^\d+$/.test(ttl)) {
  console.error('usage: npm run token -- <accountId> [ttlSeconds]   (accountId: 1-64 of A-Z a-z 0-9 _ . : -, not "." or "..")');
  process.exit(2);
}
if (process.env.NODE_ENV === 'production') {
  console.error('refusing to mint tokens with NODE_ENV=production');
  process.exit(2);
}
if (process.env.JWT_ALGORITHM && process.env.JWT_ALGORITHM !== 'HS256') {
  console.error(`JWT_ALGORITHM is ${process.env.JWT_ALGORITHM}: mint tokens with the private key of your identity provider`);
  process.exit(2);
}
// The service requires iss and aud when JWT_ISSUER / JWT_AUDIENCE are set: a token without them would be refused.
const mint = devTokenSigner({ key: process.env.JWT_SECRET || DEV_DEFAULTS.JWT_SECRET, issuer: process.env.JWT_ISSUER, audience: process.env.JWT_AUDIENCE });
process.stdout.write(mint(accountId, Number(ttl)).token + '\n');
