/**
 * Prints the headers of a signed merchant request, one `Name: value` per line,
 * for curl's `-H @file` (curl 7.55+; `-H @-` reads them from standard input):
 *
 *   npm run -s sign -- GET /diagnostics/whoami | curl -s localhost:3000/diagnostics/whoami -H @-
 *   BODY='{"label":"it'\''s"}'
 *   npm run -s sign -- POST /diagnostics/whoami "$BODY" | curl -s localhost:3000/diagnostics/whoami -H @- --data-raw "$BODY"
 *
 * (bash and zsh also take `-H @<(npm run -s sign -- …)`). No value goes through
 * the shell, so any body works: pass the same "$BODY" to the helper and to
 * `--data-raw`. A body adds `Content-Type: application/json`; methods other
 * than GET and POST need curl's `-X`, as does a POST without a body.
 *
 * The secret: MERCHANT_SECRET, else MERCHANT_ID's entry in MERCHANT_SECRETS,
 * else the development default (MERCHANT_ID defaults to m_demo); `.env` is read
 * like the service reads it. For local use and documentation; merchants
 * implement the same few lines in their own stack (see README).
 */
import { randomBytes } from 'node:crypto';
import { existsSync } from 'node:fs';
import { signRequest } from '../src/platform/auth/merchant-signature';
import { DEV_DEFAULTS, parseNamedSecrets } from '../src/platform/config/load-config';

const usage = () => {
  console.error('usage: npm run -s sign -- <METHOD> </path?query> [jsonBody]   (prints headers for curl -H @-)');
  process.exit(2);
};

/** MERCHANT_SECRETS (or the development default), parsed as the service parses it; a malformed one is a usage error. */
function merchantSecrets(): Map<string, string> {
  try {
    return parseNamedSecrets('MERCHANT_SECRETS', process.env.MERCHANT_SECRETS || DEV_DEFAULTS.MERCHANT_SECRETS);
  } catch (err) {
    console.error(`${(err as Error).message}; or set MERCHANT_SECRET to sign with one secret`);
    process.exit(2);
  }
}

if (existsSync('.env')) process.loadEnvFile('.env');
const args = process.argv.slice(2);
if (args.length < 2 || args.length > 3) usage();
const [rawMethod, path, body = ''] = args;
const method = rawMethod.toUpperCase();
if (!/^[A-Z]+$/.test(method) || !path.startsWith('/') || /\s/.test(path)) usage();

const merchantId = process.env.MERCHANT_ID || 'm_demo';
const secret = process.env.MERCHANT_SECRET || merchantSecrets().get(merchantId);
if (!secret) {
  console.error(`no secret for merchant ${merchantId}: set MERCHANT_SECRET, or add ${merchantId} to MERCHANT_SECRETS`);
  process.exit(2);
}
if (/[\r\n]/.test(merchantId)) {
  console.error('MERCHANT_ID must be one line');
  process.exit(2);
}

const timestamp = String(Date.now());
const nonce = randomBytes(16).toString('hex');
const signature = signRequest(secret, { method, path, timestamp, nonce, body });
const headers = [`X-Merchant-Id: ${merchantId}`, `X-Timestamp: ${timestamp}`, `X-Nonce: ${nonce}`, `X-Signature: ${signature}`];
if (body) headers.push('Content-Type: application/json');
process.stdout.write(headers.join('\n') + '\n');
