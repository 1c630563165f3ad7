import { Injectable } from '@nestjs/common';
import { JsonWebTokenError, TokenExpiredError, verify, type VerifyOptions } from 'jsonwebtoken';
import { AppConfig } from '../config/app-config';
import { unauthorized } from '../http/api-error';

const SUB_RE = /^[A-Za-z0-9_.:-]{1,64}$/;

/** Verifies app-user bearer tokens: signature (HS256, RS256 or ES256 as configured), expiry, and `sub`. */
@Injectable()
export class JwtVerifier {
  private readonly options: VerifyOptions;
  private readonly key: string;

  constructor(config: AppConfig) {
    const j = config.jwt;
    this.key = j.key;
    this.options = {
      algorithms: [j.algorithm],
      issuer: j.issuer,
      audience: j.audience,
      clockTolerance: j.clockToleranceS,
    };
  }

  /** Returns the account id (`sub`) or throws a 401 `ApiError`. */
  verify(token: string): string {
    let payload: unknown;
    try {
      payload = verify(token, this.key, this.options);
    } catch (err) {
      if (err instanceof TokenExpiredError) throw unauthorized('Bearer token has expired');
      if (err instanceof JsonWebTokenError) throw unauthorized(`Bearer token is invalid: ${err.message}`);
      throw unauthorized('Bearer token is invalid');
    }
    const claims = payload as { sub?: unknown; exp?: unknown };
    if (typeof claims.exp !== 'number') throw unauthorized('Bearer token has no exp claim');
    if (typeof claims.sub !== 'string' || !SUB_RE.test(claims.sub)) throw unauthorized('Bearer token has no valid sub claim');
    return claims.sub;
  }
}
