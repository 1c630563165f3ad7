import { plainToInstance } from 'class-transformer';
import { validateSync, type ValidationError, type ValidatorOptions } from 'class-validator';
import request from 'supertest';
import { HEADERS, SECURITY } from '../../src/platform/http/security-schemes';
import { DEV_DEFAULTS, parseNamedSecrets } from '../../src/platform/config/load-config';
import { MAX_AMOUNT } from '../../src/features/orders/dto/create-order.dto';
import { ROUTE_BODY_LIMITS } from '../../src/platform/http/body-limits';
import { routeInputs } from '../../src/platform/http/error-examples';
import { USER_FACING_TAG } from '../../src/platform/http/swagger';
import { validationPipeOptions } from '../../src/platform/http/validation';
import { RedisServerHandle, startRedisServer } from '../harness/redis-server';
import { CREDS, merchantHeaders, startTestApp, TestApp, userToken } from '../support/test-app';
import { inOneSecond } from '../support/openapi-cases';

/**
 * The OpenAPI document as clients read it: where it is served, the order of
 * its tags, what "Authorize" says, and above all the error examples: each
 * fits its status and its operation, and the ones that can be replayed
 * (400, 401, 403) are exactly what the service answers.
 */

type Kind = 'user' | 'merchant' | 'service' | 'admin';
interface Schema {
  $ref?: string;
  properties?: Record<string, Schema>;
  required?: string[];
  example?: unknown;
  default?: unknown;
  enum?: unknown[];
  pattern?: string;
  maximum?: number;
  minimum?: number;
  maxLength?: number;
  type?: string;
  format?: string;
  additionalProperties?: unknown;
}
interface Example {
  summary: string;
  value: { statusCode: number; error: string; message: string; details?: Array<{ field: string; errors: string[] }>; requestId: string };
}
interface Response {
  description: string;
  content?: Record<string, { schema?: Schema; examples?: Record<string, Example> }>;
}
interface Operation {
  operationId?: string;
  parameters?: Array<{ name: string; in: string; required?: boolean; example?: unknown; examples?: unknown; description?: string; schema?: Schema }>;
  requestBody?: { content: Record<string, { schema: Schema }> };
  responses: Record<string, Response>;
  security?: Array<Record<string, string[]>>;
  tags?: string[];
}
interface Doc {
  paths: Record<string, Record<string, Operation>>;
  components: { schemas: Record<string, Schema>; securitySchemes: Record<string, { description: string }> };
  tags: Array<{ name: string; description?: string }>;
  info: { description: string };
}

const KIND_OF_SCHEME: Record<string, Kind> = {
  [SECURITY.user]: 'user',
  [SECURITY.merchant]: 'merchant',
  [SECURITY.service]: 'service',
  [SECURITY.admin]: 'admin',
};
/** The error code each status documents (409s name their own, listed in the response's description). */
const CODE_OF_STATUS: Record<string, string> = {
  400: 'VALIDATION_FAILED',
  401: 'UNAUTHORIZED',
  403: 'FORBIDDEN',
  404: 'NOT_FOUND',
  413: 'PAYLOAD_TOO_LARGE',
  414: 'URI_TOO_LONG',
  415: 'UNSUPPORTED_MEDIA_TYPE',
  429: 'RATE_LIMITED',
  503: 'REDIS_UNAVAILABLE',
};

