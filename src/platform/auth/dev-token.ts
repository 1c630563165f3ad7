import { createSigner } from 'fast-jwt';
import type { JwtConfig } from '../config/app-config';

/** A development app-user token and when it expires. */
export interface DevToken {
  accountId: string;
  token: string;
  expiresAt: string;
}

/**
 * Signs development app-user tokens (HS256 with the service's secret, with the `iss` and `aud` it requires when
 * set): `POST /dev/token` and `npm run token` both. Production tokens come from the identity provider.
 */
export function devTokenSigner(jwt: Pick<JwtConfig, 'key' | 'issuer' | 'audience'>): (accountId: string, ttlSeconds: number) => DevToken {
  const sign = createSigner({ key: jwt.key, algorithm: 'HS256', ...(jwt.issuer ? { iss: jwt.issuer } : {}), ...(jwt.audience ? { aud: jwt.audience } : {}) });
  return (accountId, ttlSeconds) => {
    const exp = Math.floor(Date.now() / 1000) + ttlSeconds;
    return { accountId, token: sign({ sub: accountId, exp }) as string, expiresAt: new Date(exp * 1000).toISOString() };
  };
}
