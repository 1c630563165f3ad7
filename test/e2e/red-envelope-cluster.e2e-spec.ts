import type Redis from 'ioredis';
import { useAppOnCluster } from '../support/cluster-suite';
import { homeOf } from '../../src/engines/sharded-pool/home';
import { RedisService } from '../../src/platform/redis/redis.service';
import { POOL_PARTS } from '../../src/features/red-envelope/red-envelope.keys';
import { WalletService } from '../../src/features/wallet/wallet.service';
import type { WalletCommand } from '../../src/features/wallet/wallet.types';
import { waitUntil } from '../harness/redis-process';
import { expectConserved, expectCreditedOnce } from '../support/red-envelope-faults';
import { rainBody, rainId, rainKit, type RainKit } from '../support/red-envelopes';
import { CREDS, type TestApp } from '../support/test-app';

/**
 * Sub-pools on a 3-master Redis Cluster: each sub-pool's keys in one slot, the three sub-pools of an activity on
 * three different masters (any activity id: their tags are in three slot ranges), fall-over from an
 * empty home sub-pool to another master's, one envelope per user across sub-pools under concurrent taps, and every
 * red-envelope script run on the cluster; balanced, and money conserved.
 */
describe('red-envelope sub-pools on a 3-master cluster', () => {
  const suite = useAppOnCluster('red-envelope/', {
    BALANCE_CHANNEL: 'wallet',
    RED_ENVELOPE_CREDIT_RETRY_MS: '200',
    RED_ENVELOPE_CREDIT_MAX_DELIVERIES: '2',
  });
  let raw: Redis[];
  let t: TestApp;
  let kit: RainKit;
  const ids: string[] = [];
  let toppedUp = 0;
  const { ran, masterOf } = suite;

  beforeAll(() => {
    ({ raw, t } = suite);
    kit = rainKit(t);
  });

  async function fund(amount: number) {
    await kit.fund(CREDS.merchantId, amount);
    toppedUp += amount;
  }

  /** Accounts whose home sub-pool is `pool`. */
  function homedIn(id: string, pool: number, n: number, tag: string) {
    const out: string[] = [];
    for (let i = 0; out.length < n; i++) if (homeOf(`acc_${tag}${i}`, id, 3) === pool) out.push(`acc_${tag}${i}`);
    return out;
  }

  it('subPools 3: each sub-pool’s keys in one slot on the master it names; fall-over from an empty home sub-pool to another master', async () => {
    expect(t.app.get(RedisService).isCluster).toBe(true);
    await fund(3000);
    const id = rainId('c');
    ids.push(id);
    await kit.create(rainBody(id, { totalAmount: 3000, count: 30, subPools: 3 }));
    const a = await kit.activities.mustRead(id);
    const masters = await Promise.all([0, 1, 2].map((k) => masterOf(kit.store.pool(a, k).pool)));
    expect(new Set(masters).size).toBe(3);
    for (const k of [0, 1, 2]) {
      const keys = kit.store.pool(a, k);
      const slots = new Set(await Promise.all(POOL_PARTS.map((p) => raw[0].cluster('KEYSLOT', keys[p]))));
      expect({ k, slots: slots.size }).toEqual({ k, slots: 1 });
      // The pool and its stats are stored on that master.
      expect({ k, stored: await raw[masters[k]].exists(keys.pool, keys.stats) }).toEqual({ k, stored: 2 });
      expect(await raw[masters[k]].llen(keys.pool)).toBe(10);
    }

    // Sub-pool 0 is emptied by the users whose home it is.
    const home0 = homedIn(id, 0, 11, 'h');
    const first = await Promise.all(home0.slice(0, 10).map((u) => kit.grab(u, id)));
    expect(first.every((r) => r.body.status === 'GRABBED')).toBe(true);
    expect(await raw[masters[0]].llen(kit.store.pool(a, 0).pool)).toBe(0);
    // The eleventh falls over to the next sub-pool (another master), and it is recorded on the home one.
    const u = home0[10];
    const over = await kit.grab(u, id);
    expect(over.body.status).toBe('GRABBED');
    const [entry] = await kit.store.grabsOf(kit.store.pool(a, 0), u);
    expect(entry).toBe(`${over.body.envelopeId}:${over.body.amount}:1:1`);
    expect(await kit.store.grabsOf(kit.store.pool(a, 1), u)).toEqual([entry]);
    expect(await raw[masters[1]].llen(kit.store.pool(a, 1).pool)).toBe(9);
    expect(await raw[masters[0]].hexists(kit.store.pool(a, 0).claims, u)).toBe(0);
    // Tapping again answers the same envelope.
    expect((await kit.grab(u, id)).body).toMatchObject({ status: 'ALREADY_GRABBED', envelopeId: over.body.envelopeId });
    const mine = await kit.user(u).get(`/red-envelopes/activities/${id}/mine`);
    expect(mine.body.items).toHaveLength(1);
    await kit.credited(id);
    await expectCreditedOnce(kit, id);
    await expectConserved(kit, raw, ids, toppedUp);
  }, 40_000);

  it('one envelope per user across sub-pools under concurrent taps; every script ran on the cluster; balanced', async () => {
    await fund(6000);
    const id = rainId('u');
    ids.push(id);
    await kit.create(rainBody(id, { totalAmount: 6000, count: 60, subPools: 3 }));
    const a = await kit.activities.mustRead(id);
    const wallets = t.app.get(WalletService);
    const credit = wallets.credit.bind(wallets);
    let blocked = true;
    jest.spyOn(wallets, 'credit').mockImplementation(async (cmd: WalletCommand) => {
      if (blocked && cmd.kind === 'red-envelope' && cmd.owner.id === 'acc_u0') throw new Error('wallet unavailable');
      return credit(cmd);
    });
    // acc_u0 grabs first (its wallet refuses: its grab is dead-lettered); then 150 users tap three times at once.
    expect((await kit.grab('acc_u0', id)).body.status).toBe('GRABBED');
    const users = Array.from({ length: 150 }, (_, i) => `acc_u${i}`);
    const answers = await Promise.all(users.flatMap((u) => [kit.grab(u, id), kit.grab(u, id), kit.grab(u, id)]));
    expect(answers.every((r) => r.status === 200)).toBe(true);
    const byUser = new Map<string, Set<string>>();
    answers.forEach((r, i) => {
      if (r.body.envelopeId) byUser.set(users[Math.floor(i / 3)], (byUser.get(users[Math.floor(i / 3)]) ?? new Set()).add(r.body.envelopeId as string));
    });
    expect([...byUser.values()].every((s) => s.size === 1)).toBe(true);
    expect(new Set([...byUser.values()].map((s) => [...s][0])).size).toBe(60);
    expect(answers.filter((r) => r.body.status === 'GRABBED')).toHaveLength(59);
    // Every user's envelope is recorded on their home sub-pool, wherever it came from.
    for (const [u, s] of byUser) {
      const held = await kit.store.grabsOf(kit.store.pool(a, homeOf(u, id, 3)), u);
      expect({ u, held: held.map((e) => e.split(':')[0]) }).toEqual({ u, held: [...s] });
    }

    await waitUntil('the grab to be dead-lettered', async () => (await kit.reconciliation(id)).dead.count === 1, 10_000, 50);
    expect(await kit.reconciliation(id)).toMatchObject({ dead: { count: 1 }, balanced: true });
    blocked = false;
    expect((await kit.admin().post(`/admin/red-envelopes/activities/${id}/dead-letters/redrive`)).body).toEqual({ redriven: 1 });
    await kit.credited(id);
    await expectCreditedOnce(kit, id);
    // The end drains every sub-pool (none left here) and settles.
    await kit.activities.end(id);
    expect((await kit.admin().get(`/admin/red-envelopes/activities/${id}`)).body.state).toBe('SETTLED');
    expect(await kit.reconciliation(id)).toMatchObject({ grabbed: { count: 60, amount: 6000 }, credited: { count: 60 }, left: { count: 0 }, balanced: true });
    await expectConserved(kit, raw, ids, toppedUp);
    expect([...ran].sort()).toEqual(['arm', 'confirm', 'drain', 'grab', 'redrive', 'settle', 'take'].map((s) => `red-envelope/${s}`));
  }, 50_000);
});
