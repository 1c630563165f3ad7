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
  // The declared ones first (in their order), and only those some operation uses (the development tag in production is not).
  const names = [...new Set([...declared.keys(), ...used])].filter((name) => used.includes(name));
  document.tags = names
    .map((name, i) => ({ name, i }))
    .sort((a, b) => rank(a.name) - rank(b.name) || a.i - b.i)
    .map(({ name }) => declared.get(name) ?? { name });
}

/** The tag of the development-only operations (absent from a production service). */
export const DEV_TAG = 'development';

/** What each group of operations is for, and who calls it. */
export const TAG_DESCRIPTIONS: Readonly<Record<string, string>> = {
  'messages (app)': "App users (AppUserJwt): the account's message center: pull, read, mark read, delete.",
  'payments (app)': 'App users (AppUserJwt): an order at checkout, its payment plan, and paying it.',
  'wallet (app)': "App users (AppUserJwt): the account's balances and entries, newest first.",
  'flash sales (app)': "App users (AppUserJwt): the sales and their products, reserving (an order to pay), the account's reservations.",
  'red envelopes (app)': "App users (AppUserJwt): a rain's screen, grabbing an envelope, the account's envelopes and their crediting.",
  'orders (merchants)': 'Merchants (MerchantId and MerchantSecret; this page signs each request): create, read and close orders.',
  'close reminders (merchants)': "Merchants (MerchantId and MerchantSecret): the calling merchant's close-reminder settings.",
  'messages (business systems)': 'Internal business systems (ServiceToken): write and withdraw messages, start and finish pending actions.',
  'locks (internal services)': 'Internal services (ServiceToken): distributed locks with leases, reentrant per owner.',
  diagnostics: 'Any one identity: `GET /diagnostics/whoami` says who your credentials make you; a signed-request check for merchants.',
  [DEV_TAG]: 'Development only (absent in production): a token for an app user, without the terminal.',
  ops: 'Health probes (no credentials) and Prometheus metrics (AdminKey).',
  'ops: wallets': 'Ops (AdminKey): top up a wallet (an account or a merchant, e.g. the sponsor of a rain), read any wallet.',
  'ops: flash sales': 'Ops (AdminKey): create, edit, check and end flash sales; their results.',
  'ops: red envelopes': "Ops (AdminKey): create a rain (funded from the sponsor's wallet), follow it, reconcile it, re-drive it.",
  'ops: close reminders': "Ops (AdminKey): each merchant's close-reminder settings, and what became of an order's reminder.",
  'ops: messages': 'Ops (AdminKey): broadcast a message to every account or to a list.',
  'ops: payment channels': "Ops (AdminKey): the simulated payment channels' latency and outcomes (this instance).",
  'ops: delay queues': 'Ops (AdminKey): queues, their dead letters, retry and cancel.',
};

/**
 * The "Getting started" section of the document's description: which identity each group needs, one identity at a
 * time, and in development how to get a token here and in which order the examples work.
 */
export function gettingStarted(production: boolean, devTokenPath: string | undefined): string {
  const [merchantId] = devEntry('MERCHANT_SECRETS');
  const lines = [
    '## Getting started',
    'Each group of operations names who calls it. Open **Authorize**, fill in that identity, then **Try it out**:',
    '- *(app)* groups: an app user, **AppUserJwt**. Paste the token alone: Swagger UI adds "Bearer ".' +
      (devTokenPath ? ` In development, \`POST ${devTokenPath}\` (group *${DEV_TAG}*) gives one for \`acc_1001\`; so does \`npm run token -- acc_1001\`.` : ''),
    '- *(merchants)* groups: a merchant, **MerchantId** and **MerchantSecret** both: this page signs each request with the secret, which never leaves the browser.',
    '- *(business systems)* and *locks*: **ServiceToken**. *ops* groups: **AdminKey** (the health probes need nothing).',
    '- *diagnostics*: any one; `GET /diagnostics/whoami` says who you are.',
    '',
    'Authorize **one identity at a time** (**Logout** the others): an operation that accepts several kinds, such as `GET /diagnostics/whoami`, is sent every one you authorized and answers 401 "Send exactly one kind of credential".',
    'Path parameters start empty: paste the ids your requests used or were answered (each says which).',
  ];
  if (!production) {
    lines.push(
      '',
      `In development, with the credentials "Authorize" names, the request examples work as given, in this order: top up \`merchant:${merchantId}\` (*ops: wallets*), create the sale (*ops: flash sales*), reserve as \`acc_1001\` (*flash sales (app)*), create an order as \`${merchantId}\` for \`acc_1001\` (*orders (merchants)*) and read it as the user (*payments (app)*), create the rain the top-up funds (*ops: red envelopes*) and grab (*red envelopes (app)*).`,
    );
  }
  return lines.join('\n');
}

/** The OpenAPI document: every route, its security, and an example of each error it documents. */
export function buildOpenApiDocument(app: NestFastifyApplication): OpenAPIObject {
  const production = app.get(AppConfig).env === 'production';
  const schemes = securitySchemeDescriptions(production);
  const builder = new DocumentBuilder()
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
    .addApiKey({ type: 'apiKey', in: 'header', name: 'X-Admin-Key', description: schemes.admin }, SECURITY.admin);
  for (const [name, description] of Object.entries(TAG_DESCRIPTIONS)) builder.addTag(name, description);
  const document = SwaggerModule.createDocument(app, builder.build());
  // The development token's route, where the service serves it (never in production).
  const devTokenPath = Object.entries(document.paths).find(([, item]) => item.post?.tags?.includes(DEV_TAG))?.[0];
  document.info.description += `\n\n${gettingStarted(production, devTokenPath)}`;
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
    swaggerOptions: {
      persistAuthorization: false,
      requestInterceptor: signMerchantRequest,
      // A box that filters the operations by tag; the ~100 schemas folded away (each operation shows its own).
      filter: true,
      defaultModelsExpandDepth: -1,
    },
    patchDocumentOnRequest,
  });
  // The same document at SwaggerModule's default address, where Nest users and tools look for it.
  SwaggerModule.setup('docs', app, document, { ui: false, raw: ['json'], patchDocumentOnRequest });
}
