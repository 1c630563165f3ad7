import type Redis from 'ioredis';
import { InvalidArgumentError } from '../../src/platform/core/domain.error';
import { ChannelGateway } from '../../src/features/orders/channels/channel-gateway';
import { KeyBuilder } from '../../src/platform/redis/key-builder';
import { walletKeys, type WalletOwner } from '../../src/features/wallet/wallet.keys';
import { BalanceLimitError, InsufficientFundsError, ReferenceReusedError, ReferenceVoidedError } from '../../src/features/wallet/wallet.errors';
import { WalletService } from '../../src/features/wallet/wallet.service';
import type { WalletCommand } from '../../src/features/wallet/wallet.types';
import { rawConnection } from '../harness/redis-process';
import { RedisServerHandle, startRedisServer } from '../harness/redis-server';
import { startTestApp, TestApp } from '../support/test-app';
import { sumOfWalletBalances, walletKeysIn } from '../support/wallet';

/**
 * The wallet's scripts and service against a real redis-server: credits and debits idempotent on the
 * (kind, reference) (also when the same reference races itself; fields of an earlier version still counted), a reference reused with other terms refused,
 * a debit never below zero (also under 100 concurrent debits), nothing stored by a refused call, owners
 * of the two kinds kept apart, the ledger paged newest first, and the conservation sum.
 */
