import { rainBody, rainId, rainKit, type RainKit } from '../support/red-envelopes';
import { CREDS, useAppOnOwnRedis } from '../support/test-app';

const ctx = useAppOnOwnRedis();
let kit: RainKit;
beforeAll(() => (kit = rainKit(ctx.t)));

describe('red-envelope rain over HTTP', () => {
  it('funds, preloads, grabs at most one per user, credits each grab once, and balances', async () => {
    await kit.fund(CREDS.merchantId, 10_000);
    const id = rainId();
    await kit.create(rainBody(id, { totalAmount: 10_000, count: 100 }));
    const users = Array.from({ length: 150 }, (_, i) => `acc_rain_${i}`);
    // Every user taps twice at once.
    const answers = await Promise.all(users.flatMap((u) => [kit.grab(u, id), kit.grab(u, id)]));
    expect(answers.every((r) => r.status === 200)).toBe(true);
    const byUser = new Map<string, Set<string>>();
    answers.forEach((r, i) => {
      const u = users[Math.floor(i / 2)];
      if (r.body.envelopeId) byUser.set(u, (byUser.get(u) ?? new Set()).add(r.body.envelopeId as string));
    });
    // At most one envelope per user, and every envelope grabbed by one user.
    expect([...byUser.values()].every((s) => s.size === 1)).toBe(true);
    const envelopes = [...byUser.values()].map((s) => [...s][0]);
    expect(new Set(envelopes).size).toBe(100);
    const statuses = answers.map((r) => r.body.status as string);
    expect(statuses.filter((s) => s === 'GRABBED')).toHaveLength(100);

    const r = await kit.credited(id);
    expect(r).toMatchObject({ total: 10_000, count: 100, grabbed: { count: 100, amount: 10_000 }, credited: { count: 100, amount: 10_000 }, balanced: true });
    // The wallets hold exactly what was grabbed.
    let sum = 0;
    for (const u of byUser.keys()) sum += await kit.balance(u);
    expect(sum).toBe(10_000);
    const mine = await kit.user([...byUser.keys()][0]).get(`/red-envelopes/activities/${id}/mine`);
    expect(mine.status).toBe(200);
    expect(mine.body.items[0]).toMatchObject({ crediting: 'CREDITED' });
  });
});
