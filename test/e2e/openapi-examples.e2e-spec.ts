import request from 'supertest';
import { DEV_DEFAULTS, parseNamedSecrets } from '../../src/platform/config/load-config';
import { HEADERS } from '../../src/platform/http/security-schemes';
import { RedisServerHandle, startRedisServer } from '../harness/redis-server';
import { merchantHeaders, startTestApp, TestApp, userToken } from '../support/test-app';

/**
 * The request examples of the OpenAPI document, sent as Swagger UI's "Try it out" sends them (every property at
 * its example, else its default), in the order a new user tries them, against a service with the development
 * identities: each answers 2xx. The path ids are the ones the earlier answers and examples give, as the parameters'
 * descriptions say (the document leaves them blank).
 */

interface Schema {
  $ref?: string;
  type?: string;
  properties?: Record<string, Schema>;
  items?: Schema;
  example?: unknown;
  default?: unknown;
  enum?: unknown[];
}
interface Doc {
  paths: Record<string, Record<string, { requestBody?: { content: Record<string, { schema: Schema }> } }>>;
  components: { schemas: Record<string, Schema> };
}

const [[MERCHANT, MERCHANT_SECRET]] = parseNamedSecrets('MERCHANT_SECRETS', DEV_DEFAULTS.MERCHANT_SECRETS);
const [[, ADMIN_KEY]] = parseNamedSecrets('ADMIN_API_KEYS', DEV_DEFAULTS.ADMIN_API_KEYS);
/** The development user of the README's first requests. */
const USER = 'acc_1001';

describe('OpenAPI request examples, in order, in development', () => {
  let redis: RedisServerHandle;
  let t: TestApp;
  let doc: Doc;

  beforeAll(async () => {
    redis = await startRedisServer();
    // The development setup: no credential variables (their development defaults apply).
    const unset = { JWT_SECRET: undefined, MERCHANT_SECRETS: undefined, SERVICE_TOKENS: undefined, ADMIN_API_KEYS: undefined };
    t = await startTestApp(redis.url, { NODE_ENV: 'development', BALANCE_CHANNEL: 'wallet', ...unset } as unknown as Record<string, string>);
    doc = (await request(t.server).get('/docs/openapi.json').expect(200)).body as Doc;
  });
  afterAll(async () => {
    await t.close();
    await redis.destroy();
  });

  const resolve = (s: Schema | undefined): Schema | undefined => (s?.$ref ? doc.components.schemas[s.$ref.split('/').pop()!] : s);
  /** A value as Swagger UI makes one from a schema: the example, else the default, else the first enum value, else one per type. */
  const sampleOf = (schema: Schema | undefined): unknown => {
    const s = resolve(schema) ?? {};
    if (s.example !== undefined) return s.example;
    if (s.default !== undefined) return s.default;
    if (s.enum?.length) return s.enum[0];
    if (s.properties) return Object.fromEntries(Object.entries(s.properties).map(([k, p]) => [k, sampleOf(p)]));
    if (s.type === 'array') return [sampleOf(s.items)];
    return s.type === 'integer' || s.type === 'number' ? 0 : s.type === 'boolean' ? true : 'string';
  };
  /** The request body "Try it out" starts with for `method path`. */
  const example = (method: string, path: string): Record<string, unknown> => {
    const schema = doc.paths[path][method].requestBody?.content['application/json'].schema;
    if (!schema) throw new Error(`${method} ${path} documents no JSON body`);
    return sampleOf(schema) as Record<string, unknown>;
  };

  const admin = { [HEADERS.admin]: ADMIN_KEY };
  const user = { authorization: `Bearer ${userToken(USER, { secret: DEV_DEFAULTS.JWT_SECRET })}` };
  /** Expects a 2xx, and on anything else shows the answer. */
  const ok = (what: string, res: request.Response) => {
    const success = res.status >= 200 && res.status < 300;
    expect({ what, status: success ? '2xx' : res.status, body: success ? undefined : (res.body as unknown) }).toEqual({ what, status: '2xx', body: undefined });
  };

  it('top-up, sale, reservation, order for the user, the user reads it, rain funded by the top-up, grab: each 2xx', async () => {
    const sale = example('post', '/admin/seckill/activities');
    const rain = example('post', '/admin/red-envelopes/activities');
    const order = example('post', '/merchant/orders');
    // Who the examples name: the development merchant, and the development user as the order's payer.
    expect({ seller: sale.merchantId, sponsor: rain.sponsorMerchantId, payer: order.payerAccountId }).toEqual({
      seller: MERCHANT,
      sponsor: MERCHANT,
      payer: USER,
    });

    // The rain's sponsor is funded by the top-up example (its owner pasted as the ownerId's description says).
    const topUp = example('post', '/admin/wallets/{ownerId}/top-ups');
    expect(topUp.amount as number).toBeGreaterThanOrEqual(rain.totalAmount as number);
    ok('top-up', await request(t.server).post(`/admin/wallets/merchant:${MERCHANT}/top-ups`).set(admin).send(topUp));

    // The sale opens now: its dates are set when the document is served.
    ok('create sale', await request(t.server).post('/admin/seckill/activities').set(admin).send(sale));
    const product = (sale.products as Array<{ productId: string }>)[0].productId;
    const reserve = example('post', '/seckill/activities/{activityId}/products/{productId}/reservations');
    ok(
      'reserve',
      await request(t.server)
        .post(`/seckill/activities/${String(sale.activityId)}/products/${product}/reservations`)
        .set(user)
        .send(reserve),
    );

    const body = JSON.stringify(order);
    const created = await request(t.server)
      .post('/merchant/orders')
      .set(merchantHeaders('POST', '/merchant/orders', body, { merchantId: MERCHANT, secret: MERCHANT_SECRET }))
      .send(body);
    ok('create order', created);
    ok(
      'the user reads the order',
      await request(t.server)
        .get(`/orders/${String(created.body.orderId)}`)
        .set(user),
    );

    ok('create rain', await request(t.server).post('/admin/red-envelopes/activities').set(admin).send(rain));
    const screen = `/red-envelopes/activities/${String(rain.activityId)}`;
    // The envelopes are preloaded in the background; the rain opens once they are.
    const deadline = Date.now() + 15_000;
    while ((await request(t.server).get(screen).set(user)).body.state !== 'OPEN' && Date.now() < deadline) await new Promise((r) => setTimeout(r, 100));
    const grab = await request(t.server).post(`${screen}/grab`).set(user);
    ok('grab', grab);
    expect(grab.body.status).toBe('GRABBED');
  }, 60_000);
});
