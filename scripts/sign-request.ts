/**
 * Prints curl arguments for a signed merchant request:
 *   npm run -s sign -- <METHOD> <path?query> [jsonBody]
 * Reads MERCHANT_ID (default m_demo) and MERCHANT_SECRET (default: the
 * development secret of m_demo). For local use and documentation; merchants
 * implement the same few lines in their own stack (see README).
 */
import { randomBytes } from 'node:crypto';
import { signRequest } from '../src/auth/merchant-signature';
import { DEV_DEFAULTS, parseNamedSecrets } from '../src/config/load-config';

const [method, path, body = ''] = process.argv.slice(2);
if (!method || !path?.startsWith('/')) {
  console.error('usage: npm run -s sign -- <METHOD> </path?query> [jsonBody]');
  process.exit(2);
}
const merchantId = process.env.MERCHANT_ID ?? 'm_demo';
const secret = process.env.MERCHANT_SECRET ?? parseNamedSecrets('MERCHANT_SECRETS', DEV_DEFAULTS.MERCHANT_SECRETS).get(merchantId);
if (!secret) {
  console.error(`no MERCHANT_SECRET for ${merchantId}`);
  process.exit(2);
}
const timestamp = String(Date.now());
const nonce = randomBytes(16).toString('hex');
const signature = signRequest(secret, { method, path, timestamp, nonce, body });
const h = (k: string, v: string) => `-H '${k}: ${v}'`;
const parts = [`-X ${method.toUpperCase()}`, h('X-Merchant-Id', merchantId), h('X-Timestamp', timestamp), h('X-Nonce', nonce), h('X-Signature', signature)];
if (body) parts.push(h('Content-Type', 'application/json'), `--data '${body}'`);
process.stdout.write(parts.join(' ') + '\n');
