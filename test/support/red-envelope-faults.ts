import type Redis from 'ioredis';
import { KeyBuilder } from '../../src/platform/redis/key-builder';
import { RedisService } from '../../src/platform/redis/redis.service';
import { WalletService } from '../../src/features/wallet/wallet.service';
import type { RainKit } from './red-envelopes';
import { startServiceProcess } from './service-process';
import { sumOfWalletBalances } from './wallet';

/**
 * Checks for the red-envelope fault suites: every activity's reconciliation balances, every grab's wallet holds
 * its envelope at most once (exactly once when credited), and money is conserved:
 * sum of wallet balances + left, pending and dead-lettered in the pools = top-ups.
 */
export async function expectConserved(kit: RainKit, nodes: Redis | Redis[], activityIds: string[], toppedUp: number, currency = 'CNY') {
  let inPools = 0;
  for (const id of activityIds) {
    const r = await kit.reconciliation(id);
    expect({ id, balanced: r.balanced }).toEqual({ id, balanced: true });
    inPools += r.left.amount + r.pending.amount + r.dead.amount;
  }
  const balances = await sumOfWalletBalances(nodes, kit.t.app.get(KeyBuilder));
  expect(Number(balances.get(currency) ?? 0n) + inPools).toBe(toppedUp);
}

/** Every grab of the activities (from the sub-pools' envelope states): envelope id → account and amount. */
export async function grabsOf(kit: RainKit, activityId: string) {
  const a = await kit.activities.mustRead(activityId);
  const out = new Map<string, { account: string; amount: number; state: string }>();
  for (let k = 0; k < a.subPools; k++) {
    const env = kit.store.pool(a, k).env;
    const all = await kit.t.app.get(RedisService).command((c) => c.hgetall(env));
    for (const [envelopeId, raw] of Object.entries(all)) {
      const [state, account, amount] = raw.split('|');
      out.set(envelopeId, { account, amount: Number(amount), state });
    }
  }
  return out;
}

/**
 * Each grab credited exactly once: the account's ledger holds one entry with the envelope id as its reference,
 * of the envelope's amount; and the accounts' balances add up to what was grabbed.
 */
export async function expectCreditedOnce(kit: RainKit, activityId: string, currency = 'CNY') {
  const wallets = kit.t.app.get(WalletService);
  const grabs = await grabsOf(kit, activityId);
  const byAccount = new Map<string, string[]>();
  for (const [envelopeId, g] of grabs) {
    expect({ envelopeId, state: g.state }).toEqual({ envelopeId, state: 'C' });
    byAccount.set(g.account, [...(byAccount.get(g.account) ?? []), envelopeId]);
  }
  for (const [account, envelopes] of byAccount) {
    const page = await wallets.entries({ kind: 'account', id: account }, undefined, 200);
    for (const envelopeId of envelopes) {
      const entries = page.items.filter((e) => e.reference === envelopeId);
      expect({ envelopeId, amounts: entries.map((e) => e.amount) }).toEqual({ envelopeId, amounts: [grabs.get(envelopeId)!.amount] });
    }
    const balance = (await wallets.wallet({ kind: 'account', id: account })).balances.find((b) => b.currency === currency)?.balance ?? 0;
    expect({ account, balance }).toEqual({ account, balance: envelopes.reduce((s, e) => s + grabs.get(e)!.amount, 0) });
  }
  return grabs;
}

/** The built service (test/support/service-process.ts) as a child process on `redisUrl` with `prefix`. */
export const startService = (redisUrl: string, prefix: string, env: Record<string, string> = {}) => startServiceProcess(redisUrl, prefix, { env });
