import type Redis from 'ioredis';
import request from 'supertest';
import { KeyBuilder } from '../../src/platform/redis/key-builder';
import { RedisService } from '../../src/platform/redis/redis.service';
import { ScriptArg, ScriptRegistry } from '../../src/platform/scripts/script-registry.service';
import { walletKeys, type WalletOwner } from '../../src/features/wallet/wallet.keys';
import { InsufficientFundsError } from '../../src/features/wallet/wallet.errors';
import { WalletService } from '../../src/features/wallet/wallet.service';
import { RedisClusterHandle, startRedisCluster } from '../harness/redis-cluster';
import { rawConnection } from '../harness/redis-process';
import { CREDS, startTestApp, TestApp, userToken } from '../support/test-app';
import { sumOfWalletBalances } from '../support/wallet';

/**
 * Wallets on a 3-master Redis Cluster: each wallet's keys share its owner's tag (one slot), wallets spread
 * over the masters, the three scripts run there, and the conservation sum finds every wallet on every master.
 */
describe('wallets on a 3-master cluster', () => {
  let cluster: RedisClusterHandle;
  let raw: Redis[];
  let t: TestApp;
  let wallets: WalletService;
  let keys: KeyBuilder;
  const ran = new Set<string>();

  beforeAll(async () => {
    cluster = await startRedisCluster({ masters: 3 });
    raw = cluster.nodes.map((n) => rawConnection(n));
    t = await startTestApp('', {
      REDIS_CLUSTER_NODES: cluster.envValue,
      REDIS_COMMAND_TIMEOUT_MS: '1000',
      RATE_LIMIT_ENABLED: 'false',
      BALANCE_CHANNEL: 'wallet',
    });
    wallets = t.app.get(WalletService);
    keys = t.app.get(KeyBuilder);
    const scripts = t.app.get(ScriptRegistry);
    const original = scripts.run.bind(scripts);
    jest.spyOn(scripts, 'run').mockImplementation(((script: string, k: readonly string[], args: readonly ScriptArg[] = []) => {
      if (script.startsWith('wallet/')) ran.add(script);
      return original(script, k, args);
    }) as ScriptRegistry['run']);
  });

  afterAll(async () => {
    jest.restoreAllMocks();
    await t?.close();
    raw?.forEach((r) => r.disconnect());
    await cluster?.destroy();
  });

  /** The index of the master that holds `key` (-1 when none does). */
  const holderOf = async (key: string) => {
    const slot = Number(await raw[0].cluster('KEYSLOT', key));
    const range = (await raw[0].cluster('SLOTS')).find(([start, end]) => slot >= start && slot <= end)!;
    const i = cluster.nodes.findIndex((n) => n.port === range[2][1]);
    return (await raw[i].exists(key)) === 1 ? i : -1;
  };

  it('credit, debit and void run on the cluster: idempotent, never below zero, wallets on every master, and the sum finds them all', async () => {
    expect(t.app.get(RedisService).isCluster).toBe(true);
    const owners: WalletOwner[] = Array.from({ length: 24 }, (_, i) => ({ kind: i % 2 ? 'merchant' : 'account', id: `owner_${i}` }));
    for (const owner of owners) {
      const first = await wallets.credit({ owner, currency: 'CNY', amount: 1000, reference: 'top', kind: 'top-up' });
      const again = await wallets.credit({ owner, currency: 'CNY', amount: 1000, reference: 'top', kind: 'top-up' });
      expect([first.applied, again.applied, again.balance]).toEqual([true, false, 1000]);
      const debits = await Promise.allSettled(
        Array.from({ length: 10 }, (_, i) => wallets.debit({ owner, currency: 'CNY', amount: 300, reference: `d-${i}`, kind: 'payment' })),
      );
      expect(debits.filter((d) => d.status === 'fulfilled')).toHaveLength(3);
      expect(debits.every((d) => d.status === 'fulfilled' || d.reason instanceof InsufficientFundsError)).toBe(true);
    }
    for (const owner of owners.slice(0, 6)) {
      expect(await wallets.settle(owner, 'top-up', 'top')).toMatchObject({ amount: 1000 });
      expect(await wallets.settle(owner, 'payment', 'never')).toBeNull();
    }
    expect(ran).toEqual(new Set(['wallet/credit', 'wallet/debit', 'wallet/void']));
    const holders = new Set<number>();
    for (const owner of owners) {
      const k = walletKeys(keys, owner);
      const holder = await holderOf(k.balances);
      expect(holder).toBeGreaterThanOrEqual(0);
      expect([await holderOf(k.ledger), await holderOf(k.refs)]).toEqual([holder, holder]);
      holders.add(holder);
    }
    expect(holders.size).toBe(3);
    expect((await sumOfWalletBalances(raw, keys)).get('CNY')).toBe(BigInt(24 * 100));
  });

  it('GET /wallet and the admin endpoints work on the cluster', async () => {
    const top = await request(t.server)
      .post('/admin/wallets/account:owner_0/top-ups')
      .set({ 'x-admin-key': CREDS.adminKey })
      .send({ amount: 50, currency: 'USD', reference: 'usd' });
    expect(top.status).toBe(201);
    const mine = await request(t.server)
      .get('/wallet?limit=2')
      .set({ authorization: `Bearer ${userToken('owner_0')}` });
    expect([mine.status, mine.body.balances, mine.body.entries.length, mine.body.next]).toEqual([
      200,
      [
        { currency: 'CNY', balance: 100 },
        { currency: 'USD', balance: 50 },
      ],
      2,
      '4',
    ]);
  });
});
