import type { NestFastifyApplication } from '@nestjs/platform-fastify';
import { DocumentBuilder, SwaggerModule, type OpenAPIObject, type OperationObject, type ParameterObject } from '@nestjs/swagger';
import { SECURITY } from './security-schemes';
import { AppConfig } from '../config/app-config';
import { DEV_DEFAULTS, parseNamedSecrets } from '../config/load-config';
import { addErrorExamples, addTransportErrors } from './error-examples';
import { addValidationRules } from './schema-rules';
import { withExamplesFromNow } from './date-time';

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

/** The one `name:secret` entry of a development default, e.g. `['m_demo', 'dev-merchant-secret-…']`. */
const devEntry = (variable: keyof typeof DEV_DEFAULTS): [string, string] => [...parseNamedSecrets(variable, DEV_DEFAULTS[variable])][0];

/**
 * What the "Authorize" dialog says about each credential: where it comes from,
 * and outside production which development credentials the service accepts
 * when the variable is not set (DEV_DEFAULTS; production refuses them).
 */
export function securitySchemeDescriptions(production: boolean): Record<keyof typeof SECURITY, string> {
  const [merchantId, merchantSecret] = devEntry('MERCHANT_SECRETS');
  const [serviceName, serviceToken] = devEntry('SERVICE_TOKENS');
  const [adminName, adminKey] = devEntry('ADMIN_API_KEYS');
  const dev = (text: string) => (production ? '' : ` Development: ${text}`);
  return {
    user:
      'App users: a JWT whose `sub` is the account id, signed with JWT_SECRET (HS256) or verified with JWT_PUBLIC_KEY (RS256/ES256).' +
      dev(
        `\`npm run token -- <accountId>\` prints one, signed with JWT_SECRET from the environment or \`.env\`, else with the built-in \`${DEV_DEFAULTS.JWT_SECRET}\`.`,
      ),
    merchant:
      'Merchants: your merchant id, one of MERCHANT_SECRETS (`merchantId:secret,...`). Requests are HMAC-SHA256 signed (X-Timestamp, X-Nonce, X-Signature): fill in MerchantSecret too and this page signs them; `npm run sign` prints the headers for curl.' +
      dev(`without MERCHANT_SECRETS the merchant is \`${merchantId}\`.`),
    merchantSecret:
      'Swagger UI only: the merchant secret. The page signs each request with it in your browser and never sends it.' +
      dev(`without MERCHANT_SECRETS, \`${merchantSecret}\` (merchant \`${merchantId}\`).`),
    service:
      'Internal business systems: a service token, one of SERVICE_TOKENS (`serviceName:token,...`).' +
      dev(`without SERVICE_TOKENS, \`${serviceToken}\` (service \`${serviceName}\`).`),
    admin: 'Ops: an admin API key, one of ADMIN_API_KEYS (`keyName:key,...`).' + dev(`without ADMIN_API_KEYS, \`${adminKey}\` (key \`${adminName}\`).`),
  };
}

/**
 * Tags of the people the service is for first, then internal callers, then ops. A tag names its audience,
 * `<feature> (app)`, `(merchants)` or `(business systems)`, or starts with `ops`, so a new module's tags
 * find their place with no list to edit.
 */
export const USER_FACING_TAG = /\((app|merchants|business systems)\)$/;
function orderTags(document: OpenAPIObject): void {
  const rank = (tag: string) => (USER_FACING_TAG.test(tag) ? 0 : /^ops\b/.test(tag) ? 2 : 1);
  const used = [...new Set(Object.values(document.paths).flatMap((item) => Object.values(item).flatMap((op: { tags?: string[] }) => op?.tags ?? [])))];
  const declared = new Map((document.tags ?? []).map((t) => [t.name, t]));
  const names = [...new Set([...declared.keys(), ...used])];
  document.tags = names
    .map((name, i) => ({ name, i }))
    .sort((a, b) => rank(a.name) - rank(b.name) || a.i - b.i)
    .map(({ name }) => declared.get(name) ?? { name });
}

/** The OpenAPI document: every route, its security, and an example of each error it documents. */
export function buildOpenApiDocument(app: NestFastifyApplication): OpenAPIObject {
  const schemes = securitySchemeDescriptions(app.get(AppConfig).env === 'production');
  const config = new DocumentBuilder()
    .setTitle('redis-pay')
    .setDescription(
      'Payment features over HTTP with state in Redis. Errors always have the body `{statusCode, error, message, details?, requestId}`. ' +
        'Send `X-Request-Id` to correlate logs; it is echoed back.',
    )
    .setVersion('0.1.0')
    .addBearerAuth({ type: 'http', scheme: 'bearer', bearerFormat: 'JWT', description: schemes.user }, SECURITY.user)
    .addApiKey({ type: 'apiKey', in: 'header', name: 'X-Merchant-Id', description: schemes.merchant }, SECURITY.merchant)
    .addApiKey({ type: 'apiKey', in: 'header', name: 'X-Merchant-Secret', description: schemes.merchantSecret }, SECURITY.merchantSecret)
    .addApiKey({ type: 'apiKey', in: 'header', name: 'X-Service-Token', description: schemes.service }, SECURITY.service)
    .addApiKey({ type: 'apiKey', in: 'header', name: 'X-Admin-Key', description: schemes.admin }, SECURITY.admin)
    .build();
  const document = SwaggerModule.createDocument(app, config);
  orderTags(document);
  addValidationRules(document, app);
  addErrorExamples(document, app);
  addTransportErrors(document);
  leaveParametersBlank(document);
  return withExamplesFromNow(document);
}

/**
 * "Try it out" fills each parameter with its example, and an example acts on the wrong data: an optional query
 * parameter so filled narrows what the caller asked for (`GET /wallet?cursor=17` hides the newest entries), and a
 * path id so filled acts on the example's resource. Path parameters and optional query parameters are documented
 * without one (each path parameter's description says what to paste). Runs last: the DTOs' examples still make the
 * error examples.
 */
export function leaveParametersBlank(document: OpenAPIObject): void {
  for (const item of Object.values(document.paths)) {
    for (const op of Object.values(item) as OperationObject[]) {
      for (const p of (op?.parameters ?? []) as ParameterObject[]) {
        if (p.in !== 'path' && !(p.in === 'query' && !p.required)) continue;
        delete p.example;
        delete p.examples;
        if (p.schema && !('$ref' in p.schema)) delete p.schema.example;
      }
    }
  }
}

/** The examples' dates, set from the moment the document is served (a sale that starts now and ends in 2 hours). */
const patchDocumentOnRequest = (_req: unknown, _res: unknown, document: OpenAPIObject) => withExamplesFromNow(document);

/** Swagger UI at /docs with one security scheme per kind of caller, each usable from "Authorize". */
export function setupSwagger(app: NestFastifyApplication): void {
  const document = buildOpenApiDocument(app);
  SwaggerModule.setup('docs', app, document, {
    jsonDocumentUrl: 'docs/openapi.json',
    // Not persisted: Swagger UI would keep every credential, the merchant secret too, in localStorage.
    swaggerOptions: { persistAuthorization: false, requestInterceptor: signMerchantRequest },
    patchDocumentOnRequest,
  });
  // The same document at SwaggerModule's default address, where Nest users and tools look for it.
  SwaggerModule.setup('docs', app, document, { ui: false, raw: ['json'], patchDocumentOnRequest });
}
