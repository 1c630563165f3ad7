import { md5Bytes } from '../../platform/core/digest';

/**
 * The buyer's home shard of a pool (a flash-sale product's stock shards, a rain's sub-pools): a hash of the account
 * and the pool's id, so one buyer's requests meet on one shard, where their per-user limit is kept. The numbers are
 * part of the stored data (a buyer's claims and records live on their home shard): never change the hash.
 */
export function homeOf(accountId: string, poolId: string, shards: number): number {
  if (shards <= 1) return 0;
  return md5Bytes(`${accountId}\n${poolId}`).readUInt32BE(0) % shards;
}

/** The shards other than `home`, in the order a fall-over visits them: home + 1, home + 2, … wrapping around. */
export function othersOf(home: number, shards: number): number[] {
  return Array.from({ length: Math.max(0, shards - 1) }, (_, i) => (home + 1 + i) % shards);
}
