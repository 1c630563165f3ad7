import { WalletService } from '../../src/features/wallet/wallet.service';
import { homeOf } from '../../src/engines/sharded-pool/home';
import type { WalletCommand } from '../../src/features/wallet/wallet.types';
import { waitUntil } from '../harness/redis-process';
import { rainBody, rainId, rainKit, type RainKit, redisNowMs } from '../support/red-envelopes';
import { CREDS, useAppOnOwnRedis } from '../support/test-app';

/**
 * Grabbing over HTTP: concurrent double (triple) taps, the window's edges on the Redis clock, and the end of a
 * rain with envelopes left (one refund entry to the sponsor, ENDED then SETTLED). After every test that grabs:
 * the reconciliation balances and money is conserved.
 */
const ctx = useAppOnOwnRedis({ RATE_LIMIT_ENABLED: 'false' });
let kit: RainKit;
beforeAll(async () => {
  kit = rainKit(ctx.t);
  await kit.fund(CREDS.merchantId, 1_000_000);
});
afterEach(async () => kit.expectConservation(ctx.raw));

/** The Redis server's clock, ms (the window is checked on it). */
const redisNow = () => redisNowMs(ctx.raw);
const iso = (ms: number) => new Date(ms).toISOString();
const untilRedisTime = (ms: number) => waitUntil('the Redis clock', async () => (await redisNow()) >= ms, 10_000, 20);

describe('red-envelope grabs: concurrent taps', () => {
  it.each([1, 3])('300 users tapping 3 times at once on 200 envelopes (%i sub-pools): each envelope once, nobody holds two', async (subPools) => {
    const id = rainId(`tap${subPools}`);
    await kit.create(rainBody(id, { totalAmount: 20_000, count: 200, subPools }));
    const users = Array.from({ length: 300 }, (_, i) => `acc_t${subPools}_${i}`);
    const answers = await Promise.all(users.flatMap((u) => [0, 1, 2].map(async () => ({ u, res: await kit.grab(u, id) }))));
    expect(answers.filter((a) => a.res.status !== 200).map((a) => a.res.status)).toEqual([]);

    const grabbed = answers.filter((a) => a.res.body.status === 'GRABBED');
    expect(grabbed).toHaveLength(200);
    expect(new Set(grabbed.map((a) => a.res.body.envelopeId)).size).toBe(200);
    const holder = new Map(grabbed.map((a) => [a.u, { envelopeId: a.res.body.envelopeId as string, amount: a.res.body.amount as number }]));
    // Nobody holds two: each holder's other taps answer the same envelope (or NONE_LEFT, once this instance knows
    // every sub-pool is empty); a user without an envelope never hears ALREADY_GRABBED.
    expect(holder.size).toBe(200);
    let repeats = 0;
    for (const { u, res } of answers) {
      const mine = holder.get(u);
      if (res.body.status === 'ALREADY_GRABBED') {
        repeats++;
        expect({ u, ...res.body }).toEqual({ u, status: 'ALREADY_GRABBED', ...mine });
      } else if (res.body.status !== 'GRABBED') expect({ u, status: res.body.status }).toEqual({ u, status: 'NONE_LEFT' });
    }
    expect(repeats).toBeGreaterThan(0);

    const r = await kit.credited(id);
    expect(r).toMatchObject({ grabbed: { count: 200, amount: 20_000 }, credited: { count: 200, amount: 20_000 }, left: { count: 0, amount: 0 } });
    await kit.expectBalanced(id);
    // Each holder's /mine is that one envelope, credited; their wallet holds its amount.
    for (const [u, env] of holder) {
      expect((await kit.user(u).get(`/red-envelopes/activities/${id}/mine`)).body).toEqual({ items: [{ ...env, crediting: 'CREDITED' }] });
      expect(await kit.balance(u)).toBe(env.amount);
    }
    // Afterwards every tap of a holder, and of anyone else, changes nothing.
    const late = await Promise.all(users.slice(0, 50).map((u) => kit.grab(u, id)));
    expect(late.filter((x) => x.body.status === 'GRABBED')).toEqual([]);
    expect((await kit.reconciliation(id)).grabbed.count).toBe(200);
  });

  it('while envelopes remain, every repeated tap answers ALREADY_GRABBED with the same envelope (3 sub-pools)', async () => {
    const id = rainId('rep');
    await kit.create(rainBody(id, { totalAmount: 30_000, count: 300, subPools: 3 }));
    const users = Array.from({ length: 150 }, (_, i) => `acc_rep_${i}`);
    const answers = await Promise.all(users.flatMap((u) => [0, 1, 2].map(async () => ({ u, body: (await kit.grab(u, id)).body }))));
    for (const u of users) {
      const mine = answers.filter((a) => a.u === u).map((a) => a.body);
      expect(mine.map((b) => b.status).sort()).toEqual(['ALREADY_GRABBED', 'ALREADY_GRABBED', 'GRABBED']);
      expect(new Set(mine.map((b) => `${b.envelopeId}:${b.amount}`)).size).toBe(1);
    }
    expect(await kit.credited(id)).toMatchObject({ grabbed: { count: 150 }, left: { count: 150 } });
    await kit.expectBalanced(id);
  });
});

