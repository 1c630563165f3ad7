import { createHmac, timingSafeEqual } from 'node:crypto';
import { sha256Hex } from '../core/digest';

/** The parts of a merchant request the signature covers. */
export interface SignedParts {
  method: string;
  /** Path with query string, exactly as sent (e.g. `/merchant/orders?x=1`). */
  path: string;
  /** Unix time in milliseconds, as sent in `X-Timestamp`. */
  timestamp: string;
  /** Single-use random string, as sent in `X-Nonce`. */
  nonce: string;
  /** The raw request body (empty for GET). */
  body: Buffer | string;
}

export { sha256Hex };

/**
 * The string a merchant signs, one field per line:
 * `METHOD \n PATH?QUERY \n TIMESTAMP \n NONCE \n hex(sha256(body))`.
 */
export function canonicalString(p: SignedParts): string {
  return [p.method.toUpperCase(), p.path, p.timestamp, p.nonce, sha256Hex(p.body)].join('\n');
}

/** hex(HMAC-SHA256(secret, canonicalString)) — what goes in `X-Signature`. */
export function signRequest(secret: string, p: SignedParts): string {
  return createHmac('sha256', secret).update(canonicalString(p)).digest('hex');
}

/** Constant-time check of a hex signature. */
export function signatureMatches(secret: string, p: SignedParts, signatureHex: string): boolean {
  if (!/^[0-9a-f]{64}$/i.test(signatureHex)) return false;
  const expected = Buffer.from(signRequest(secret, p), 'hex');
  return timingSafeEqual(expected, Buffer.from(signatureHex.toLowerCase(), 'hex'));
}
