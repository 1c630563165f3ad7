import { InvalidArgumentError } from '../../src/platform/core/domain.error';
import { ScriptRegistry } from '../../src/platform/scripts/script-registry.service';
import { InsufficientFundsError, ReferenceReusedError, ReferenceVoidedError, WalletModule, WalletService } from '../../src/features/wallet';
import type { WalletCommand, WalletEntryKind } from '../../src/features/wallet/wallet.types';
import { buildModule, CollaboratorDown, rejection, uid, useModuleRedis } from '../support/module-tier';
import { sumOfWalletBalances, walletKeysIn } from '../support/wallet';

/**
 * The wallet module alone (it uses no other feature) on a real Redis: credits and debits through WalletService,
 * idempotent per (kind, reference), the money conserved under concurrent calls, refusals as typed errors.
 */
const redis = useModuleRedis();

async function setup() {
  const m = await buildModule(redis, { feature: WalletModule });
  return { m, wallets: m.get(WalletService) };
}

const account = (id: string) => ({ kind: 'account' as const, id });
const cmd = (owner: string, kind: WalletEntryKind, amount: number, reference = uid('ref', 64)): WalletCommand => ({
  owner: account(owner),
  currency: 'CNY',
  amount,
  reference,
  kind,
});

describe('WalletModule alone', () => {
  it('credits and debits once per (kind, reference): a repeat answers the same entry and moves nothing', async () => {
    const { wallets } = await setup();
    const topUp = cmd('u1', 'top-up', 1000, 'top-1');
    const first = await wallets.credit(topUp);
    const again = await wallets.credit(topUp);
    expect(first).toMatchObject({ applied: true, balance: 1000 });
    expect(again).toMatchObject({ applied: false, entryId: first.entryId, balance: 1000 });

    const pay = cmd('u1', 'payment', 300, 'pay-1');
    const paid = await wallets.debit(pay);
    const paidAgain = await wallets.debit(pay);
    expect(paid).toMatchObject({ applied: true, balance: 700 });
    expect(paidAgain).toMatchObject({ applied: false, entryId: paid.entryId, balance: 700 });

    // The same reference under another kind is another entry (a reference is per kind).
    expect(await wallets.credit(cmd('u1', 'refund', 50, 'pay-1'))).toMatchObject({ applied: true, balance: 750 });
    expect((await wallets.entries(account('u1'), undefined, 10)).items.map((e) => [e.kind, e.amount])).toEqual([
      ['refund', 50],
      ['payment', -300],
      ['top-up', 1000],
    ]);
  });

  it('refuses with typed errors and stores nothing: too little money, a reference reused with other terms, a voided one, a bad field', async () => {
    const { m, wallets } = await setup();
    await wallets.credit(cmd('u2', 'top-up', 100, 'top-2'));
    const before = await walletKeysIn(redis.raw, m.keys);
    const snapshot = await Promise.all(before.map((k) => redis.raw.dump(k)));

    const short = await rejection(wallets.debit(cmd('u2', 'payment', 101, 'pay-2')));
    expect(short).toBeInstanceOf(InsufficientFundsError);
    expect((short as InsufficientFundsError).details).toEqual({ currency: 'CNY', balance: 100, amount: 101 });
    expect(await rejection(wallets.credit(cmd('u2', 'top-up', 99, 'top-2')))).toBeInstanceOf(ReferenceReusedError);
    expect(await rejection(wallets.debit(cmd('u2', 'top-up', 100, 'top-2')))).toBeInstanceOf(ReferenceReusedError);
    expect(await wallets.settle(account('u2'), 'payment', 'pay-never')).toBeNull();
    const voidedKeys = await walletKeysIn(redis.raw, m.keys);
    expect(await rejection(wallets.debit(cmd('u2', 'payment', 10, 'pay-never')))).toBeInstanceOf(ReferenceVoidedError);
    const bad = await rejection(wallets.credit({ ...cmd('u2', 'top-up', 10), currency: 'cny' }));
    expect(bad).toBeInstanceOf(InvalidArgumentError);
    expect((bad as InvalidArgumentError).details).toEqual([expect.objectContaining({ field: 'currency' })]);

    // Only the void marker was written (by settle); every refusal left the keys as they were.
    expect(voidedKeys).toEqual(before);
    expect(await Promise.all(before.filter((k) => !k.endsWith(':refs')).map((k) => redis.raw.dump(k)))).toEqual(
      snapshot.filter((_, i) => !before[i].endsWith(':refs')),
    );
    expect(await wallets.wallet(account('u2'))).toEqual({ owner: account('u2'), balances: [{ currency: 'CNY', balance: 100 }] });
  });

  it('conserves money under concurrent, repeated calls: top-ups = balances + payments + held (funding)', async () => {
    const { m, wallets } = await setup();
    const users = ['a', 'b', 'c', 'd'];
    const ops: { dir: 'credit' | 'debit'; c: WalletCommand }[] = [];
    let n = 0;
    for (const u of users) {
      for (let i = 0; i < 10; i++) ops.push({ dir: 'credit', c: cmd(u, 'top-up', 50 + ((n * 37) % 200), `t-${n++}`) });
      for (let i = 0; i < 15; i++) ops.push({ dir: 'debit', c: cmd(u, i % 3 === 0 ? 'funding' : 'payment', 40 + ((n * 53) % 300), `d-${n++}`) });
    }
    // Every call made three times at once (a client's retries racing the first): each moves money once.
    const calls = ops.flatMap((op) => [op, op, op]).sort(() => Math.random() - 0.5);
    const outcomes = await Promise.all(
      calls.map(({ dir, c }) =>
        (dir === 'credit' ? wallets.credit(c) : wallets.debit(c)).then(
          (r) => ({ ref: c.reference, kind: c.kind, amount: c.amount, applied: r.applied, refused: false }),
          (err: Error) => {
            expect(err).toBeInstanceOf(InsufficientFundsError);
            return { ref: c.reference, kind: c.kind, amount: c.amount, applied: false, refused: true };
          },
        ),
      ),
    );
    const applied = outcomes.filter((o) => o.applied);
    // Once per reference: never two `applied` for one reference.
    expect(new Set(applied.map((o) => o.ref)).size).toBe(applied.length);
    const total = (kind: string) => applied.filter((o) => o.kind === kind).reduce((s, o) => s + o.amount, 0);
    const balances = await sumOfWalletBalances(redis.raw, m.keys);
    expect(total('top-up')).toBe(Number(balances.get('CNY') ?? 0n) + total('payment') + total('funding'));
    // What the ledgers hold says the same, entry by entry.
    let ledger = 0;
    for (const u of users) {
      const page = await wallets.entries(account(u), undefined, 200);
      ledger += page.items.reduce((s, e) => s + e.amount, 0);
      for (const e of page.items) expect(applied.some((o) => o.ref === e.reference)).toBe(true);
      expect(page.items).toHaveLength(applied.filter((o) => page.items.some((e) => e.reference === o.ref)).length);
    }
    expect(ledger).toBe(Number(balances.get('CNY')));
    // Some debits were refused and some applied: the run did exercise both.
    expect(outcomes.some((o) => o.refused)).toBe(true);
    expect(total('payment') + total('funding')).toBeGreaterThan(0);
  });

  it('a reply lost after the script ran (the script registry fails after Redis applied it): the retry applies nothing twice', async () => {
    const { m, wallets } = await setup();
    await wallets.credit(cmd('u3', 'top-up', 500, 'top-3'));
    const scripts = m.get(ScriptRegistry);
    const run = scripts.run.bind(scripts);
    let lose = 1;
    const spy = jest.spyOn(scripts, 'run').mockImplementation(async (...args: Parameters<ScriptRegistry['run']>) => {
      const reply = await run(...args);
      if (lose-- > 0) throw new CollaboratorDown('wallet script reply', 'after');
      return reply;
    });
    expect(await rejection(wallets.debit(cmd('u3', 'payment', 200, 'pay-3')))).toBeInstanceOf(CollaboratorDown);
    const retried = await wallets.debit(cmd('u3', 'payment', 200, 'pay-3'));
    spy.mockRestore();
    expect(retried).toMatchObject({ applied: false, balance: 300 });
    expect(await wallets.wallet(account('u3'))).toMatchObject({ balances: [{ currency: 'CNY', balance: 300 }] });
    expect((await wallets.entries(account('u3'), undefined, 10)).items).toHaveLength(2);
  });
});
