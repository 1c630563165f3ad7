import request from 'supertest';
import { legReference } from '../../src/features/orders/order-queues';
import { rainBody, rainId, rainKit, type RainKit } from '../support/red-envelopes';
import { CREDS, merchantHeaders, useAppOnOwnRedis, userToken } from '../support/test-app';

/**
 * A user spends what they grabbed, end to end, with the balance method paying from wallets for real
 * (BALANCE_CHANNEL=wallet): grab, credited, a merchant's order for that user, a payment plan paid by `balance`.
 */
const ctx = useAppOnOwnRedis({ RATE_LIMIT_ENABLED: 'false', BALANCE_CHANNEL: 'wallet', CHANNEL_LATENCY_MS: '5' });
let kit: RainKit;
beforeAll(async () => {
  kit = rainKit(ctx.t);
  await kit.fund(CREDS.merchantId, 100_000);
});
afterEach(async () => kit.expectConservation(ctx.raw));

let seq = 0;
const asUser = (account: string) => ({ authorization: `Bearer ${userToken(account)}` });
/** A new order of the test merchant, for `payer`, with a PENDING plan paying it all by `balance`. */
async function balancePlan(payer: string, amount: number): Promise<string> {
  const path = '/merchant/orders';
  const text = JSON.stringify({
    merchantOrderNo: `re-${process.pid}-${++seq}`,
    amount,
    currency: 'CNY',
    subject: 'Spent from a red envelope',
    payerAccountId: payer,
  });
  const order = await request(ctx.t.server)
    .post(path)
    .set(merchantHeaders('POST', path, text))
    .send(text);
  expect(order.status).toBe(201);
  const plan = await request(ctx.t.server)
    .post(`/orders/${order.body.orderId}/payment-plans`)
    .set(asUser(payer))
    .send({ instructions: [{ method: 'balance', amount }] });
  expect(plan.status).toBe(201);
  legStamps.set(plan.body.planId, String(Date.parse(order.body.createdAt)));
  return plan.body.planId as string;
}
/** The order's createdAt (epoch ms) of each plan made by balancePlan: part of its legs' channel references. */
const legStamps = new Map<string, string>();
const pay = (payer: string, planId: string) => request(ctx.t.server).post(`/payment-plans/${planId}/pay`).set(asUser(payer)).send();

describe('red envelopes: a user spends what they grabbed', () => {
  it('grab, credited, then an order paid with balance debits the wallet once; an order above the balance fails and takes nothing', async () => {
    const id = rainId('spend');
    await kit.create(rainBody(id, { totalAmount: 10_000, count: 10, minAmount: 100 }));
    const u = `acc_spend_${process.pid}`;
    const g = await kit.grab(u, id);
    expect(g.body.status).toBe('GRABBED');
    const amount = g.body.amount as number;
    expect(amount).toBeGreaterThanOrEqual(100);

    let mine: request.Response | undefined;
    for (let i = 0; i < 200 && mine?.body.items?.[0]?.crediting !== 'CREDITED'; i++) {
      if (i) await new Promise((r) => setTimeout(r, 50));
      mine = await kit.user(u).get(`/red-envelopes/activities/${id}/mine`);
    }
    expect(mine!.body).toEqual({ items: [{ envelopeId: g.body.envelopeId, amount, crediting: 'CREDITED' }] });
    const wallet = await kit.user(u).get('/wallet');
    expect(wallet.body.balances).toEqual([{ currency: 'CNY', balance: amount }]);
    expect(wallet.body.entries).toEqual([expect.objectContaining({ amount, reference: g.body.envelopeId })]);
    await kit.expectBalanced(id);

    // An order above the balance: a failure outcome, nothing taken.
    const tooMuch = await balancePlan(u, amount + 1);
    const failed = await pay(u, tooMuch);
    expect([failed.status, failed.body.status, failed.body.instructions[0].status]).toEqual([200, 'FAILED', 'FAILED']);
    expect(await kit.balance(u)).toBe(amount);

    // An order of at most what was grabbed: paid, the wallet debited once (a repeated pay moves nothing).
    const price = amount - 1;
    const planId = await balancePlan(u, price);
    const paid = await pay(u, planId);
    expect([paid.status, paid.body.status, paid.body.instructions[0].status]).toEqual([200, 'PAID', 'SUCCEEDED']);
    kit.money.spent += price;
    expect((await pay(u, planId)).body.status).toBe('PAID');
    expect(await kit.balance(u)).toBe(1);
    const entries = (await kit.user(u).get('/wallet?limit=50')).body.entries as { kind: string; amount: number; reference: string }[];
    expect(entries.filter((e) => e.kind === 'payment').map((e) => [e.amount, e.reference])).toEqual([
      [-price, legReference({ planId, legStamp: legStamps.get(planId)! }, 0)],
    ]);
    await kit.expectBalanced(id);
  });
});
