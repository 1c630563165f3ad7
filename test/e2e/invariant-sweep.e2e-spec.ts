import request from 'supertest';
import type { AddressInfo } from 'node:net';
import { ORDER_KEYS } from '../../src/features/orders/order.keys';
import { KeyBuilder } from '../../src/platform/redis/key-builder';
import { WALLET_KEYS } from '../../src/features/wallet/wallet.keys';
import { expectInvariants, sweepInvariants, type Deployment } from '../support/invariants';
import { rainBody, rainId, rainKit } from '../support/red-envelopes';
import { activityBody, activityId, seckillKit } from '../support/seckill';
import { CREDS, merchantHeaders, useAppOnOwnRedis } from '../support/test-app';

/**
 * The invariant sweep the fault suites run after each test (test/support/invariants.ts) holds on a deployment that
 * did real work over HTTP, and names each law when one record of a pair is changed behind the other's back: so a
 * fault suite that passes it has shown each law, not an empty check.
 */
describe('the invariant sweep', () => {
  const h = useAppOnOwnRedis();
  let d: Deployment;
  let userLedger: string;
  let stockKey: string;
  let orderKey: string;

  beforeAll(async () => {
    const { port } = h.t.app.getHttpServer().address() as AddressInfo;
    d = { nodes: h.raw, prefix: h.t.app.get(KeyBuilder).prefix, base: `http://127.0.0.1:${port}` };

    // Money: a sponsor funds a rain of 10 envelopes, 4 users grab and are credited; a user is topped up.
    const rain = rainKit(h.t);
    await rain.fund(CREDS.merchantId, 1000);
    const id = rainId('sweep');
    await rain.create(rainBody(id, { totalAmount: 1000, count: 10 }));
    for (const u of ['u1', 'u2', 'u3', 'u4']) expect((await rain.grab(u, id)).status).toBe(200);
    await rain.credited(id);
    const topUp = await request(h.t.server)
      .post('/admin/wallets/account:u9/top-ups')
      .set({ 'x-admin-key': CREDS.adminKey })
      .send({ amount: 500, currency: 'CNY', reference: 'sweep-topup' });
    expect(topUp.status).toBe(201);
    userLedger = (await h.raw.keys(`${d.prefix}:${WALLET_KEYS.feature}:{a:u1}:ledger`))[0];

    // Stock: a sale of 5 units over 2 shards, 2 reserved.
    const sale = seckillKit(h.t);
    const saleId = activityId('sweep');
    await sale.create(activityBody(saleId, [{ productId: 'p1', stock: 5, shards: 2, perUserLimit: 1 }]));
    for (const u of ['b1', 'b2']) expect((await sale.reserve(u, saleId, 'p1')).status).toBe(201);
    stockKey = (await sale.shards(saleId, 'p1')).keys[0].stock;

    // Orders: one merchant order, open for a minute.
    const body = JSON.stringify({ merchantOrderNo: `sweep-${Date.now()}`, amount: 100, currency: 'CNY', subject: 'Tea', expireMinutes: 1 });
    const created = await request(h.t.server)
      .post('/merchant/orders')
      .set(merchantHeaders('POST', '/merchant/orders', body))
      .send(body);
    expect(created.status).toBe(201);
    orderKey = (await h.raw.keys(`${d.prefix}:${ORDER_KEYS.feature}:*:order:${created.body.orderId}`))[0];
  });

  it('holds on a deployment that did real work, and counts what it read', async () => {
    const r = await expectInvariants(d);
    expect(r.rains).toBe(1);
    expect(r.products).toBe(1);
    expect(r.orders.CREATED).toBeGreaterThanOrEqual(1);
    const cny = r.money.get('CNY')!;
    expect({ topUps: cny['top-up'], funding: cny.funding, heldByRains: cny['held-by-rains'] }).toEqual({
      topUps: 1500n,
      funding: -1000n,
      heldByRains: 1000n + cny['red-envelope'] * -1n,
    });
  });

  it('names a balance that is not the sum of its ledger', async () => {
    await h.raw.hincrby(userLedger.replace(/:ledger$/, ':balances'), 'CNY', 1);
    try {
      expect((await sweepInvariants(d)).violations.join('\n')).toMatch(/wallet a:u1 CNY: balance \d+, ledger sum \d+/);
    } finally {
      await h.raw.hincrby(userLedger.replace(/:ledger$/, ':balances'), 'CNY', -1);
    }
  });

  it('names an envelope credited in a rain that moved no money (a credit swallowed)', async () => {
    // The last credit entry of u1 taken off its ledger and balance: the pools still say credited.
    const last = JSON.parse((await h.raw.lindex(userLedger, -1))!) as { amount: number };
    const saved = (await h.raw.rpop(userLedger))!;
    await h.raw.hincrby(userLedger.replace(/:ledger$/, ':balances'), 'CNY', -last.amount);
    try {
      expect((await sweepInvariants(d)).violations.join('\n')).toMatch(/the ledgers say rains hold \d+, the rains' pools say \d+/);
    } finally {
      await h.raw.rpush(userLedger, saved);
      await h.raw.hincrby(userLedger.replace(/:ledger$/, ':balances'), 'CNY', last.amount);
    }
    await expectInvariants(d);
  });

  it('names a product whose counts do not add up to its stock', async () => {
    await h.raw.hincrby(stockKey, 'available', 1);
    try {
      expect((await sweepInvariants(d)).violations.join('\n')).toMatch(/stock .*p1: initial 5 != available/);
    } finally {
      await h.raw.hincrby(stockKey, 'available', -1);
    }
  });

  it('names an order left open past its expiry, and allows the grace given', async () => {
    const expiresAt = await h.raw.hget(orderKey, 'expiresAt');
    const now = Number((await h.raw.time())[0]) * 1000;
    await h.raw.hset(orderKey, 'expiresAt', String(now - 60_000));
    try {
      expect((await sweepInvariants(d, { now })).violations.join('\n')).toMatch(/order ord_\w+: CREATED 60000 ms past its expiry/);
      expect((await sweepInvariants(d, { now, graceMs: 120_000 })).violations).toEqual([]);
    } finally {
      await h.raw.hset(orderKey, 'expiresAt', expiresAt!);
    }
  });
});