describe('red-envelope grabs: a limit above one with sub-pools', () => {
  it('a user whose home sub-pool is empty still gets every envelope up to the limit, from the other sub-pool', async () => {
    const id = rainId('lim');
    await kit.create(rainBody(id, { totalAmount: 400, count: 4, subPools: 2, perUserLimit: 2 }));
    // Accounts by home sub-pool: two drain the user's home sub-pool (2 envelopes), then the user taps three times.
    const byHome: string[][] = [[], []];
    for (let i = 0; byHome[0].length < 3 || byHome[1].length < 3; i++) byHome[homeOf(`acc_lim_${i}`, id, 2)].push(`acc_lim_${i}`);
    const [user, drainer] = byHome[0];
    for (let i = 0; i < 2; i++) expect((await kit.grab(drainer, id)).body.status).toBe('GRABBED');
    const taps = [];
    for (let i = 0; i < 3; i++) taps.push((await kit.grab(user, id)).body);
    expect(taps.map((t) => t.status)).toEqual(['GRABBED', 'GRABBED', 'ALREADY_GRABBED']);
    expect(new Set(taps.slice(0, 2).map((t) => t.envelopeId)).size).toBe(2);
    const r = await kit.credited(id);
    expect(r).toMatchObject({ grabbed: { count: 4, amount: 400 }, left: { count: 0 }, balanced: true });
    expect((await kit.user(user).get(`/red-envelopes/activities/${id}/mine`)).body.items).toHaveLength(2);
  });
});

describe('red-envelope grabs: the window on the Redis clock', () => {
  it('NOT_STARTED before startsAt, GRABBED after', async () => {
    const id = rainId('start');
    const startsAt = (await redisNow()) + 1500;
    await kit.create(rainBody(id, { totalAmount: 1000, count: 10, startsAt: iso(startsAt) }));
    const early = await kit.grab('acc_early', id);
    const checkedAt = await redisNow();
    expect(checkedAt).toBeLessThan(startsAt); // else the machine was too slow for this test to mean anything
    expect(early.body).toEqual({ status: 'NOT_STARTED' });
    expect((await kit.user('acc_early').get(`/red-envelopes/activities/${id}`)).body).toMatchObject({ state: 'READY', left: 10 });
    await untilRedisTime(startsAt);
    const on = await kit.grab('acc_early', id);
    expect(on.body).toMatchObject({ status: 'GRABBED', envelopeId: expect.stringMatching(new RegExp(`^${id}\\.\\d+$`)) });
    await kit.credited(id);
    await kit.expectBalanced(id);
  });

  it('GRABBED before endsAt, ENDED after (a holder still hears their envelope)', async () => {
    const id = rainId('end');
    const endsAt = (await redisNow()) + 2000;
    await kit.create(rainBody(id, { totalAmount: 1000, count: 10, endsAt: iso(endsAt) }));
    const inTime = await kit.grab('acc_intime', id);
    expect(inTime.body.status).toBe('GRABBED');
    await untilRedisTime(endsAt);
    expect((await kit.grab('acc_late', id)).body).toEqual({ status: 'ENDED' });
    expect((await kit.grab('acc_intime', id)).body).toEqual({ ...inTime.body, status: 'ALREADY_GRABBED' });
    await waitUntil('settled', async () => (await kit.state(id)) === 'SETTLED', 20_000, 50);
    expect((await kit.grab('acc_late2', id)).body).toEqual({ status: 'ENDED' });
    expect(await kit.expectBalanced(id)).toMatchObject({ grabbed: { count: 1 }, credited: { count: 1 }, left: { count: 0 }, refunded: { count: 9 } });
  });
});

