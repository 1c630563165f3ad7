import { Injectable } from '@nestjs/common';
import { randomBytes } from 'node:crypto';
import type { FastifyRequest } from 'fastify';
import { AppConfig } from '../config/app-config';
import { UnauthenticatedError } from '../core/domain.error';
import { SIGNED_MERCHANT_ID_RE } from '../core/ids';
import { KeyBuilder } from '../redis/key-builder';
import { RedisService } from '../redis/redis.service';
import { nonceKey } from './auth.keys';
import { signatureMatches } from './merchant-signature';
import { HEADERS, SECURITY } from '../http/security-schemes';

export const NONCE_RE = /^[A-Za-z0-9_-]{16,64}$/;
/** The one answer to a signature that does not match, and to a merchant id that does not exist. */
const SIGNATURE_MISMATCH = 'X-Signature does not match the request for this X-Merchant-Id';
/** Extra nonce lifetime covering clock skew between instances. */
const NONCE_MARGIN_MS = 60_000;

const header = (req: FastifyRequest, name: string): string | undefined => {
  const v = req.headers[name];
  return typeof v === 'string' ? v : undefined;
};

/**
 * Verifies HMAC-SHA256 signed merchant requests: the merchant's secret, a
 * timestamp within the window, the signature over method, path, timestamp,
 * nonce and body hash, and a nonce never seen before (remembered in Redis for
 * twice the window, so a replay inside the window is refused).
 */
/**
 * A merchant request without all four signing headers. X-Merchant-Id alone is what Swagger UI sends when only
 * MerchantId is filled in under "Authorize": it signs the request only with MerchantSecret filled in too.
 */
const unsignedMessage = (idOnly: boolean): string =>
  (idOnly ? 'X-Merchant-Id came without a signature' : 'Merchant requests need X-Merchant-Id, X-Timestamp, X-Nonce and X-Signature') +
  `: sign the request with your merchant secret (in Swagger UI, fill in ${SECURITY.merchantSecret} under "Authorize" as well; the page signs each request with it)`;

@Injectable()
export class MerchantVerifier {
  /**
   * An unknown merchant's requests are checked against this secret, which no merchant has, and refused as a
   * signature that does not match: the answer (and its timing) never tells whether a merchant id exists.
   */
  private readonly decoySecret = randomBytes(32).toString('hex');

  constructor(
    private readonly config: AppConfig,
    private readonly redis: RedisService,
    private readonly keys: KeyBuilder,
  ) {}

  /**
   * Returns the merchant id or throws 401. With `consumeNonce` false (a merchant
   * calling a route it may not use) the nonce is checked for format only.
   */
  async verify(req: FastifyRequest, consumeNonce = true): Promise<string> {
    const merchantId = header(req, HEADERS.merchantId);
    const timestamp = header(req, HEADERS.timestamp);
    const nonce = header(req, HEADERS.nonce);
    const signature = header(req, HEADERS.signature);
    if (!merchantId || !timestamp || !nonce || !signature) {
      throw new UnauthenticatedError(unsignedMessage(!!merchantId && !timestamp && !nonce && !signature));
    }
    const known = SIGNED_MERCHANT_ID_RE.test(merchantId) ? this.config.merchantSecrets.get(merchantId) : undefined;
    const secret = known ?? this.decoySecret;
    if (!/^\d{10,16}$/.test(timestamp)) throw new UnauthenticatedError('X-Timestamp must be Unix time in milliseconds');
    const now = Date.now();
    const windowMs = this.config.merchantSignatureWindowMs;
    if (Math.abs(now - Number(timestamp)) > windowMs) {
      // Unix seconds (a common slip) would be within the window as milliseconds: say so rather than blame the clock.
      if (Math.abs(now - Number(timestamp) * 1000) <= windowMs) throw new UnauthenticatedError('X-Timestamp must be Unix time in milliseconds, not seconds');
      throw new UnauthenticatedError('X-Timestamp is outside the allowed window; check the clock');
    }
    if (!NONCE_RE.test(nonce)) throw new UnauthenticatedError('X-Nonce must be 16-64 characters of A-Z a-z 0-9 _ -');
    const ok = signatureMatches(secret, { method: req.method, path: req.url, timestamp, nonce, body: req.rawBody ?? '' }, signature);
    if (!ok || !known) throw new UnauthenticatedError(SIGNATURE_MISMATCH);
    if (consumeNonce) await this.claimNonce(merchantId, nonce);
    return merchantId;
  }

  private async claimNonce(merchantId: string, nonce: string): Promise<void> {
    const key = nonceKey(this.keys, merchantId, nonce);
    // Remembered past the window on both sides plus a margin for clock differences between instances.
    const ttlMs = this.config.merchantSignatureWindowMs * 2 + NONCE_MARGIN_MS;
    const claimed = await this.redis.command((c) => c.set(key, '1', 'PX', ttlMs, 'NX'));
    if (claimed !== 'OK') throw new UnauthenticatedError('X-Nonce has already been used (replayed request)');
  }
}
