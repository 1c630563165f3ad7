import type { NestFastifyApplication } from '@nestjs/platform-fastify';
import { DocumentBuilder, SwaggerModule } from '@nestjs/swagger';
import { SECURITY } from '../auth/security-schemes';

/**
 * Runs in the browser (Swagger UI "Try it out"): when the MerchantSecret
 * scheme is filled in, signs the request exactly as a merchant would and
 * strips the secret, so it never leaves the browser. Must stay self-contained:
 * Swagger serialises it with Function#toString.
 */
/* istanbul ignore next */
export async function signMerchantRequest(req: { url: string; method: string; body?: unknown; headers: Record<string, string> }) {
  const secret = req.headers['X-Merchant-Secret'];
  if (!secret) return req;
  delete req.headers['X-Merchant-Secret'];
  const enc = new TextEncoder();
  const hex = (buf: ArrayBuffer) => Array.from(new Uint8Array(buf), (b) => b.toString(16).padStart(2, '0')).join('');
  const url = new URL(req.url, window.location.href);
  const body = typeof req.body === 'string' ? req.body : req.body ? JSON.stringify(req.body) : '';
  const timestamp = String(Date.now());
  const nonce = crypto.randomUUID().replace(/-/g, '');
  const bodyHash = hex(await crypto.subtle.digest('SHA-256', enc.encode(body)));
  const key = await crypto.subtle.importKey('raw', enc.encode(secret), { name: 'HMAC', hash: 'SHA-256' }, false, ['sign']);
  const canonical = [req.method.toUpperCase(), url.pathname + url.search, timestamp, nonce, bodyHash].join('\n');
  req.headers['X-Timestamp'] = timestamp;
  req.headers['X-Nonce'] = nonce;
  req.headers['X-Signature'] = hex(await crypto.subtle.sign('HMAC', key, enc.encode(canonical)));
  return req;
}
declare const window: { location: { href: string } };

/** Swagger UI at /docs with one security scheme per kind of caller, each usable from "Authorize". */
export function setupSwagger(app: NestFastifyApplication): void {
  const config = new DocumentBuilder()
    .setTitle('redis-pay')
    .setDescription(
      'Payment features over HTTP with state in Redis. Errors always have the body `{statusCode, error, message, details?, requestId}`. ' +
        'Send `X-Request-Id` to correlate logs; it is echoed back.',
    )
    .setVersion('0.1.0')
    .addBearerAuth({ type: 'http', scheme: 'bearer', bearerFormat: 'JWT', description: 'App users: a JWT whose `sub` is the account id. Locally: `npm run token -- <accountId>`.' }, SECURITY.user)
    .addApiKey({ type: 'apiKey', in: 'header', name: 'X-Merchant-Id', description: 'Merchants: your merchant id. Requests are HMAC-SHA256 signed (see README).' }, SECURITY.merchant)
    .addApiKey(
      { type: 'apiKey', in: 'header', name: 'X-Merchant-Secret', description: 'Swagger UI only: the merchant secret. The page signs each request with it in your browser and never sends it.' },
      SECURITY.merchantSecret,
    )
    .addApiKey({ type: 'apiKey', in: 'header', name: 'X-Service-Token', description: 'Internal business systems: a service token from SERVICE_TOKENS.' }, SECURITY.service)
    .addApiKey({ type: 'apiKey', in: 'header', name: 'X-Admin-Key', description: 'Ops: an admin API key from ADMIN_API_KEYS.' }, SECURITY.admin)
    .build();
  const document = SwaggerModule.createDocument(app, config);
  SwaggerModule.setup('docs', app, document, {
    jsonDocumentUrl: 'docs/openapi.json',
    // Not persisted: Swagger UI would keep every credential, the merchant secret too, in localStorage.
    swaggerOptions: { persistAuthorization: false, requestInterceptor: signMerchantRequest },
  });
}