describe('red-envelope rains: the leftover refund and settlement', () => {
  it('what is left goes back to the sponsor in one ledger entry; ENDED, then SETTLED once every grab is credited', async () => {
    const sponsor = `m_left_${process.pid}`;
    await kit.fund(sponsor, 5000);
    const id = rainId('left');
    const endsAt = (await redisNow()) + 2500;
    await kit.create(rainBody(id, { sponsorMerchantId: sponsor, totalAmount: 5000, count: 50, endsAt: iso(endsAt), subPools: 2 }));
    expect(await kit.merchantBalance(sponsor)).toBe(0);
    const users = Array.from({ length: 12 }, (_, i) => `acc_left_${i}`);
    for (const r of await Promise.all(users.map((u) => kit.grab(u, id)))) expect(r.body.status).toBe('GRABBED');
    await kit.credited(id);
    // One more grab whose crediting is held back until the rain has ENDED (its wallet credit fails until then), as a
    // grab whose crediting is still under way at the end.
    const wallets = ctx.t.app.get(WalletService);
    const credit = wallets.credit.bind(wallets);
    let holding = true;
    const spy = jest.spyOn(wallets, 'credit').mockImplementation(async (cmd: WalletCommand) => {
      if (holding && cmd.owner.id === 'acc_left_held') throw new Error('wallet unavailable');
      return credit(cmd);
    });
    const a = await kit.activities.mustRead(id);
    const held = await kit.store.grab(kit.store.pool(a, 0), 'acc_left_held', false);
    expect(held.outcome).toBe('GRABBED');
    const before = await kit.reconciliation(id);
    expect(before).toMatchObject({ grabbed: { count: 13 }, pending: { count: 1 }, left: { count: 37 }, refunded: { count: 0, amount: 0 }, balanced: true });
    const left = before.left.amount;

    const seen: string[] = [];
    await waitUntil(
      'settled',
      async () => {
        const s = await kit.state(id);
        if (seen[seen.length - 1] !== s) seen.push(s);
        if (s === 'ENDED') holding = false;
        return s === 'SETTLED';
      },
      30_000,
      20,
    );
    spy.mockRestore();
    expect(seen.slice(seen.indexOf('ENDED'))).toEqual(['ENDED', 'SETTLED']);
    const after = await kit.expectBalanced(id);
    expect(after).toMatchObject({
      grabbed: { count: 13, amount: before.grabbed.amount },
      credited: { count: 13, amount: before.grabbed.amount },
      pending: { count: 0, amount: 0 },
      left: { count: 0, amount: 0 },
      refunded: { count: 37, amount: left },
    });
    expect((await kit.admin().get(`/admin/red-envelopes/activities/${id}`)).body).toMatchObject({ state: 'SETTLED', refundedAmount: left });
    const refunds = (await kit.entries(`merchant:${sponsor}`)).filter((e) => e.kind !== 'top-up' && e.kind !== 'funding');
    expect(refunds.map((e) => [e.reference, e.amount])).toEqual([[`red-envelope:${id}:leftover`, left]]);
    expect(await kit.merchantBalance(sponsor)).toBe(left);
    expect(await kit.balance('acc_left_held')).toBe((held as { amount: number }).amount);
    // Every key of the rain expires with its record (the grabs, envelope states and credit stream too).
    const rainKeys = await ctx.raw.keys(`${ctx.t.config.redis.keyPrefix}:red-envelope:{[ap]:${id}*`);
    for (const pool of [0, 1]) for (const part of ['grabs', 'env', 'stats', 'credits']) expect(rainKeys).toContain(kit.store.pool(a, pool)[part as 'grabs']);
    const activityTtl = await ctx.raw.pttl(rainKeys.find((k) => k.endsWith(':activity'))!);
    expect(activityTtl).toBeGreaterThan(0);
    for (const k of rainKeys) {
      const ttl = await ctx.raw.pttl(k);
      expect({ k, expires: ttl > 0 && Math.abs(ttl - activityTtl) < 60_000 }).toEqual({ k, expires: true });
    }
    // Running the end again changes nothing.
    await kit.activities.end(id);
    expect((await kit.entries(`merchant:${sponsor}`)).filter((e) => e.reference === `red-envelope:${id}:leftover`)).toHaveLength(1);
    expect(await kit.merchantBalance(sponsor)).toBe(left);
  });
});

describe('red-envelope rains: titles outside the Basic Multilingual Plane', () => {
  it('the wallet memo cut from a long emoji title never ends in half an emoji', async () => {
    const id = rainId('emoji');
    // 'a' and 63 emoji: 64 characters, 127 UTF-16 units; the memo's 64th unit is the first half of an emoji.
    await kit.create(rainBody(id, { title: `a${'😀'.repeat(63)}`, totalAmount: 100, count: 2 }));
    expect((await kit.grab('acc_emoji_memo', id)).body.status).toBe('GRABBED');
    await kit.credited(id);
    await kit.expectBalanced(id);
    const memo = `a${'😀'.repeat(31)}`;
    const credit = (await kit.admin().get('/admin/wallets/account:acc_emoji_memo')).body.entries as { kind: string; memo: string }[];
    expect(credit.map((e) => [e.kind, e.memo])).toEqual([['red-envelope', memo]]);
    const sponsor = (await kit.admin().get(`/admin/wallets/merchant:${CREDS.merchantId}?limit=200`)).body.entries as { reference: string; memo: string }[];
    expect(sponsor.find((e) => e.reference === `red-envelope:${id}`)?.memo).toBe(memo);
  });
});