describe('OpenAPI document', () => {
  let redis: RedisServerHandle;
  let t: TestApp;
  let doc: Doc;

  beforeAll(async () => {
    redis = await startRedisServer();
    // No rate limiting: the replays below send many requests, failed authentications among them.
    t = await startTestApp(redis.url, { RATE_LIMIT_ENABLED: 'false' });
    doc = (await request(t.server).get('/docs/openapi.json').expect(200)).body as Doc;
  });
  afterAll(async () => {
    await t.close();
    await redis.destroy();
  });

  const operations = () =>
    Object.entries(doc.paths).flatMap(([path, item]) =>
      Object.entries(item).map(([method, op]) => ({ id: `${method.toUpperCase()} ${path}`, path, method, op })),
    );
  const kindsOf = (op: Operation): Kind[] => [
    ...new Set(
      (op.security ?? []).flatMap((s) =>
        Object.keys(s)
          .map((k) => KIND_OF_SCHEME[k])
          .filter(Boolean),
      ),
    ),
  ];
  const resolve = (s: Schema | undefined): Schema | undefined => (s?.$ref ? doc.components.schemas[s.$ref.split('/').pop()!] : s);
  const bodySchema = (op: Operation) => resolve(op.requestBody?.content['application/json']?.schema);
  /** Every documented error response that has the error body, with its examples. */
  const errorResponses = () =>
    operations().flatMap(({ id, path, method, op }) =>
      Object.entries(op.responses)
        .filter(([, r]) => r.content?.['application/json']?.schema?.$ref === '#/components/schemas/ErrorBodyDto')
        .map(([status, r]) => ({ id, path, method, op, status, response: r, examples: Object.entries(r.content!['application/json'].examples ?? {}) })),
    );

  it('serves the same document at /docs-json (SwaggerModule default) and /docs/openapi.json', async () => {
    const [res, served] = await inOneSecond(() =>
      Promise.all([request(t.server).get('/docs-json').expect(200), request(t.server).get('/docs/openapi.json').expect(200)]),
    );
    expect(res.headers['content-type']).toMatch(/^application\/json/);
    expect(res.body).toEqual(served.body);
  });

  it('lists the tags of the people the service is for (messages, orders, payments) before the ops tags', () => {
    const names = doc.tags.map((tag) => tag.name);
    const used = new Set(operations().flatMap(({ op }) => op.tags ?? []));
    expect(new Set(names)).toEqual(used);
    const userFacing = names.map((n, i) => [n, i] as const).filter(([n]) => USER_FACING_TAG.test(n));
    const ops = names.map((n, i) => [n, i] as const).filter(([n]) => /^ops\b/.test(n));
    expect(userFacing.map(([n]) => n).sort()).toEqual([
      'close reminders (merchants)',
      'flash sales (app)',
      'messages (app)',
      'messages (business systems)',
      'orders (merchants)',
      'payments (app)',
      'red envelopes (app)',
      'wallet (app)',
    ]);
    expect(ops.length).toBeGreaterThan(0);
    expect(Math.max(...userFacing.map(([, i]) => i))).toBeLessThan(Math.min(...ops.map(([, i]) => i)));
    expect(names.slice(0, userFacing.length)).toEqual(userFacing.map(([n]) => n));
  });

  it('opens with "Getting started": the identity of each group, one at a time, and (in development) a token without the terminal', () => {
    const description = doc.info.description;
    const start = description.slice(description.indexOf('## Getting started'));
    expect(description).toContain('## Getting started');
    for (const scheme of Object.values(SECURITY)) expect(start).toContain(`**${scheme}**`);
    expect(start).toContain('one identity at a time');
    expect(start).toContain('exactly one kind of credential');
    expect(start).toContain('`POST /dev/token`');
    expect(Object.keys(doc.paths)).toContain('/dev/token');
  });

  it('says what every tag is for, and names flash sales one way', () => {
    expect(doc.tags.filter((tag) => !tag.description).map((tag) => tag.name)).toEqual([]);
    expect(doc.tags.map((tag) => tag.name).filter((name) => /seckill|flash/i.test(name))).toEqual(['flash sales (app)', 'ops: flash sales']);
  });

  it('turns on the operation filter and folds the schemas away in Swagger UI', async () => {
    const init = (await request(t.server).get('/docs/swagger-ui-init.js').expect(200)).text;
    expect(init).toMatch(/"filter":\s*true/);
    expect(init).toMatch(/"defaultModelsExpandDepth":\s*-1/);
  });

  it('says in "Authorize" where each development credential comes from', () => {
    const text = (scheme: string) => doc.components.securitySchemes[scheme].description;
    const [[merchantId, merchantSecret]] = parseNamedSecrets('MERCHANT_SECRETS', DEV_DEFAULTS.MERCHANT_SECRETS);
    const [[, serviceToken]] = parseNamedSecrets('SERVICE_TOKENS', DEV_DEFAULTS.SERVICE_TOKENS);
    const [[, adminKey]] = parseNamedSecrets('ADMIN_API_KEYS', DEV_DEFAULTS.ADMIN_API_KEYS);
    expect(text(SECURITY.user)).toContain('npm run token -- <accountId>');
    expect(text(SECURITY.user)).toContain('JWT_SECRET');
    expect(text(SECURITY.user)).toContain(`\`${DEV_DEFAULTS.JWT_SECRET}\``);
    expect(text(SECURITY.merchant)).toContain(`\`${merchantId}\``);
    expect(text(SECURITY.merchant)).toContain('MERCHANT_SECRETS');
    expect(text(SECURITY.merchantSecret)).toContain(`\`${merchantSecret}\``);
    expect(text(SECURITY.service)).toContain(`\`${serviceToken}\``);
    expect(text(SECURITY.service)).toContain('SERVICE_TOKENS');
    expect(text(SECURITY.admin)).toContain(`\`${adminKey}\``);
    expect(text(SECURITY.admin)).toContain('ADMIN_API_KEYS');
  });

  it('carries the limits class-validator enforces on request DTOs (the Swagger plugin, as in nest build)', () => {
    const s = doc.components.schemas;
    expect(s.CreateOrderDto.properties!.amount).toMatchObject({ minimum: 1, maximum: MAX_AMOUNT });
    expect(s.CreateOrderDto.properties!.currency).toMatchObject({ pattern: '^[A-Z]{3}$', enum: expect.arrayContaining(['CNY', 'EUR']) });
    expect(s.TouchDto.properties!.label).toMatchObject({ maxLength: 32, pattern: '^[A-Za-z0-9_-]+$' });
  });

  it('refuses no value its schema documents as valid for its type or characters: @IsInt fields are integers, @Matches fields carry the pattern', () => {
    // A fraction where the document says number, and text with a space, a tilde and an accent where it gives no
    // pattern, enum or format: the field's own rules (not the business checks after them) must let each through.
    const inputs = routeInputs(t.app);
    const options = validationPipeOptions();
    const ruleErrors = (dto: new () => object, field: string, value: unknown) =>
      validateSync(plainToInstance(dto, { [field]: value }, options.transformOptions) as object, options as ValidatorOptions)
        .filter((e: ValidationError) => e.property === field)
        .flatMap((e) => Object.keys(e.constraints ?? {}))
        .filter((c) => c === 'isInt' || c === 'matches');
    const refused: string[] = [];
    let checked = 0;
    const check = (where: string, dto: (new () => object) | undefined, field: string, s: Schema | undefined, asText: boolean) => {
      if (!dto || !s) return;
      let value: unknown;
      if (s.type === 'number') {
        const v = (s.minimum ?? 0) + 0.5;
        if (s.maximum === undefined || v <= s.maximum) value = asText ? String(v) : v;
      } else if (s.type === 'string' && !s.pattern && !s.enum && !s.format && (s.maxLength ?? 8) >= 5) {
        value = 'x y~é';
      }
      if (value === undefined) return;
      checked++;
      const broken = ruleErrors(dto, field, value);
      if (broken.length) refused.push(`${where} ${field}: ${JSON.stringify(value)} (${broken.join(', ')})`);
    };
    for (const { id, op } of operations()) {
      const route = inputs.get(op.operationId ?? '') ?? {};
      const body = bodySchema(op);
      for (const [field, s] of Object.entries(body?.properties ?? {})) check(id, route.body as new () => object, field, resolve(s), false);
      for (const p of op.parameters ?? []) {
        const dto = p.in === 'path' ? route.path : p.in === 'query' ? route.query : undefined;
        check(id, dto as new () => object, p.name, resolve(p.schema), true);
      }
    }
    expect(checked).toBeGreaterThan(0);
    expect(refused).toEqual([]);
  });

  it('describes what every object schema holds (GET /health/ready documented an object with no properties)', async () => {
    const empty = Object.entries(doc.components.schemas)
      .filter(([, s]) => s.type === 'object' && Object.keys(s.properties ?? {}).length === 0 && !s.additionalProperties)
      .map(([name]) => name);
    expect(empty).toEqual([]);
    const ready = await request(t.server).get('/health/ready');
    const schema = resolve(doc.paths['/health/ready'].get.responses['200'].content!['application/json'].schema)!;
    expect(Object.keys(schema.properties ?? {}).sort()).toEqual(Object.keys(ready.body).sort());
  });

  it('gives every documented error response examples whose status and code fit it', () => {
    const problems: string[] = [];
    for (const { id, status, response, examples } of errorResponses()) {
      if (examples.length === 0) problems.push(`${id} ${status}: no examples`);
      // A 409's codes are the ones its description names, each with an example.
      const listed = status === '409' ? new Set(response.description.match(/\b[A-Z][A-Z_]{3,}\b/g)) : undefined;
      if (listed && [...listed].sort().join() !== [...new Set(examples.map(([, e]) => e.value.error))].sort().join()) {
        problems.push(`${id} 409: codes in the description ${[...listed].sort()} but examples of ${examples.map(([, e]) => e.value.error).sort()}`);
      }
      for (const [key, { summary, value }] of examples) {
        const want = listed ? [...listed] : [CODE_OF_STATUS[status]];
        if (value.statusCode !== Number(status) || !want.includes(value.error)) problems.push(`${id} ${status} ${key}: ${value.statusCode} ${value.error}`);
        if (!value.message || !value.requestId || !summary) problems.push(`${id} ${status} ${key}: no message, requestId or summary`);
      }
    }
    expect(problems).toEqual([]);
    // What acceptance testing found on every error response: a validation error of a field most routes do not have, with a wrong limit.
    expect(JSON.stringify(doc)).not.toContain('amount must not be greater than 100000000"');
  });

  it("names in each 400 example one of the operation's own fields, and only operations that take input document a 400", () => {
    const problems: string[] = [];
    for (const { id, op } of operations()) {
      const fields = [
        ...Object.keys(bodySchema(op)?.properties ?? {}),
        ...(op.parameters ?? []).filter((p) => p.in === 'path' || p.in === 'query').map((p) => p.name),
      ];
      const bad = op.responses['400'];
      if (!bad !== (fields.length === 0)) problems.push(`${id}: ${bad ? 'a 400 but no input' : 'input but no 400'}`);
      for (const [key, { value }] of Object.entries(bad?.content?.['application/json']?.examples ?? {})) {
        const named = value.details?.map((d) => d.field) ?? [];
        if (named.length !== 1 || !fields.includes(named[0]) || !value.message.includes(named[0]))
          problems.push(`${id} 400 ${key}: names ${named} (fields: ${fields})`);
      }
    }
    expect(problems).toEqual([]);
  });

  it('leaves path parameters and optional query parameters blank in "Try it out" (no example), and says what to paste in each path parameter', () => {
    const filled: string[] = [];
    const undescribed: string[] = [];
    const checked = { path: 0, query: 0 };
    for (const { id, op } of operations()) {
      for (const p of op.parameters ?? []) {
        if (p.in !== 'path' && !(p.in === 'query' && !p.required)) continue;
        checked[p.in as 'path' | 'query']++;
        if (p.example !== undefined || p.examples !== undefined || resolve(p.schema)?.example !== undefined) filled.push(`${id} ${p.in} ${p.name}`);
        if (p.in === 'path' && !p.description) undescribed.push(`${id} ${p.name}`);
      }
    }
    expect(checked.path).toBeGreaterThan(20);
    expect(checked.query).toBeGreaterThan(5);
    expect(filled).toEqual([]);
    expect(undescribed).toEqual([]);
    // What a new user met: a filter of their own reservations, a cursor past the newest entries, a sale to reserve from.
    const param = (path: string, method: string, name: string) => doc.paths[path][method].parameters!.find((p) => p.name === name)!;
    expect(param('/seckill/reservations', 'get', 'activityId')).toMatchObject({ in: 'query', required: false });
    expect(param('/wallet', 'get', 'cursor')).toMatchObject({ in: 'query', required: false });
    expect(param('/seckill/activities/{activityId}/products/{productId}/reservations', 'post', 'activityId').description).toMatch(/your sale was created with/);
  });

  /** A value of a documented parameter or property: its example, default or first enum value. */
  const sample = (s: Schema | undefined, example?: unknown) => example ?? s?.example ?? s?.default ?? s?.enum?.[0];
  /**
   * A well-formed value of each path parameter (the document leaves them blank), naming what a fresh service does
   * not have.
   */
  const PATH_VALUES: Record<string, string> = {
    queue: 'close-reminder',
    id: 'order-1001',
    name: 'inventory:sku-42',
    merchantId: 'm_coffee',
    orderId: 'ord_3f9a0c1b2d4e5f60718293a4',
    planId: 'ord_3f9a0c1b2d4e5f60718293a4_p1',
    merchantOrderNo: 'M20261122-0001',
    activityId: 'w48-data',
    productId: 'data-10g',
    reservationId: 'sk_5d41402abc4b2a76b9719d91',
    ownerId: 'account:acc_1001',
    msgId: '1795302000000000',
    accountId: 'acc_1001',
  };
  const pathValue = (p: { name: string; example?: unknown; schema?: Schema }) => {
    const v = sample(resolve(p.schema), p.example ?? PATH_VALUES[p.name]);
    if (v === undefined) throw new Error(`no value for the path parameter ${p.name}: add one to PATH_VALUES`);
    return v;
  };

  /** Sends `method path` with valid inputs from the examples, `override` applied, and a credential of `kind` (or none). */
  async function send(
    method: string,
    path: string,
    op: Operation,
    kind: Kind | undefined,
    override: { field?: string; value?: unknown; credential?: 'invalid' } = {},
  ) {
    const location = override.field === undefined ? undefined : ((op.parameters ?? []).find((p) => p.name === override.field)?.in ?? 'body');
    const url = path.replace(/\{([^}]+)\}/g, (_, name: string) => {
      const p = op.parameters!.find((x) => x.in === 'path' && x.name === name)!;
      return encodeURIComponent(String(location === 'path' && name === override.field ? override.value : pathValue(p)));
    });
    const withQuery = location === 'query' ? `${url}?${override.field}=${encodeURIComponent(String(override.value))}` : url;
    const schema = bodySchema(op);
    let body: string | undefined;
    if (schema) {
      const b: Record<string, unknown> = Object.fromEntries((schema.required ?? []).map((f) => [f, sample(resolve(schema.properties![f]))]));
      if (location === 'body') b[override.field!] = override.value;
      body = JSON.stringify(b);
    }
    const invalid = override.credential === 'invalid';
    const headers: Record<string, string> =
      kind === 'user'
        ? { authorization: `Bearer ${userToken('acc_openapi', invalid ? { expiresInS: -60 } : {})}` }
        : kind === 'merchant'
          ? merchantHeaders(method.toUpperCase(), withQuery, body ?? '', invalid ? { secret: 'not-the-merchant-secret-0123456789' } : {})
          : kind === 'service'
            ? { [HEADERS.service]: invalid ? 'not-a-service-token-0123456789' : CREDS.serviceToken }
            : kind === 'admin'
              ? { [HEADERS.admin]: invalid ? 'not-an-admin-key-0123456789' : CREDS.adminKey }
              : {};
    let req = request(t.server)[method as 'get'](withQuery).set(headers);
    if (body !== undefined) req = req.set('content-type', 'application/json').send(body);
    return req;
  }

  it("answers each 400 example's input (its summary) with exactly that example", async () => {
    const mismatches: unknown[] = [];
    const replays = errorResponses().filter((r) => r.status === '400');
    expect(replays.length).toBeGreaterThan(20);
    for (const { id, path, method, op, examples } of replays) {
      for (const [, { summary, value }] of examples) {
        const m = /^(\w+): (.*)$/.exec(summary)!;
        const res = await send(method, path, op, kindsOf(op)[0], { field: m[1], value: JSON.parse(m[2]) });
        const got = { id, status: res.status, body: { ...res.body, requestId: 'x' } };
        const want = { id, status: 400, body: { ...value, requestId: 'x' } };
        if (JSON.stringify(got) !== JSON.stringify(want)) mismatches.push({ got, want });
      }
    }
    expect(mismatches).toEqual([]);
  });

  it('answers each 413, 414 and 415 example (before any route runs): a body over the limit, a path parameter of 513 characters, a text/plain body', async () => {
    const problems: string[] = [];
    let replayed = 0;
    const strip = (b: Record<string, unknown>) => ({ ...b, requestId: undefined });
    for (const { id, path, method, status, examples } of errorResponses()) {
      if (!['413', '414', '415'].includes(status)) continue;
      const url = path.replace(/\{[^}]+\}/g, () => (status === '414' ? 'p'.repeat(513) : 'x1'));
      let req = request(t.server)[method as 'post'](url);
      const limit = Math.max(ROUTE_BODY_LIMITS.get(`${method.toUpperCase()} ${path.replace(/\{([^}]+)\}/g, ':$1')}`) ?? 0, t.config.bodyLimitBytes);
      if (status === '413') req = req.set('content-type', 'application/json').send(JSON.stringify({ pad: 'x'.repeat(limit + 1024) }));
      if (status === '415') req = req.set('content-type', 'text/plain').send('hello');
      const res = await req;
      replayed++;
      const want = examples.map(([, e]) => strip(e.value));
      if (!want.some((w) => JSON.stringify(w) === JSON.stringify(strip(res.body))))
        problems.push(`${id} ${status}: answered ${res.status} ${JSON.stringify(res.body)}`);
    }
    expect(replayed).toBeGreaterThan(0);
    expect(problems).toEqual([]);
  });

  it("answers a request for the examples' resource, which a fresh service does not have, with one of its 404 examples", async () => {
    const mismatches: unknown[] = [];
    const replays = errorResponses().filter((r) => r.status === '404');
    expect(replays.length).toBeGreaterThan(10);
    for (const { id, path, method, op, examples } of replays) {
      const res = await send(method, path, op, kindsOf(op)[0]);
      const body = { ...res.body, requestId: 'x' };
      if (res.status !== 404 || !examples.some(([, e]) => JSON.stringify({ ...e.value, requestId: 'x' }) === JSON.stringify(body))) {
        mismatches.push({ id, got: [res.status, res.body], want: examples.map(([, e]) => e.value) });
      }
    }
    expect(mismatches).toEqual([]);
  });

  it('answers each 401 and 403 example: no credential, an invalid one of each kind, a valid one of a kind the route refuses', async () => {
    const mismatches: unknown[] = [];
    const replays = errorResponses().filter((r) => r.status === '401' || r.status === '403');
    expect(new Set(replays.flatMap((r) => r.examples.map(([key]) => key)))).toEqual(new Set(['missing', 'user', 'merchant', 'service', 'admin']));
    for (const { id, path, method, op, status, examples } of replays) {
      for (const [key, { value }] of examples) {
        const kind = key === 'missing' ? undefined : (key as Kind);
        const res = await send(method, path, op, kind, status === '401' ? { credential: 'invalid' } : {});
        if (res.status !== Number(status) || res.body.error !== value.error || res.body.message !== value.message) {
          mismatches.push({ id, key, got: [res.status, res.body.message], want: [status, value.message] });
        }
      }
    }
    expect(mismatches).toEqual([]);
  });
});
