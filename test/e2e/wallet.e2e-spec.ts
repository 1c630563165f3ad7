import Redis from 'ioredis';
import request from 'supertest';
import { ChannelGateway } from '../../src/features/orders/channels/channel-gateway';
import { legReference } from '../../src/features/orders/order-queues';
import { KeyBuilder } from '../../src/platform/redis/key-builder';
import { rawConnection } from '../harness/redis-process';
import { RedisServerHandle, startRedisServer } from '../harness/redis-server';
import { CREDS, merchantHeaders, startTestApp, TestApp, userToken } from '../support/test-app';
import { sumOfWalletBalances, walletKeysIn } from '../support/wallet';
import { orderNumberKeyOf } from '../../src/features/orders/order.keys';

/**
 * Wallets over HTTP on the whole app, with the balance method paying from the payer's wallet: ops top up
 * (201, the same reference again 200, idempotent) and read any wallet; an app user reads their own; a
 * plan's balance leg is a wallet debit made once, refused funds fail the plan, and a failed plan's
 * balance leg is credited back once. Bad input (400 naming the field, nothing stored), identities, and
 * the conservation sum: balances = top-ups − spent + reversals.
 */

const ADMIN = { 'x-admin-key': CREDS.adminKey };
const asUser = (accountId: string) => ({ authorization: `Bearer ${userToken(accountId)}` });
let seq = 0;
const orderNo = () => `w-${process.pid}-${++seq}`;
const acc = (name: string) => `acc_${name}_${process.pid}`;

