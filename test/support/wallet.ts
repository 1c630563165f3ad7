import type Redis from 'ioredis';
import type { KeyBuilder } from '../../src/platform/redis/key-builder';
import { WALLET_KEYS } from '../../src/features/wallet/wallet.keys';

/**
 * The money every wallet holds, by currency: SCANs each node (every master of a cluster) for the wallets'
 * balances hashes under the key builder's prefix and adds them up (as bigints: a sum over wallets may pass 2^53). For the conservation check
 * `sum of balances + money in open pools = top-ups − spent + reversals`.
 */
export async function sumOfWalletBalances(nodes: Redis | Redis[], keys: KeyBuilder): Promise<Map<string, bigint>> {
  const pattern = `${keys.prefix}:${WALLET_KEYS.feature}:*:balances`;
  const totals = new Map<string, bigint>();
  for (const node of Array.isArray(nodes) ? nodes : [nodes]) {
    let cursor = '0';
    do {
      const [next, found] = await node.scan(cursor, 'MATCH', pattern, 'COUNT', 1000);
      cursor = next;
      for (const key of found) {
        if (keys.parse(key)?.feature !== WALLET_KEYS.feature) continue;
        for (const [currency, v] of Object.entries(await node.hgetall(key))) totals.set(currency, (totals.get(currency) ?? 0n) + BigInt(v));
      }
    } while (cursor !== '0');
  }
  return totals;
}

/** Every wallet key under the key builder's prefix (to check that a refused call stored nothing). */
export async function walletKeysIn(node: Redis, keys: KeyBuilder): Promise<string[]> {
  return (await node.keys(`${keys.prefix}:${WALLET_KEYS.feature}:*`)).sort();
}
