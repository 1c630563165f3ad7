import { sha256Hex } from '../../platform/core/digest';
import { SYSTEM_ORDER_NO_RE } from '../../platform/core/ids';
import { defineKeySpace, KeyBuilder } from '../../platform/redis/key-builder';
import { SPREAD_TAGS, spreadTagId } from '../../platform/redis/slot-tags';

/**
 * The flash sales' keys:
 * - `{a:<activityId>}`: an activity's configuration, its eligibility list and its results;
 * - `{p:<activityId>:<productId>:<shard>:<4 chars>}`: one product shard's stock, reservations, holds, claims, buyers
 *   and due set; the 4 chars put shard k of n in the k-th of n equal slot ranges (rotated per product), so the shards
 *   of a product spread evenly over the cluster's masters (src/platform/redis/slot-tags.ts). Products loaded before (their record
 *   has no `tags`) keep `{p:<activityId>:<productId>:<shard>[:<salt>]}`, the salt a number that was searched at load to
 *   move the shard to another master;
 * - `{u:<accountId>}`: where each of a buyer's reservations is;
 * - `{i}`: the index of activities by end time, and the safety net's sweep lease.
 */
export const SECKILL_KEYS = defineKeySpace('seckill', { a: 'id', p: 'id', u: 'id', i: 'fixed' });

export const PRODUCT_ID_RE = /^[A-Za-z0-9_-]{1,64}$/;
/** Reservation ids, which also number their orders: the orders module keeps merchants off this shape. */
export const RESERVATION_ID_RE = SYSTEM_ORDER_NO_RE;

/** The parts of a product shard, in the load script's KEYS order. */
export const SHARD_PARTS = ['stock', 'rsv', 'holds', 'claims', 'buyers', 'due'] as const;
export type ShardPart = (typeof SHARD_PARTS)[number];
export type ShardKeys = Record<ShardPart, string>;

/** The activity's parts. */
export const ACTIVITY_PARTS = ['config', 'eligible', 'results'] as const;

/**
 * Where a product's shards are: a product record. `tags` 2 (SPREAD_TAGS): spread over the slot ranges, shard k of
 * `shards`; absent: the first scheme, the shard number and its salt (absent or 0: none).
 */
export interface ShardPlacement {
  shards: number;
  tags?: typeof SPREAD_TAGS;
  salts?: number[];
}

/** One product shard's keys. */
export function shardKeys(builder: KeyBuilder, activityId: string, productId: string, shard: number, placement: ShardPlacement): ShardKeys {
  const t = builder.tagged(SECKILL_KEYS, 'p', shardTagId(activityId, productId, shard, placement));
  return { stock: t.key('stock'), rsv: t.key('rsv'), holds: t.key('holds'), claims: t.key('claims'), buyers: t.key('buyers'), due: t.key('due') };
}

/** The id in a product shard's hash tag. */
export function shardTagId(activityId: string, productId: string, shard: number, placement: ShardPlacement): string {
  const id = `${activityId}:${productId}:${shard}`;
  if (placement.tags === SPREAD_TAGS) return spreadTagId('p', id, `${activityId}:${productId}`, shard, placement.shards);
  const salt = placement.salts?.[shard] ?? 0;
  return salt ? `${id}:${salt}` : id;
}

export function activityKeys(builder: KeyBuilder, activityId: string): Record<(typeof ACTIVITY_PARTS)[number], string> {
  const t = builder.tagged(SECKILL_KEYS, 'a', activityId);
  return { config: t.key('config'), eligible: t.key('eligible'), results: t.key('results') };
}

/** Where each of the buyer's reservations is (a hash: reservation id -> location JSON). */
export function buyerIndexKey(builder: KeyBuilder, accountId: string): string {
  return builder.tagged(SECKILL_KEYS, 'u', accountId).key('reservations');
}

/** Activities by end time (a zset), for the app's list of current and upcoming sales. */
export function activityIndexKey(builder: KeyBuilder): string {
  return builder.tagged(SECKILL_KEYS, 'i').key('activities');
}

/** The safety net's sweep lease (a string with a TTL): the instance that sets it sweeps this round. */
export function sweepLeaseKey(builder: KeyBuilder): string {
  return builder.tagged(SECKILL_KEYS, 'i').key('sweep');
}

/** The restock channel: release-5.lua publishes a product there when its stock comes back. */
export function restockChannel(builder: KeyBuilder): string {
  return `${builder.prefix}:seckill:restock`;
}

/** The activity record's `ids` of activities whose reservation ids include their load's generation. */
export const GEN_IDS = 2 as const;

/**
 * A reservation's id: deterministic from what makes a request the same, so a retried request finds its reservation.
 * `gen` (the activity's load, for activities recorded with `ids: 2`) keeps an activity id used again for a later sale
 * from answering an earlier sale's reservation, and its order (the id numbers the order).
 */
export function reservationIdFor(activityId: string, productId: string, accountId: string, requestId: string, gen?: string): string {
  const sale = gen === undefined ? activityId : `${activityId}\n${gen}`;
  return `sk_${sha256Hex(`${sale}\n${productId}\n${accountId}\n${requestId}`).slice(0, 24)}`;
}

/** The reservation id of a request in this activity (with its generation when the activity says so). */
export const reservationIdIn = (a: { activityId: string; gen: string; ids?: 2 }, productId: string, accountId: string, requestId: string) =>
  reservationIdFor(a.activityId, productId, accountId, requestId, a.ids === GEN_IDS ? a.gen : undefined);
