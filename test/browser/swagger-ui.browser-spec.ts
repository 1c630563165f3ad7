import type { Browser } from 'playwright-core';
import { waitUntil } from '../harness/redis-process';
import { randomPrefix, type RedisServerHandle, startRedisServer } from '../harness/redis-server';
import { type ServiceProcess, startServiceProcess } from '../support/service-process';
import { CREDS, userToken } from '../support/test-app';
import { launchChromium, SwaggerUiPage } from './swagger-ui-page';

/**
 * Swagger UI in a real headless Chromium (the system's), against the built service in production settings with
 * Swagger UI on: each kind of caller authorizes in the page and does one task through "Try it out" and Execute,
 * and the test reads what the page shows. Ops creates a flash sale, tops up a merchant and starts a rain it funds;
 * the app user reserves in the sale; the merchant creates an order, signed in the browser from MerchantSecret; the
 * user grabs the rain's one envelope and sees it credited in their wallet.
 */

const USER = 'acc_browser_1';
const SALE = 'browser-sale';
const PRODUCT = 'data-1g';
const RAIN = 'browser-rain';
const PRIZE = 10_000;
const soon = (ms: number) => new Date(Date.now() + ms).toISOString();

describe('Swagger UI in headless Chromium: one task per identity', () => {
  let redis: RedisServerHandle;
  let svc: ServiceProcess;
  let browser: Browser;
  const pages: SwaggerUiPage[] = [];
  /** A fresh page (no credentials of another identity) with `values` authorized. */
  const as = async (values: Record<string, string>) => {
    const p = await SwaggerUiPage.open(browser, svc.base);
    pages.push(p);
    await p.authorize(values);
    return p;
  };
  const admin = () => as({ AdminKey: CREDS.adminKey });
  const user = () => as({ AppUserJwt: userToken(USER) });

  beforeAll(async () => {
    redis = await startRedisServer();
    [svc, browser] = await Promise.all([startServiceProcess(redis.url, randomPrefix(), { env: { SWAGGER_ENABLED: 'true' } }), launchChromium()]);
  });
  afterEach(async () => {
    await Promise.all(pages.splice(0).map((p) => p.close()));
  });
  afterAll(async () => {
    await browser?.close();
    await svc?.kill();
    await redis?.destroy();
  });

  it('ops (admin key) creates a flash sale', async () => {
    const ui = await admin();
    const r = await ui.execute('post', '/admin/seckill/activities', {
      body: {
        activityId: SALE,
        merchantId: CREDS.merchantId,
        title: 'Browser sale',
        startsAt: soon(-1000),
        endsAt: soon(3600_000),
        payWindowMinutes: 15,
        perUserLimit: 1,
        products: [{ productId: PRODUCT, title: '1 GB data pack', price: 990, currency: 'CNY', stock: 5 }],
      },
    });
    expect({ status: r.status, activityId: r.body.activityId, state: r.body.state }).toEqual({ status: 201, activityId: SALE, state: 'OPEN' });
    expect(r.body.products).toEqual([expect.objectContaining({ productId: PRODUCT, stock: 5, available: 5 })]);
  });

  it('the app user (bearer JWT) reserves in the sale', async () => {
    const ui = await user();
    const r = await ui.execute('post', '/seckill/activities/{activityId}/products/{productId}/reservations', {
      params: { activityId: SALE, productId: PRODUCT },
      body: { quantity: 1, requestId: 'browser-tap-1' },
    });
    expect({ status: r.status, activityId: r.body.activityId, productId: r.body.productId, quantity: r.body.quantity }).toEqual({
      status: 201,
      activityId: SALE,
      productId: PRODUCT,
      quantity: 1,
    });
    expect(r.body.orderId).toEqual(expect.any(String));

    const mine = await ui.execute('get', '/seckill/reservations', { params: { activityId: '' } });
    expect(mine.status).toBe(200);
    expect(mine.body.items).toEqual([expect.objectContaining({ activityId: SALE, orderId: r.body.orderId })]);
  });

  it('a merchant creates an order, signed in the browser with MerchantSecret (the secret is not sent)', async () => {
    const ui = await as({ MerchantId: CREDS.merchantId, MerchantSecret: CREDS.merchantSecret });
    const r = await ui.execute('post', '/merchant/orders', {
      body: { merchantOrderNo: 'BROWSER-0001', amount: 12800, currency: 'CNY', subject: 'Coffee beans 1 kg', payerAccountId: USER },
    });
    expect({ status: r.status, merchantOrderNo: r.body.merchantOrderNo, state: r.body.status, payer: r.body.payerAccountId }).toEqual({
      status: 201,
      merchantOrderNo: 'BROWSER-0001',
      state: 'CREATED',
      payer: USER,
    });
    // The request as sent, shown as curl: signed in the page, and the secret left out.
    expect(r.curl).toMatch(/X-Signature: [0-9a-f]{64}/i);
    expect(r.curl).toContain(`X-Merchant-Id: ${CREDS.merchantId}`);
    expect(r.curl).not.toContain(CREDS.merchantSecret);
  });

  it('ops funds a rain; the app user grabs its envelope and sees the credit in GET /wallet', async () => {
    const ops = await admin();
    const topUp = await ops.execute('post', '/admin/wallets/{ownerId}/top-ups', {
      params: { ownerId: `merchant:${CREDS.merchantId}` },
      body: { amount: PRIZE, currency: 'CNY', reference: 'browser-fund-1' },
    });
    expect({ status: topUp.status, applied: topUp.body.applied, balance: topUp.body.balance }).toEqual({ status: 201, applied: true, balance: PRIZE });
    const rain = await ops.execute('post', '/admin/red-envelopes/activities', {
      body: {
        activityId: RAIN,
        sponsorMerchantId: CREDS.merchantId,
        title: 'Browser rain',
        currency: 'CNY',
        totalAmount: PRIZE,
        count: 1,
        startsAt: soon(-1000),
        endsAt: soon(3600_000),
      },
    });
    expect({ status: rain.status, activityId: rain.body.activityId }).toEqual({ status: 202, activityId: RAIN });
    // The envelopes are preloaded in the background; the rain opens to grabs once loaded.
    await waitUntil(
      'the rain to be loaded',
      async () => {
        const res = await svc.call(`/admin/red-envelopes/activities/${RAIN}`, { headers: { 'x-admin-key': CREDS.adminKey } });
        const state = ((await res.json()) as { state?: string }).state;
        return ['READY', 'OPEN'].includes(state ?? '') || `${res.status} ${state}`;
      },
      20_000,
      100,
    );

    const ui = await user();
    const grab = await ui.execute('post', '/red-envelopes/activities/{activityId}/grab', { params: { activityId: RAIN } });
    expect({ status: grab.status, result: grab.body.status, amount: grab.body.amount }).toEqual({ status: 200, result: 'GRABBED', amount: PRIZE });

    // Crediting is asynchronous: Execute again until the wallet shows the envelope (the optional fields left empty).
    let wallet = { status: 0, body: undefined as unknown };
    await waitUntil(
      'the envelope credited in GET /wallet',
      async () => {
        wallet = await ui.execute('get', '/wallet', { params: { cursor: '', limit: '' } });
        return (wallet.status === 200 && (wallet.body as { entries: unknown[] }).entries.length > 0) || JSON.stringify(wallet);
      },
      20_000,
      200,
    );
    expect(wallet.body).toEqual(
      expect.objectContaining({
        owner: `account:${USER}`,
        balances: [{ currency: 'CNY', balance: PRIZE }],
        entries: [expect.objectContaining({ kind: 'red-envelope', amount: PRIZE, balanceAfter: PRIZE })],
      }),
    );
  });
});
