import { InsufficientFundsError } from '../../src/features/wallet';
import { RedEnvelopeModule } from '../../src/features/red-envelope';
import { GrabService } from '../../src/features/red-envelope/grab.service';
import { RedEnvelopeActivities } from '../../src/features/red-envelope/red-envelope-activities.service';
import type { CreateActivityCommand } from '../../src/features/red-envelope/red-envelope.commands';
import { RedEnvelopeConflictError, RedEnvelopeNotFoundError } from '../../src/features/red-envelope/red-envelope.errors';
import type { GrabResult } from '../../src/features/red-envelope/red-envelope.types';
import { buildModule, CollaboratorDown, eventually, FakeWallet, fakeWalletModule, rejection, uid, useModuleRedis } from '../support/module-tier';

/**
 * The red-envelope module alone on a real Redis, the wallet module replaced by an in-memory fake at its public
 * interface (WalletService: debit the sponsor, credit each grab, read an entry back). Through the module's services:
 * a rain funded and preloaded, grabbed at most once per user, each grab credited exactly once (even when the wallet
 * fails and the credit is retried), the grabs adding up to the total.
 */
const SPONSOR = { kind: 'merchant' as const, id: 'm_sponsor' };
const redis = useModuleRedis();

async function setup() {
  const wallet = new FakeWallet();
  const m = await buildModule(redis, {
    feature: RedEnvelopeModule,
    fakes: [fakeWalletModule(wallet)],
    // A failed credit is taken over again after 100 ms (the least allowed), not 5 s; a create that stopped, after 1 s.
    env: { RED_ENVELOPE_CREDIT_RETRY_MS: '100', RED_ENVELOPE_CREDIT_RETRY_MAX_MS: '200', RED_ENVELOPE_RESUME_AFTER_MS: '1000' },
  });
  const activities = m.get(RedEnvelopeActivities);
  const grabs = m.get(GrabService);

  /** Creates the rain and waits until it is preloaded (READY). */
  const preload = async (cmd: CreateActivityCommand): Promise<void> => {
    wallet.topUp(SPONSOR, 'CNY', cmd.totalAmount);
    expect((await activities.create(cmd)).created).toBe(true);
    await eventually('the rain READY', async () => (await activities.mustRead(cmd.activityId)).state === 'READY' || 'loading');
  };

  /** Every account's envelopes once crediting has finished (all CREDITED). */
  const expectAllCredited = (activityId: string, accounts: string[]): Promise<void> =>
    eventually('every grab credited', async () => {
      for (const a of accounts) if ((await grabs.mine(a, activityId)).some((e) => e.crediting !== 'CREDITED')) return `${a} pending`;
      return true;
    });
  return { wallet, activities, grabs, preload, expectAllCredited };
}

function rain(over: Partial<CreateActivityCommand> = {}): CreateActivityCommand {
  const now = Date.now();
  return {
    activityId: uid('r'),
    sponsorMerchantId: SPONSOR.id,
    title: 'Module tier rain',
    currency: 'CNY',
    totalAmount: 10_000,
    count: 20,
    startsAt: now - 1000,
    endsAt: now + 3_600_000,
    minAmount: 1,
    perUserLimit: 1,
    subPools: 4,
    ...over,
  };
}