describe('wallets over HTTP', () => {
  let redis: RedisServerHandle;
  let raw: Redis;
  let t: TestApp;
  let keys: KeyBuilder;
  /** What ops topped up, what payments took and what reversals gave back in this suite (CNY), for the conservation sum. */
  const money = { toppedUp: 0, spent: 0, reversed: 0 };

  const topUp = (ownerId: string, body: Record<string, unknown>, headers: Record<string, string> = ADMIN) =>
    request(t.server).post(`/admin/wallets/${ownerId}/top-ups`).set(headers).send(body);
  const adminWallet = (ownerId: string, query = '') => request(t.server).get(`/admin/wallets/${ownerId}${query}`).set(ADMIN);
  const myWallet = (accountId: string, query = '') => request(t.server).get(`/wallet${query}`).set(asUser(accountId));
  const fund = async (accountId: string, amount: number) => {
    const res = await topUp(`account:${accountId}`, { amount, currency: 'CNY', reference: `fund-${orderNo()}` });
    expect(res.status).toBe(201);
    money.toppedUp += amount;
  };
  const merchant = (method: 'POST', path: string, body: unknown) => {
    const text = JSON.stringify(body);
    return request(t.server)
      .post(path)
      .set(merchantHeaders(method, path, text))
      .send(text);
  };
  const setChannel = (method: string, body: Record<string, unknown>) => request(t.server).put(`/admin/channels/${method}`).set(ADMIN).send(body);
  /** A new order of the test merchant with a PENDING plan of `legs` for `account`. */
  async function orderWithPlan(account: string, legs: Array<{ method: string; amount: number }>) {
    const amount = legs.reduce((s, l) => s + l.amount, 0);
    const created = await merchant('POST', '/merchant/orders', { merchantOrderNo: orderNo(), amount, currency: 'CNY', subject: 'Coffee beans' });
    expect(created.status).toBe(201);
    const plan = await request(t.server).post(`/orders/${created.body.orderId}/payment-plans`).set(asUser(account)).send({ instructions: legs });
    expect(plan.status).toBe(201);
    legStamps.set(plan.body.planId, String(Date.parse(created.body.createdAt)));
    return plan.body.planId as string;
  }
  /** The order's createdAt (epoch ms) of each plan made by orderWithPlan: part of its legs' channel references. */
  const legStamps = new Map<string, string>();
  const refOf = (planId: string, index: number) => legReference({ planId, legStamp: legStamps.get(planId)! }, index);
  const pay = (account: string, planId: string) => request(t.server).post(`/payment-plans/${planId}/pay`).set(asUser(account)).send();
  const balanceOf = async (accountId: string) =>
    ((await myWallet(accountId)).body.balances as Array<{ currency: string; balance: number }>).find((b) => b.currency === 'CNY')?.balance ?? 0;
  const entriesOf = async (accountId: string) =>
    (await myWallet(accountId, '?limit=200')).body.entries as Array<{ kind: string; amount: number; reference: string; balanceAfter: number }>;

  function expectError(res: request.Response, status: number, code: string, field?: string) {
    expect({ status: res.status, error: res.body.error }).toEqual({ status, error: code });
    if (field !== undefined) expect(res.body.details.map((d: { field: string }) => d.field)).toContain(field);
  }

  beforeAll(async () => {
    redis = await startRedisServer();
    raw = rawConnection(redis);
    t = await startTestApp(redis.url, { RATE_LIMIT_ENABLED: 'false', CHANNEL_LATENCY_MS: '5', ORDERS_QUERY_DELAY_MS: '50', BALANCE_CHANNEL: 'wallet' });
    keys = t.app.get(KeyBuilder);
  });

  afterEach(async () => {
    // Conservation after every test: every wallet's money is what came in, less what was spent, plus what came back.
    const sum = await sumOfWalletBalances(raw, keys);
    expect(sum.get('CNY') ?? 0n).toBe(BigInt(money.toppedUp - money.spent + money.reversed));
  });

  afterAll(async () => {
    await t?.close();
    raw?.disconnect();
    await redis?.destroy();
  });

  describe('top-ups and reads', () => {
    it('a memo of 256 characters is taken however many UTF-16 units they use (256 emoji were a 400 "memo must be at most 256 characters")', async () => {
      const a = acc('memo');
      const memo = '😀'.repeat(256);
      const res = await topUp(`account:${a}`, { amount: 100, currency: 'CNY', reference: 'memo-emoji', memo });
      expect([res.status, res.body.applied]).toEqual([201, true]);
      money.toppedUp += 100;
      const w = await adminWallet(`account:${a}`);
      expect(w.body.entries.map((e: { memo: string }) => e.memo)).toEqual([memo]);
    });

    it('a top-up is 201, the same reference again 200 with the same entry and no money moved; another amount is 409', async () => {
      const a = acc('top');
      const body = { amount: 5000, currency: 'CNY', reference: 'topup-0001', memo: 'quiz prize' };
      const first = await topUp(`account:${a}`, body);
      expect([first.status, first.body]).toEqual([201, { applied: true, entryId: '1', currency: 'CNY', balance: 5000 }]);
      money.toppedUp += 5000;
      const again = await topUp(`account:${a}`, body);
      expect([again.status, again.body]).toEqual([200, { applied: false, entryId: '1', currency: 'CNY', balance: 5000 }]);
      expectError(await topUp(`account:${a}`, { ...body, amount: 5001 }), 409, 'REFERENCE_REUSED');
      const w = await adminWallet(`account:${a}`);
      expect(w.status).toBe(200);
      expect(w.body).toEqual({
        owner: `account:${a}`,
        balances: [{ currency: 'CNY', balance: 5000 }],
        entries: [
          {
            entryId: '1',
            kind: 'top-up',
            currency: 'CNY',
            amount: 5000,
            balanceAfter: 5000,
            reference: 'topup-0001',
            memo: 'quiz prize',
            at: expect.stringMatching(/^\d{4}-\d\d-\d\dT/),
          },
        ],
      });
    });

    it('concurrent top-ups with one reference move money once', async () => {
      const a = acc('conc');
      const results = await Promise.all(Array.from({ length: 20 }, () => topUp(`account:${a}`, { amount: 300, currency: 'CNY', reference: 'same' })));
      money.toppedUp += 300;
      expect(results.map((r) => r.status).sort()).toEqual([...Array(19).fill(200), 201]);
      expect(await balanceOf(a)).toBe(300);
    });

    it('a merchant wallet is apart from an account wallet of the same id; entries page newest first by cursor', async () => {
      const id = `sponsor_${process.pid}`;
      for (let i = 1; i <= 5; i++) expect((await topUp(`merchant:${id}`, { amount: i * 100, currency: 'CNY', reference: `m-${i}` })).status).toBe(201);
      money.toppedUp += 1500;
      expect((await adminWallet(`account:${id}`)).body).toEqual({ owner: `account:${id}`, balances: [], entries: [] });
      const first = await adminWallet(`merchant:${id}`, '?limit=2');
      expect([first.body.balances, first.body.entries.map((e: { entryId: string }) => e.entryId), first.body.next]).toEqual([
        [{ currency: 'CNY', balance: 1500 }],
        ['5', '4'],
        '4',
      ]);
      const second = await adminWallet(`merchant:${id}`, `?limit=2&cursor=${first.body.next}`);
      const third = await adminWallet(`merchant:${id}`, `?limit=2&cursor=${second.body.next}`);
      expect([
        second.body.entries.map((e: { entryId: string }) => e.entryId),
        third.body.entries.map((e: { entryId: string }) => e.entryId),
        third.body.next,
      ]).toEqual([['3', '2'], ['1'], undefined]);
    });

    it('a cursor past the newest entry pages from the newest: every entry is older than it, and none is skipped', async () => {
      const id = `pastend_${process.pid}`;
      for (let i = 1; i <= 5; i++) expect((await topUp(`merchant:${id}`, { amount: 100, currency: 'CNY', reference: `p-${i}` })).status).toBe(201);
      money.toppedUp += 500;
      for (const cursor of ['6', '7', '9999999999999999']) {
        const page = await adminWallet(`merchant:${id}`, `?limit=2&cursor=${cursor}`);
        expect([cursor, page.status, page.body.entries.map((e: { entryId: string }) => e.entryId), page.body.next]).toEqual([cursor, 200, ['5', '4'], '4']);
      }
    });
  });

  describe('identities', () => {
    it('an app user sees only their own wallet; GET /wallet needs a user token', async () => {
      const mine = acc('mine');
      await fund(mine, 700);
      expect((await myWallet(mine)).body).toMatchObject({ owner: `account:${mine}`, balances: [{ currency: 'CNY', balance: 700 }] });
      expect((await myWallet(acc('someone'))).body).toEqual({ owner: `account:${acc('someone')}`, balances: [], entries: [] });
      expect((await request(t.server).get('/wallet')).status).toBe(401);
      expect((await request(t.server).get('/wallet').set(ADMIN)).status).toBe(403);
    });

    it('only admins top up or read any wallet; nothing is stored for the others', async () => {
      const before = await walletKeysIn(raw, keys);
      const body = { amount: 100, currency: 'CNY', reference: 'sneaky' };
      const who = acc('thief');
      expect((await topUp(`account:${who}`, body, asUser(who))).status).toBe(403);
      expect((await topUp(`account:${who}`, body, {})).status).toBe(401);
      const path = `/admin/wallets/account:${who}/top-ups`;
      const signed = JSON.stringify(body);
      expect(
        (
          await request(t.server)
            .post(path)
            .set(merchantHeaders('POST', path, signed))
            .send(signed)
        ).status,
      ).toBe(403);
      expect((await request(t.server).get(`/admin/wallets/account:${who}`).set(asUser(who))).status).toBe(403);
      expect(await walletKeysIn(raw, keys)).toEqual(before);
    });
  });

  describe('bad input: 400 naming the field, nothing stored', () => {
    const good = { amount: 100, currency: 'CNY', reference: 'ok-ref' };
    it.each([
      ['ownerId', 'user:acc_1', good],
      ['ownerId', 'account:..', good],
      ['ownerId', 'account:', good],
      ['ownerId', `merchant:${'m'.repeat(65)}`, good],
      ['ownerId', 'account:a%20b', good],
      ['amount', 'account:acc_bad', { ...good, amount: 0 }],
      ['amount', 'account:acc_bad', { ...good, amount: 1.5 }],
      ['amount', 'account:acc_bad', { ...good, amount: '100' }],
      ['amount', 'account:acc_bad', { ...good, amount: 10_000_000_001 }],
      ['amount', 'account:acc_bad', { currency: 'CNY', reference: 'r' }],
      ['currency', 'account:acc_bad', { ...good, currency: 'cny' }],
      ['currency', 'account:acc_bad', { ...good, currency: 'CNYX' }],
      ['currency', 'account:acc_bad', { ...good, currency: 'ZZZ' }],
      ['reference', 'account:acc_bad', { ...good, reference: '' }],
      ['reference', 'account:acc_bad', { ...good, reference: 'a b' }],
      ['reference', 'account:acc_bad', { ...good, reference: 'r'.repeat(129) }],
      ['memo', 'account:acc_bad', { ...good, memo: 'm'.repeat(257) }],
      ['memo', 'account:acc_bad', { ...good, memo: '😀'.repeat(257) }],
    ])('top-up: a bad %s (case %#)', async (field, ownerId, body) => {
      const before = await walletKeysIn(raw, keys);
      expectError(await topUp(ownerId, body), 400, 'VALIDATION_FAILED', field);
      expect(await walletKeysIn(raw, keys)).toEqual(before);
    });

    it.each([
      ['cursor', '?cursor=0'],
      ['cursor', '?cursor=abc'],
      ['cursor', `?cursor=${'1'.repeat(17)}`],
      ['limit', '?limit=0'],
      ['limit', '?limit=201'],
      ['limit', '?limit=two'],
    ])('reads: a bad %s (%s)', async (field, query) => {
      expectError(await adminWallet('account:acc_bad', query), 400, 'VALIDATION_FAILED', field);
      expectError(await myWallet('acc_bad', query), 400, 'VALIDATION_FAILED', field);
    });

    it('reads: a bad ownerId', async () => {
      expectError(await adminWallet('bank:1'), 400, 'VALIDATION_FAILED', 'ownerId');
    });
  });

  describe('the balance method pays from the wallet', () => {
    beforeEach(async () => {
      for (const m of ['quickpay', 'points', 'ebanking'])
        expect((await setChannel(m, { latencyMs: 5, pay: 'success', query: 'success', reverse: 'success' })).status).toBe(200);
    });

    it('a user tops up, pays an order with balance, and the wallet is debited once (a repeated pay moves nothing)', async () => {
      const u = acc('payer');
      await fund(u, 5000);
      const planId = await orderWithPlan(u, [{ method: 'balance', amount: 2800 }]);
      const paid = await pay(u, planId);
      expect([paid.status, paid.body.status, paid.body.instructions[0].status]).toEqual([200, 'PAID', 'SUCCEEDED']);
      money.spent += 2800;
      expect((await pay(u, planId)).body.status).toBe('PAID');
      expect(await balanceOf(u)).toBe(2200);
      const entries = await entriesOf(u);
      expect(entries.filter((e) => e.kind === 'payment')).toEqual([
        expect.objectContaining({ kind: 'payment', amount: -2800, balanceAfter: 2200, reference: refOf(planId, 0) }),
      ]);
    });

    it('concurrent pays of one plan debit the wallet once', async () => {
      const u = acc('racer');
      await fund(u, 3000);
      const planId = await orderWithPlan(u, [{ method: 'balance', amount: 1000 }]);
      const results = await Promise.all(Array.from({ length: 8 }, () => pay(u, planId)));
      expect(results.some((r) => r.status === 200 && r.body.status === 'PAID')).toBe(true);
      money.spent += 1000;
      expect(await balanceOf(u)).toBe(2000);
      expect((await entriesOf(u)).filter((e) => e.kind === 'payment')).toHaveLength(1);
    });

    it('too little in the wallet fails the plan (a failure outcome) and takes nothing', async () => {
      const u = acc('short');
      await fund(u, 1000);
      const planId = await orderWithPlan(u, [{ method: 'balance', amount: 2800 }]);
      const failed = await pay(u, planId);
      expect([failed.status, failed.body.status, failed.body.instructions[0].status, failed.body.failureReason]).toEqual([
        200,
        'FAILED',
        'FAILED',
        'balance declined the payment',
      ]);
      expect(await balanceOf(u)).toBe(1000);
      expect((await entriesOf(u)).map((e) => e.kind)).toEqual(['top-up']);
    });

    it('a failed plan with a succeeded balance leg is credited back once, however often its reversal runs', async () => {
      const u = acc('reversed');
      await fund(u, 5000);
      expect((await setChannel('quickpay', { pay: 'failure' })).status).toBe(200);
      const planId = await orderWithPlan(u, [
        { method: 'balance', amount: 2800 },
        { method: 'quickpay', amount: 10000 },
      ]);
      const failed = await pay(u, planId);
      expect([failed.body.status, failed.body.instructions[0].reversal]).toEqual(['FAILED', 'REVERSED']);
      // Paying a failed plan again re-queues owed reversals: none are owed, and nothing moves.
      expect((await pay(u, planId)).body.status).toBe('FAILED');
      // A reversal retried (a lost confirmation) is confirmed again without a second credit; a query finds the debit.
      const gateway = t.app.get(ChannelGateway);
      const payer = { accountId: u, currency: 'CNY' };
      expect(await gateway.reverse('balance', refOf(planId, 0), 2800, payer)).toBe('success');
      expect(await gateway.reverse('balance', refOf(planId, 0), 2800, payer)).toBe('success');
      expect(await gateway.query('balance', refOf(planId, 0), payer)).toBe('success');
      expect(await gateway.query('balance', refOf(planId, 1), payer)).toBe('failure');
      expect(await gateway.reverse('balance', refOf(planId, 1), 10000, payer)).toBe('failure');
      money.spent += 2800;
      money.reversed += 2800;
      expect(await balanceOf(u)).toBe(5000);
      expect((await entriesOf(u)).map((e) => [e.kind, e.amount, e.reference])).toEqual([
        ['reversal', 2800, `${refOf(planId, 0)}:reversal`],
        ['payment', -2800, refOf(planId, 0)],
        ['top-up', 5000, expect.any(String)],
      ]);
    });

    it('an order made again under its merchantOrderNo once its retention is over pays with debits of its own, and its reversal gives back only its own', async () => {
      const u = acc('again');
      await fund(u, 5000);
      const no = orderNo();
      /** The order and its plan made (again) under `no`, with `legs`; then paid. */
      const orderAndPay = async (legs: Array<{ method: string; amount: number }>) => {
        const amount = legs.reduce((s, l) => s + l.amount, 0);
        const created = await merchant('POST', '/merchant/orders', { merchantOrderNo: no, amount, currency: 'CNY', subject: 'Coffee beans' });
        expect(created.status).toBe(201);
        const plan = await request(t.server).post(`/orders/${created.body.orderId}/payment-plans`).set(asUser(u)).send({ instructions: legs });
        expect(plan.status).toBe(201);
        return { orderId: created.body.orderId as string, planId: plan.body.planId as string, paid: await pay(u, plan.body.planId) };
      };
      /** What ORDERS_RETENTION_SECONDS does to an order nobody writes any more: its keys (order, plans, number index) expire. */
      const retentionPasses = async (orderId: string) => {
        const gone = [...(await raw.keys(`*:orders:*${orderId}*`)), ...(await raw.keys(`*:orders:*order-no:${orderNumberKeyOf(CREDS.merchantId, no)}`))];
        expect(gone.length).toBeGreaterThanOrEqual(3);
        await raw.del(...gone);
      };

      const first = await orderAndPay([{ method: 'balance', amount: 1000 }]);
      expect(first.paid.body.status).toBe('PAID');
      money.spent += 1000;
      await retentionPasses(first.orderId);

      // The same number makes a new order (ids are random): its payment is a debit of its own.
      const second = await orderAndPay([{ method: 'balance', amount: 1000 }]);
      expect(second.orderId).not.toBe(first.orderId);
      expect(second.paid.body.status).toBe('PAID');
      money.spent += 1000;
      expect(await balanceOf(u)).toBe(3000);
      await retentionPasses(second.orderId);

      // A third one fails on its second leg: the reversal gives back its own debit, never an earlier order's.
      expect((await setChannel('quickpay', { pay: 'failure' })).status).toBe(200);
      const third = await orderAndPay([
        { method: 'balance', amount: 1000 },
        { method: 'quickpay', amount: 500 },
      ]);
      expect([third.paid.body.status, third.paid.body.instructions[0].reversal]).toEqual(['FAILED', 'REVERSED']);
      money.spent += 1000;
      money.reversed += 1000;
      expect(await balanceOf(u)).toBe(3000);
      const entries = await entriesOf(u);
      expect(entries.map((e) => [e.kind, e.amount])).toEqual([
        ['reversal', 1000],
        ['payment', -1000],
        ['payment', -1000],
        ['payment', -1000],
        ['top-up', 5000],
      ]);
      expect(new Set(entries.map((e) => e.reference)).size).toBe(5);
    });
  });
});