describe('wallet', () => {
  let redis: RedisServerHandle;
  let raw: Redis;
  let t: TestApp;
  let wallets: WalletService;
  let keys: KeyBuilder;
  let n = 0;
  const account = (): WalletOwner => ({ kind: 'account', id: `acc_w${process.pid}_${++n}` });
  const cmd = (owner: WalletOwner, amount: number, reference: string, extra: Partial<WalletCommand> = {}): WalletCommand => ({
    owner,
    currency: 'CNY',
    amount,
    reference,
    kind: 'top-up',
    ...extra,
  });
  /** Everything stored for one wallet, to compare before and after a refused call. */
  const stored = async (owner: WalletOwner) => {
    const k = walletKeys(keys, owner);
    return { balances: await raw.hgetall(k.balances), ledger: await raw.lrange(k.ledger, 0, -1), refs: await raw.hgetall(k.refs) };
  };
  const balanceOf = async (owner: WalletOwner, currency = 'CNY') => (await wallets.wallet(owner)).balances.find((b) => b.currency === currency)?.balance ?? 0;

  beforeAll(async () => {
    redis = await startRedisServer();
    raw = rawConnection(redis);
    t = await startTestApp(redis.url, { BALANCE_CHANNEL: 'wallet' });
    wallets = t.app.get(WalletService);
    keys = t.app.get(KeyBuilder);
  });

  afterAll(async () => {
    await t?.close();
    raw?.disconnect();
    await redis?.destroy();
  });

  it('a credit applies once per reference: the same reference again answers the same entry and moves nothing', async () => {
    const o = account();
    const first = await wallets.credit(cmd(o, 5000, 'top-1', { memo: 'welcome' }));
    expect(first).toMatchObject({ applied: true, entryId: '1', balance: 5000 });
    expect(await wallets.credit(cmd(o, 5000, 'top-1', { memo: 'welcome' }))).toMatchObject({ applied: false, entryId: '1', balance: 5000 });
    expect(await wallets.credit(cmd(o, 700, 'top-2'))).toMatchObject({ applied: true, entryId: '2', balance: 5700 });
    expect(await wallets.credit(cmd(o, 5000, 'top-1'))).toMatchObject({ applied: false, entryId: '1', balance: 5700 });
    const page = await wallets.entries(o, undefined, 10);
    expect(page.next).toBeUndefined();
    expect(page.items.map((e) => [e.entryId, e.kind, e.currency, e.amount, e.balanceAfter, e.reference, e.memo])).toEqual([
      ['2', 'top-up', 'CNY', 700, 5700, 'top-2', ''],
      ['1', 'top-up', 'CNY', 5000, 5000, 'top-1', 'welcome'],
    ]);
    expect(Math.abs(page.items[0].at - Date.now())).toBeLessThan(5000);
  });

  it("a new credit reads its reference once (one HMGET for the kind's field and the legacy one): 7 commands in its script", async () => {
    const calls = async () => {
      const info = await raw.info('commandstats');
      const of = (name: string) => Number(new RegExp(`cmdstat_${name}:calls=(\\d+)`).exec(info)?.[1] ?? 0);
      return { hget: of('hget'), hmget: of('hmget'), evalsha: of('evalsha') + of('eval') };
    };
    const owners = Array.from({ length: 20 }, () => account());
    const before = await calls();
    for (const [i, o] of owners.entries()) await wallets.credit(cmd(o, 100 + i, `count-${i}`, { kind: 'red-envelope' }));
    const after = await calls();
    // One HGET (the balance) and one HMGET (both reference fields) per credit; a little room for the app's own jobs.
    expect(after.hmget - before.hmget).toBeGreaterThanOrEqual(20);
    expect(after.hget - before.hget).toBeLessThanOrEqual(20 + 5);
    for (const [i, o] of owners.entries()) expect(await balanceOf(o)).toBe(100 + i);
  });

  it('the same reference racing itself (credit and debit, 50 at once) moves money once', async () => {
    const o = account();
    const credits = await Promise.all(Array.from({ length: 50 }, () => wallets.credit(cmd(o, 1000, 'race-credit'))));
    expect(credits.filter((r) => r.applied)).toHaveLength(1);
    expect(new Set(credits.map((r) => r.entryId))).toEqual(new Set(['1']));
    const debits = await Promise.all(Array.from({ length: 50 }, () => wallets.debit(cmd(o, 300, 'race-debit', { kind: 'payment' }))));
    expect(debits.filter((r) => r.applied)).toHaveLength(1);
    expect(new Set(debits.map((r) => r.entryId))).toEqual(new Set(['2']));
    expect(await balanceOf(o)).toBe(700);
    expect(await raw.llen(walletKeys(keys, o).ledger)).toBe(2);
  });

  it('a reference reused under its kind with another amount, currency or direction is refused (REFERENCE_REUSED) and stores nothing', async () => {
    const o = account();
    await wallets.credit(cmd(o, 1000, 'ref-1'));
    const before = await stored(o);
    const attempts = [
      () => wallets.credit(cmd(o, 1001, 'ref-1')),
      () => wallets.credit(cmd(o, 1000, 'ref-1', { currency: 'USD' })),
      () => wallets.debit(cmd(o, 1000, 'ref-1')),
    ];
    for (const attempt of attempts) {
      const err = await attempt().catch((e: unknown) => e);
      expect(err).toBeInstanceOf(ReferenceReusedError);
    }
    expect(await stored(o)).toEqual(before);
  });

  it('a debit past the balance is refused (INSUFFICIENT_FUNDS) and stores nothing; the same reference works once funded', async () => {
    const o = account();
    await wallets.credit(cmd(o, 999, 'fund'));
    const before = await stored(o);
    const err = await wallets.debit(cmd(o, 1000, 'spend', { kind: 'payment' })).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(InsufficientFundsError);
    expect((err as InsufficientFundsError).details).toEqual({ currency: 'CNY', balance: 999, amount: 1000 });
    expect(await stored(o)).toEqual(before);
    // Another currency holds nothing either.
    await expect(wallets.debit(cmd(o, 1, 'usd', { currency: 'USD', kind: 'payment' }))).rejects.toBeInstanceOf(InsufficientFundsError);
    expect(await wallets.debit(cmd(o, 999, 'spend', { kind: 'payment' }))).toMatchObject({ applied: true, entryId: '2', balance: 0 });
  });

  it('100 concurrent debits never take a balance below zero: exactly floor(balance / amount) succeed', async () => {
    const o = account();
    await wallets.credit(cmd(o, 1000, 'fund'));
    const results = await Promise.allSettled(Array.from({ length: 100 }, (_, i) => wallets.debit(cmd(o, 30, `d-${i}`, { kind: 'payment' }))));
    const ok = results.filter((r) => r.status === 'fulfilled');
    const refused = results.filter((r): r is PromiseRejectedResult => r.status === 'rejected');
    expect(ok).toHaveLength(Math.floor(1000 / 30));
    expect(refused.every((r) => r.reason instanceof InsufficientFundsError)).toBe(true);
    expect(await balanceOf(o)).toBe(1000 - 33 * 30);
    const ledger = (await raw.lrange(walletKeys(keys, o).ledger, 0, -1)).map((e) => JSON.parse(e) as { balanceAfter: number });
    expect(ledger).toHaveLength(34);
    expect(ledger.every((e) => e.balanceAfter >= 0)).toBe(true);
  });

  it('an account and a merchant of the same id hold two wallets on two tags', async () => {
    const id = `same_${process.pid}`;
    await wallets.credit(cmd({ kind: 'account', id }, 100, 'x'));
    await wallets.credit(cmd({ kind: 'merchant', id }, 200, 'x'));
    expect(await balanceOf({ kind: 'account', id })).toBe(100);
    expect(await balanceOf({ kind: 'merchant', id })).toBe(200);
    expect(walletKeys(keys, { kind: 'account', id }).balances).toContain(`{a:${id}}`);
    expect(walletKeys(keys, { kind: 'merchant', id }).balances).toContain(`{m:${id}}`);
  });

  it('the ledger pages newest first by cursor, and a cursor stays valid while entries are added', async () => {
    const o = account();
    for (let i = 1; i <= 7; i++) await wallets.credit(cmd(o, i, `p-${i}`));
    const first = await wallets.entries(o, undefined, 3);
    expect(first.items.map((e) => e.entryId)).toEqual(['7', '6', '5']);
    expect(first.next).toBe('5');
    await wallets.credit(cmd(o, 100, 'p-new'));
    const second = await wallets.entries(o, first.next, 3);
    expect(second.items.map((e) => e.entryId)).toEqual(['4', '3', '2']);
    const third = await wallets.entries(o, second.next, 3);
    expect(third).toEqual({ items: [expect.objectContaining({ entryId: '1', amount: 1, balanceAfter: 1 })] });
    expect((await wallets.entries(o, undefined, 1)).items[0]).toMatchObject({ entryId: '8', balanceAfter: 128 });
    expect(await wallets.entries(account(), undefined, 5)).toEqual({ items: [] });
  });

  it.each<[string, Partial<WalletCommand>]>([
    ['owner', { owner: { kind: 'account', id: '..' } }],
    ['owner', { owner: { kind: 'bank', id: 'x' } as unknown as WalletOwner }],
    ['currency', { currency: 'cny' }],
    ['amount', { amount: 0 }],
    ['amount', { amount: 1.5 }],
    ['amount', { amount: 10_000_000_001 }],
    ['reference', { reference: '' }],
    ['reference', { reference: 'a b' }],
    ['reference', { reference: 'r'.repeat(129) }],
    ['kind', { kind: 'gift' as WalletCommand['kind'] }],
    ['memo', { memo: 'm'.repeat(257) }],
  ])('refuses a bad %s (case %#) naming it, and stores nothing', async (field, bad) => {
    const before = await walletKeysIn(raw, keys);
    for (const op of ['credit', 'debit'] as const) {
      const err = await wallets[op]({ ...cmd(account(), 10, 'bad'), ...bad }).catch((e: unknown) => e);
      expect(err).toBeInstanceOf(InvalidArgumentError);
      expect((err as InvalidArgumentError).details).toEqual([expect.objectContaining({ field })]);
    }
    expect(await walletKeysIn(raw, keys)).toEqual(before);
  });

  it('settle: an applied reference answers its entry; one never applied is voided, and no credit or debit applies it later', async () => {
    const o = account();
    await wallets.credit(cmd(o, 500, 'paid-in'));
    expect(await wallets.settle(o, 'top-up', 'paid-in')).toMatchObject({ entryId: '1', amount: 500, reference: 'paid-in' });
    expect(await wallets.settle(o, 'payment', 'late')).toBeNull();
    const before = await stored(o);
    for (const op of ['credit', 'debit'] as const) {
      await expect(wallets[op](cmd(o, 100, 'late', { kind: 'payment' }))).rejects.toBeInstanceOf(ReferenceVoidedError);
    }
    expect(await wallets.settle(o, 'payment', 'late')).toBeNull();
    expect(await wallets.entryOf(o, 'payment', 'late')).toBeNull();
    expect(await stored(o)).toEqual(before);
  });

  it('the balance channel: a query that finds no debit settles the leg as failed, so a late pay of it is refused and takes nothing', async () => {
    const gateway = t.app.get(ChannelGateway);
    const o = account();
    await wallets.credit(cmd(o, 1000, 'fund'));
    const payer = { accountId: o.id, currency: 'CNY' };
    expect(await gateway.query('balance', 'ord_x_p1:0', payer)).toBe('failure');
    expect(await gateway.pay('balance', 'ord_x_p1:0', 400, payer)).toBe('failure');
    expect(await gateway.pay('balance', 'ord_x_p2:0', 400, payer)).toBe('success');
    expect(await gateway.pay('balance', 'ord_x_p2:0', 400, payer)).toBe('success');
    expect(await gateway.query('balance', 'ord_x_p2:0', payer)).toBe('success');
    expect(await gateway.pay('balance', 'ord_x_p3:0', 601, payer)).toBe('failure');
    expect(await balanceOf(o)).toBe(600);
  });

  it('a credit past 2^53 − 1 minor units is refused (BALANCE_LIMIT): balances stay exact integers', async () => {
    const o = account();
    await wallets.credit(cmd(o, 1, 'first'));
    await raw.hset(walletKeys(keys, o).balances, 'CNY', String(Number.MAX_SAFE_INTEGER - 10));
    const before = await stored(o);
    await expect(wallets.credit(cmd(o, 11, 'over'))).rejects.toBeInstanceOf(BalanceLimitError);
    expect(await stored(o)).toEqual(before);
    expect(await wallets.credit(cmd(o, 10, 'to-the-limit'))).toMatchObject({ applied: true, entryId: '2', balance: Number.MAX_SAFE_INTEGER });
    expect((await wallets.entries(o, undefined, 1)).items[0].balanceAfter).toBe(Number.MAX_SAFE_INTEGER);
  });

  it('a reference is per kind: a top-up under a reference never stands for a red-envelope credit, a funding, a refund or a payment', async () => {
    const o = account();
    await wallets.credit(cmd(o, 500, 'refa.0'));
    // The same reference and amount under another kind is another entry: the money moves.
    expect(await wallets.credit(cmd(o, 500, 'refa.0', { kind: 'red-envelope' }))).toMatchObject({ applied: true, entryId: '2', balance: 1000 });
    expect(await wallets.credit(cmd(o, 500, 'refa.0', { kind: 'red-envelope' }))).toMatchObject({ applied: false, entryId: '2', balance: 1000 });
    expect(await wallets.credit(cmd(o, 300, 'red-envelope:x:leftover', { kind: 'top-up' }))).toMatchObject({ applied: true });
    expect(await wallets.credit(cmd(o, 300, 'red-envelope:x:leftover', { kind: 'refund' }))).toMatchObject({ applied: true, balance: 1600 });
    expect(await wallets.credit(cmd(o, 7, 'red-envelope:x', { kind: 'top-up' }))).toMatchObject({ applied: true });
    expect(await wallets.debit(cmd(o, 100, 'red-envelope:x', { kind: 'funding' }))).toMatchObject({ applied: true, balance: 1507 });
    expect(await wallets.entryOf(o, 'red-envelope', 'refa.0')).toMatchObject({ entryId: '2', kind: 'red-envelope', amount: 500 });
    expect(await wallets.entryOf(o, 'top-up', 'refa.0')).toMatchObject({ entryId: '1', kind: 'top-up' });
    expect(await wallets.entryOf(o, 'refund', 'refa.0')).toBeNull();
    // A payment's settle (void) never meets a top-up of the same reference, and the void is the payment's only.
    await wallets.credit(cmd(o, 50, 'ord_1:0'));
    expect(await wallets.settle(o, 'payment', 'ord_1:0')).toBeNull();
    expect(await wallets.credit(cmd(o, 50, 'ord_1:0'))).toMatchObject({ applied: false });
    await expect(wallets.debit(cmd(o, 50, 'ord_1:0', { kind: 'payment' }))).rejects.toBeInstanceOf(ReferenceVoidedError);
    expect(Object.keys((await stored(o)).refs).every((f) => f.includes('|'))).toBe(true);
  });

  it('a bare-reference field written by an earlier version keeps a retry of the same kind idempotent, and only of that kind', async () => {
    const o = account();
    const k = walletKeys(keys, o);
    // As the earlier version wrote them: the ledger entries and the references hash keyed by the bare reference.
    const entry = (n: number, kind: string, amount: number, after: number, reference: string) =>
      JSON.stringify({ entryId: String(n), kind, currency: 'CNY', amount, balanceAfter: after, reference, memo: '', at: Date.now() });
    await raw.rpush(
      k.ledger,
      entry(1, 'top-up', 1000, 1000, 'old-top'),
      entry(2, 'red-envelope', 200, 1200, 'rain.3'),
      entry(3, 'payment', -100, 1100, 'ord_p:0'),
    );
    await raw.hset(k.refs, 'old-top', '1', 'rain.3', '2', 'ord_p:0', '3', 'ord_v:0', '0');
    await raw.hset(k.balances, 'CNY', '1100');
    // Retries of the same kind answer the entry they made, and move nothing.
    expect(await wallets.credit(cmd(o, 1000, 'old-top'))).toMatchObject({ applied: false, entryId: '1', balance: 1100 });
    expect(await wallets.credit(cmd(o, 200, 'rain.3', { kind: 'red-envelope' }))).toMatchObject({ applied: false, entryId: '2', balance: 1100 });
    expect(await wallets.debit(cmd(o, 100, 'ord_p:0', { kind: 'payment' }))).toMatchObject({ applied: false, entryId: '3', balance: 1100 });
    await expect(wallets.credit(cmd(o, 201, 'rain.3', { kind: 'red-envelope' }))).rejects.toBeInstanceOf(ReferenceReusedError);
    expect(await wallets.entryOf(o, 'payment', 'ord_p:0')).toMatchObject({ entryId: '3' });
    expect(await wallets.settle(o, 'payment', 'ord_p:0')).toMatchObject({ entryId: '3' });
    // A legacy void counts for payments only.
    await expect(wallets.debit(cmd(o, 100, 'ord_v:0', { kind: 'payment' }))).rejects.toBeInstanceOf(ReferenceVoidedError);
    expect(await wallets.settle(o, 'payment', 'ord_v:0')).toBeNull();
    expect(await wallets.credit(cmd(o, 100, 'ord_v:0'))).toMatchObject({ applied: true, entryId: '4', balance: 1200 });
    // Another kind under a legacy reference is another entry.
    expect(await wallets.credit(cmd(o, 200, 'rain.3'))).toMatchObject({ applied: true, entryId: '5', balance: 1400 });
    expect(await wallets.entryOf(o, 'top-up', 'rain.3')).toMatchObject({ entryId: '5', kind: 'top-up' });
    expect(await wallets.entryOf(o, 'red-envelope', 'old-top')).toBeNull();
    expect(await raw.llen(k.ledger)).toBe(5);
  });

  it('the conservation sum adds every wallet of both kinds, by currency', async () => {
    const before = await sumOfWalletBalances(raw, keys);
    const a = account();
    await wallets.credit(cmd(a, 10_000_000_000, 'big'));
    await wallets.credit(cmd({ kind: 'merchant', id: `m_${process.pid}` }, 5, 'm', { currency: 'USD' }));
    await wallets.debit(cmd(a, 1, 'spent', { kind: 'payment' }));
    const after = await sumOfWalletBalances(raw, keys);
    expect((after.get('CNY') ?? 0n) - (before.get('CNY') ?? 0n)).toBe(10_000_000_000n - 1n);
    expect((after.get('USD') ?? 0n) - (before.get('USD') ?? 0n)).toBe(5n);
  });
});