describe('RedEnvelopeModule alone (wallet faked)', () => {
  it('a preloaded rain: one envelope per user however many taps race, each credited once, the grabs adding up to the total', async () => {
    const { wallet, activities, grabs, preload, expectAllCredited } = await setup();
    const cmd = rain();
    await preload(cmd);
    expect(wallet.entriesOf('funding').map((e) => [e.reference, e.amount])).toEqual([[`red-envelope:${cmd.activityId}`, -cmd.totalAmount]]);

    // 30 users for 20 envelopes, each tapping three times at once.
    const users = Array.from({ length: 30 }, (_, i) => `u${i}`);
    const taps = await Promise.all(users.flatMap((u) => [0, 1, 2].map(() => grabs.grab(u, cmd.activityId).then((r) => ({ u, r })))));
    const byUser = new Map<string, GrabResult[]>();
    for (const { u, r } of taps) byUser.set(u, [...(byUser.get(u) ?? []), r]);
    const winners = users.filter((u) => byUser.get(u)!.some((r) => r.status === 'GRABBED'));
    expect(winners).toHaveLength(cmd.count);
    for (const u of users) {
      const rs = byUser.get(u)!;
      const held = rs.filter((r) => r.envelopeId);
      if (winners.includes(u)) {
        // One GRABBED; the other taps answer the same envelope, or NONE_LEFT once the instance saw every sub-pool empty.
        expect(rs.filter((r) => r.status === 'GRABBED')).toHaveLength(1);
        expect(new Set(held.map((r) => r.envelopeId)).size).toBe(1);
        for (const r of rs) expect(['GRABBED', 'ALREADY_GRABBED', 'NONE_LEFT']).toContain(r.status);
      } else expect(rs.map((r) => r.status)).toEqual(['NONE_LEFT', 'NONE_LEFT', 'NONE_LEFT']);
    }
    const won = winners.map((u) => byUser.get(u)!.find((r) => r.status === 'GRABBED')!);
    expect(new Set(won.map((r) => r.envelopeId)).size).toBe(cmd.count);
    expect(won.reduce((s, r) => s + r.amount!, 0)).toBe(cmd.totalAmount);

    await expectAllCredited(cmd.activityId, winners);
    const credits = wallet.entriesOf('red-envelope');
    expect(credits.map((e) => e.reference).sort()).toEqual(won.map((r) => r.envelopeId).sort());
    for (const u of winners) expect(wallet.balanceOf({ kind: 'account', id: u }, 'CNY')).toBe(byUser.get(u)!.find((r) => r.amount)!.amount);
    await activities.end(cmd.activityId);
    const rec = await activities.reconciliation(cmd.activityId);
    expect(rec).toMatchObject({ balanced: true, grabbed: { count: 20, amount: 10_000 }, credited: { count: 20, amount: 10_000 }, left: { count: 0 } });
    expect((await activities.mustRead(cmd.activityId)).state).toBe('SETTLED');
  });

  it('when the wallet fails a credit (down before it, or its reply lost after it), the grab stays pending and is credited again, once', async () => {
    const { wallet, activities, grabs, preload, expectAllCredited } = await setup();
    const cmd = rain({ count: 8, totalAmount: 800, subPools: 2 });
    await preload(cmd);
    wallet.failures.fail('credit', 'before', 3);
    wallet.failures.fail('credit', 'after', 3);
    const users = Array.from({ length: 6 }, (_, i) => `f${i}`);
    const won = await Promise.all(users.map((u) => grabs.grab(u, cmd.activityId)));
    expect(won.map((r) => r.status)).toEqual(Array(6).fill('GRABBED'));

    await expectAllCredited(cmd.activityId, users);
    expect(wallet.failures.pending('credit')).toBe(0);
    // Six failed calls were made again: more calls than grabs, one entry (and one amount in the balance) per grab.
    expect(wallet.calls.filter((c) => c.direction === 'credit').length).toBeGreaterThanOrEqual(12);
    expect(
      wallet
        .entriesOf('red-envelope')
        .map((e) => e.reference)
        .sort(),
    ).toEqual(won.map((r) => r.envelopeId).sort());
    users.forEach((u, i) => expect(wallet.balanceOf({ kind: 'account', id: u }, 'CNY')).toBe(won[i].amount));

    // The end refunds the two envelopes left to the sponsor, once, and settles the rain.
    await activities.end(cmd.activityId);
    await activities.end(cmd.activityId);
    const left = 800 - won.reduce((s, r) => s + r.amount!, 0);
    expect(wallet.entriesOf('refund').map((e) => e.amount)).toEqual([left]);
    // Money is conserved: the sponsor's 800 is now in the grabbers' wallets and, for what was left, back in the sponsor's.
    expect(wallet.balanceOf(SPONSOR, 'CNY') + users.reduce((s, u) => s + wallet.balanceOf({ kind: 'account', id: u }, 'CNY'), 0)).toBe(800);
    expect(wallet.balanceOf(SPONSOR, 'CNY')).toBe(left);
    expect(await activities.reconciliation(cmd.activityId)).toMatchObject({ balanced: true, refunded: { count: 2, amount: left }, pending: { count: 0 } });
  });

  it('a sponsor with too little money: the create is refused with the wallet’s typed error, no rain is stored, and the id can be funded later', async () => {
    const { wallet, activities, grabs, preload } = await setup();
    const cmd = rain();
    // The fake holds nothing for the sponsor: its debit refuses.
    expect(await rejection(activities.create(cmd))).toBeInstanceOf(InsufficientFundsError);
    expect(await rejection(activities.mustRead(cmd.activityId))).toBeInstanceOf(RedEnvelopeNotFoundError);
    expect(await rejection(grabs.grab('u', cmd.activityId))).toBeInstanceOf(RedEnvelopeNotFoundError);
    expect(wallet.entriesOf('funding')).toEqual([]);
    await preload(cmd);
    expect(wallet.entriesOf('funding').map((e) => e.amount)).toEqual([-cmd.totalAmount]);
    // The same id with another configuration: the module's typed conflict.
    expect(await rejection(activities.create({ ...cmd, title: 'another' }))).toBeInstanceOf(RedEnvelopeConflictError);
  });

  it('when the wallet loses the funding debit’s reply, the create fails, the rain stays FUNDING, and its job funds it once and loads it', async () => {
    const { wallet, activities, grabs } = await setup();
    const cmd = rain({ count: 4, totalAmount: 400, subPools: 1 });
    wallet.topUp(SPONSOR, 'CNY', 1000);
    wallet.failures.fail('debit', 'after');
    expect(await rejection(activities.create(cmd))).toBeInstanceOf(CollaboratorDown);
    expect((await activities.mustRead(cmd.activityId)).state).toBe('FUNDING');
    await eventually('the rain READY', async () => (await activities.mustRead(cmd.activityId)).state === 'READY' || 'not yet', 10_000);
    expect(wallet.entriesOf('funding').map((e) => e.amount)).toEqual([-400]);
    expect(wallet.balanceOf(SPONSOR, 'CNY')).toBe(600);
    expect((await grabs.grab('u', cmd.activityId)).status).toBe('GRABBED');
  });
});
