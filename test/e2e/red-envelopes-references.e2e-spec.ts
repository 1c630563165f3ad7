import { KeyBuilder } from '../../src/platform/redis/key-builder';
import { walletKeys } from '../../src/features/wallet/wallet.keys';
import { waitUntil } from '../harness/redis-process';
import { rainBody, rainId, rainKit, type RainKit, redisNowMs } from '../support/red-envelopes';
import { CREDS, useAppOnOwnRedis } from '../support/test-app';

/**
 * A rain's wallet references against ops top-ups under the same references, over HTTP: the envelope id
 * (`<activity>.<index>`), the funding (`red-envelope:<id>`) and the refund (`red-envelope:<id>:leftover`) are
 * the rain's own, whatever a top-up used, so no money is swallowed; a refused create leaves nothing behind.
 */
const ctx = useAppOnOwnRedis({ RATE_LIMIT_ENABLED: 'false' });
let kit: RainKit;
beforeAll(async () => {
  kit = rainKit(ctx.t);
  await kit.fund(CREDS.merchantId, 1_000_000);
});
afterEach(async () => kit.expectConservation(ctx.raw));

const redisNow = () => redisNowMs(ctx.raw);
const topUp = async (ownerId: string, amount: number, reference: string) => {
  const res = await kit.admin().post(`/admin/wallets/${ownerId}/top-ups`, { amount, currency: 'CNY', reference });
  expect(res.status).toBe(201);
  kit.money.toppedUp += amount;
};
const settled = (id: string) =>
  waitUntil(
    `${id} settled`,
    async () => {
      const s = await kit.state(id);
      return s === 'SETTLED' || s;
    },
    30_000,
    50,
  );

describe('red-envelope references never meet a top-up’s', () => {
  it('a top-up under the envelope id does not swallow the grab’s credit: the wallet holds both, the reconciliation counts the credit', async () => {
    const id = rainId('refa');
    await kit.create(rainBody(id, { totalAmount: 500, count: 1 }));
    const v = `acc_refa_${process.pid}`;
    await topUp(`account:${v}`, 500, `${id}.0`);
    expect((await kit.grab(v, id)).body).toEqual({ status: 'GRABBED', envelopeId: `${id}.0`, amount: 500 });
    await kit.credited(id);
    expect((await kit.user(v).get(`/red-envelopes/activities/${id}/mine`)).body).toEqual({
      items: [{ envelopeId: `${id}.0`, amount: 500, crediting: 'CREDITED' }],
    });
    expect(await kit.balance(v)).toBe(1000);
    const entries = await kit.entries(`account:${v}`);
    expect(entries.map((e) => [e.kind, e.reference, e.amount])).toEqual([
      ['red-envelope', `${id}.0`, 500],
      ['top-up', `${id}.0`, 500],
    ]);
    expect(await kit.expectBalanced(id)).toMatchObject({ credited: { count: 1, amount: 500 } });
  });

  it.each([300, 250])('a top-up of %i under the refund reference: the rain still refunds 300 in a refund entry and settles', async (amount) => {
    const sponsor = `m_refb${amount}_${process.pid}`;
    await kit.fund(sponsor, 300);
    const id = rainId(`refb${amount}`);
    await topUp(`merchant:${sponsor}`, amount, `red-envelope:${id}:leftover`);
    const endsAt = (await redisNow()) + 2000;
    await kit.create(rainBody(id, { sponsorMerchantId: sponsor, totalAmount: 300, count: 3, endsAt: new Date(endsAt).toISOString() }));
    expect(await kit.merchantBalance(sponsor)).toBe(amount);
    await settled(id);
    expect((await kit.admin().get(`/admin/red-envelopes/activities/${id}`)).body).toMatchObject({ state: 'SETTLED', refundedAmount: 300 });
    const refunds = (await kit.entries(`merchant:${sponsor}`)).filter((e) => e.kind === 'refund');
    expect(refunds.map((e) => [e.reference, e.amount])).toEqual([[`red-envelope:${id}:leftover`, 300]]);
    expect(await kit.merchantBalance(sponsor)).toBe(amount + 300);
    expect(await kit.expectBalanced(id)).toMatchObject({ refunded: { count: 3, amount: 300 } });
  });

  it('a top-up under the funding reference does not refuse the create: the rain is funded by its own debit', async () => {
    const sponsor = `m_refc_${process.pid}`;
    await kit.fund(sponsor, 1000);
    const id = rainId('refc');
    await topUp(`merchant:${sponsor}`, 1000, `red-envelope:${id}`);
    const res = await kit.admin().post('/admin/red-envelopes/activities', rainBody(id, { sponsorMerchantId: sponsor, totalAmount: 1000, count: 10 }));
    expect(res.status).toBe(202);
    kit.rains.add(id);
    await waitUntil('loaded', async () => ['READY', 'OPEN'].includes(await kit.state(id)), 20_000, 50);
    expect((await kit.entries(`merchant:${sponsor}`)).map((e) => [e.kind, e.reference, e.amount])).toEqual([
      ['funding', `red-envelope:${id}`, -1000],
      ['top-up', `red-envelope:${id}`, 1000],
      ['top-up', expect.any(String), 1000],
    ]);
    expect(await kit.merchantBalance(sponsor)).toBe(1000);
  });

  it('a create the wallet refuses leaves nothing behind: 409 (documented), then 404, and the id is free again', async () => {
    const sponsor = `m_refd_${process.pid}`;
    await kit.fund(sponsor, 1000);
    const id = rainId('refd');
    // A funding entry of this reference with other terms (as no rain of this id ever wrote): the debit is refused.
    const k = walletKeys(ctx.t.app.get(KeyBuilder), { kind: 'merchant', id: sponsor });
    const n = (await ctx.raw.llen(k.ledger)) + 1;
    const stray = {
      entryId: String(n),
      kind: 'funding',
      currency: 'CNY',
      amount: -1,
      balanceAfter: 999,
      reference: `red-envelope:${id}`,
      memo: '',
      at: Date.now(),
    };
    await ctx.raw.rpush(k.ledger, JSON.stringify(stray));
    await ctx.raw.hset(k.refs, `funding|red-envelope:${id}`, String(n));
    await ctx.raw.hincrby(k.balances, 'CNY', -1);
    kit.money.spent += 1;
    const body = rainBody(id, { sponsorMerchantId: sponsor, totalAmount: 500, count: 5 });
    const res = await kit.admin().post('/admin/red-envelopes/activities', body);
    expect([res.status, res.body.error]).toEqual([409, 'REFERENCE_REUSED']);
    const doc = (await kit.admin().get('/docs-json')).body as { paths: Record<string, { post?: { responses: Record<string, unknown> } }> };
    expect(JSON.stringify(doc.paths['/admin/red-envelopes/activities'].post!.responses['409'])).toContain('REFERENCE_REUSED');
    expect((await kit.admin().get(`/admin/red-envelopes/activities/${id}`)).status).toBe(404);
    expect(await kit.merchantBalance(sponsor)).toBe(999);
  });

  it('an activity id never spells another rain’s envelope or sub-pool: ids hold no "." nor ":"', async () => {
    for (const bad of ['refx.0', 'refx:0', 'a.b']) {
      const res = await kit.admin().post('/admin/red-envelopes/activities', rainBody(bad));
      expect([res.status, res.body.details?.[0]?.field]).toEqual([400, 'activityId']);
    }
  });
});
