import { randomFillSync } from 'node:crypto';
import { sha256Hex } from '../../platform/core/digest';
import { PLAN_ID_RE } from '../../platform/core/ids';
import { defineKeySpace, KeyBuilder } from '../../platform/redis/key-builder';

/**
 * The orders' keys: one shard's orders, plans, number index and event streams (`{s:<shard>}`); the simulated
 * channels' ledger, one tag per reference (`{c:<ref>}`).
 */
export const ORDER_KEYS = defineKeySpace('orders', { s: 'id', c: 'id' });
/**
 * Orders are spread over this many hash-tag shards (`{s:0}` … `{s:15}`). An order, its plans and the
 * shard's events stream share one slot, so a state change and its event are one script on Redis
 * Cluster. Fixed for the life of a deployment: an order's shard is derived from its id.
 */
export const ORDER_SHARDS = 16;

/**
 * The name of (merchant, merchantOrderNo) in the order index: a hash anyone can compute, so it is never an order
 * id. Orders stored before ids were random have exactly this as their id (their number index has no entry); an
 * order's id shares its shard (the first 8 hex digits), so the index and the order are in one slot.
 */
export function orderNumberKeyOf(merchantId: string, merchantOrderNo: string): string {
  return `ord_${sha256Hex(`${merchantId}\n${merchantOrderNo}`).slice(0, 24)}`;
}

/**
 * A new order id for (merchant, merchantOrderNo): the shard part of its number key, then 64 random bits, so no
 * caller can derive it, and each life of a merchantOrderNo (re-created after its retention) gets its own id.
 */
export function newOrderId(merchantId: string, merchantOrderNo: string): string {
  return orderIdFor(orderNumberKeyOf(merchantId, merchantOrderNo));
}

/** As newOrderId, from the number's key (`orderNumberKeyOf`) when the caller has it already. */
export function orderIdFor(numberKey: string): string {
  return `${numberKey.slice(0, 12)}${randomHex8()}`;
}

/**
 * 8 random bytes as hex, from a pool filled by the CSPRNG 512 ids at a time (one randomFillSync per 4 KiB rather
 * than one per id); every byte is handed out once.
 */
const POOL = Buffer.alloc(4096);
let poolAt = POOL.length;
function randomHex8(): string {
  if (poolAt + 8 > POOL.length) {
    randomFillSync(POOL);
    poolAt = 0;
  }
  const hex = POOL.toString('hex', poolAt, poolAt + 8);
  poolAt += 8;
  return hex;
}

/** A plan's id names its order (so its keys are found, in the order's shard) and its number within the order. */
export function planIdFor(orderId: string, seq: number): string {
  return `${orderId}_p${seq}`;
}

/** The order a plan id belongs to, or undefined for a malformed id. */
export function orderIdOfPlan(planId: string): string | undefined {
  return PLAN_ID_RE.exec(planId)?.[1];
}

export function shardOf(orderId: string): number {
  return parseInt(orderId.slice(4, 12), 16) % ORDER_SHARDS;
}

const shardKeys = (builder: KeyBuilder, shard: number) => builder.tagged(ORDER_KEYS, 's', String(shard));

/** The three keys of the order scripts: order hash, plan hash (a key never written when none), the shard's events stream. */
export function orderKeys(builder: KeyBuilder, orderId: string, planId?: string): [string, string, string] {
  const t = shardKeys(builder, shardOf(orderId));
  return [t.key('order', orderId), planId ? t.key('plan', planId) : t.key('no-plan'), t.key('events')];
}

/**
 * The order index entry of a number key (`orderNumberKeyOf`): the id of the order that (merchant, merchantOrderNo)
 * names now, kept as long as that order. In the shard of every order of that number.
 */
export function orderIndexKey(builder: KeyBuilder, numberKey: string): string {
  return shardKeys(builder, shardOf(numberKey)).key('order-no', numberKey);
}

/** The key of the write script for "no index entry" (an order stored before the index): never written. */
export function noIndexKey(builder: KeyBuilder, orderId: string): string {
  return shardKeys(builder, shardOf(orderId)).key('no-index');
}

/** The simulated channel `method`'s ledger entry of a payment reference. */
export function channelLedgerKey(builder: KeyBuilder, method: string, ref: string): string {
  return builder.tagged(ORDER_KEYS, 'c', ref).key('ledger', method);
}

/** The events stream of every shard, by shard number. */
export function eventStreamKeys(builder: KeyBuilder): string[] {
  return Array.from({ length: ORDER_SHARDS }, (_, shard) => shardKeys(builder, shard).key('events'));
}

/** Where each shard's consumers record the events they gave up on, by shard number (beside eventStreamKeys). */
export function deadEventStreamKeys(builder: KeyBuilder): string[] {
  return Array.from({ length: ORDER_SHARDS }, (_, shard) => shardKeys(builder, shard).key('dead-events'));
}
