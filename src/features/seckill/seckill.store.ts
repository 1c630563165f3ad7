import { Injectable } from '@nestjs/common';
import { KeyBuilder } from '../../platform/redis/key-builder';
import { RedisService } from '../../platform/redis/redis.service';
import { ScriptRegistry } from '../../platform/scripts/script-registry.service';
import { activityIndexKey, activityKeys, buyerIndexKey, restockChannel, SHARD_PARTS, shardKeys, type ShardKeys } from './seckill.keys';
import type { ActivityRecord, ProductRecord, ReservationLocation, ReservationRecord, ShardStock } from './seckill.types';

/** What reserve-5.lua answered. */
export type ReserveReply =
  | { outcome: 'RESERVED'; expiresAt: number; left: number; orderId: string }
  | { outcome: 'EXISTING' | 'CLAIM'; record: ReservationRecord }
  | { outcome: 'CLAIMED'; units: number; record: ReservationRecord | null }
  | { outcome: 'SHORT' | 'SOLD_OUT'; available: number }
  | { outcome: 'LIMIT_EXCEEDED'; held: number; limit: number }
  | { outcome: 'NOT_STARTED' | 'ENDED' | 'NOT_ELIGIBLE' | 'NO_PRODUCT' };

/** What take-3.lua answered. */
export type TakeReply =
  | { outcome: 'TAKEN'; units: number; left: number }
  | { outcome: 'EXISTING'; record: ReservationRecord }
  | { outcome: 'EXPIRED' | 'NOT_STARTED' | 'ENDED' | 'NO_PRODUCT' };

/** What release-5.lua did on one shard. */
export interface ReleaseReply {
  stock: 'RELEASED' | 'ALREADY' | 'SOLD' | 'NONE';
  claimFreed: boolean;
  available: number;
}

const STOCK_FIELDS = ['gen', 'initial', 'available', 'reserved', 'sold', 'released', 'startsAt', 'endsAt', 'endedAt', 'limit'] as const;

/** The one typed wrapper of the lua/features/seckill scripts and the flash sales' keys. */
@Injectable()
export class SeckillStore {
  /** Shard keys by product record (records are never changed once read: an edit or a new read makes new ones). */
  private readonly built = new WeakMap<ProductRecord, { activityId: string; shards: ShardKeys[] }>();

  constructor(
    private readonly scripts: ScriptRegistry,
    private readonly redis: RedisService,
    private readonly keys: KeyBuilder,
  ) {}

  /**
   * A product shard's keys, built once per product record (a spread tag costs a CRC; every reservation needs the keys
   * of one or more shards, and the activity catalog hands out the same record until it reads the activity again).
   */
  shard(activityId: string, p: ProductRecord, shard: number): ShardKeys {
    let built = this.built.get(p);
    if (built?.activityId !== activityId) this.built.set(p, (built = { activityId, shards: [] }));
    return (built.shards[shard] ??= shardKeys(this.keys, activityId, p.productId, shard, p));
  }

  get restockChannel(): string {
    return restockChannel(this.keys);
  }

  // ---- activities

  async activity(activityId: string): Promise<ActivityRecord | null> {
    const raw = await this.redis.command((c) => c.get(activityKeys(this.keys, activityId).config));
    return raw ? (JSON.parse(raw) as ActivityRecord) : null;
  }

  /** Stores the activity (NX: only when it does not exist; returns false then), expiring with its live keys. */
  async saveActivity(a: ActivityRecord, expireAt: number, onlyIfNew: boolean): Promise<boolean> {
    const k = activityKeys(this.keys, a.activityId).config;
    const json = JSON.stringify(a);
    const r = await this.redis.command((c) => (onlyIfNew ? c.set(k, json, 'PXAT', expireAt, 'NX') : c.set(k, json, 'PXAT', expireAt)));
    if (r === 'OK') await this.redis.command((c) => c.zadd(activityIndexKey(this.keys), a.endsAt, a.activityId));
    return r === 'OK';
  }

  /** Replaces the activity's eligibility list (none: anyone may buy). */
  async saveEligible(activityId: string, accounts: readonly string[], expireAt: number): Promise<void> {
    const k = activityKeys(this.keys, activityId).eligible;
    await this.redis.command((c) => c.del(k));
    for (let i = 0; i < accounts.length; i += 5000) {
      const chunk = accounts.slice(i, i + 5000);
      await this.redis.command((c) => c.sadd(k, ...chunk));
    }
    if (accounts.length) await this.redis.command((c) => c.pexpireat(k, expireAt));
  }

  async isEligible(activityId: string, accountId: string): Promise<boolean> {
    return (await this.redis.command((c) => c.sismember(activityKeys(this.keys, activityId).eligible, accountId))) === 1;
  }

  /** Activity ids whose end is at or after `from` (current and upcoming), soonest end first. */
  /** Activities ending at `from` or later, soonest first: `limit` of them after the first `offset`. */
  async activityIds(from: number, limit: number, offset = 0): Promise<string[]> {
    return this.redis.command((c) => c.zrangebyscore(activityIndexKey(this.keys), from, '+inf', 'LIMIT', offset, limit));
  }

  async results(activityId: string): Promise<unknown> {
    const raw = await this.redis.command((c) => c.get(activityKeys(this.keys, activityId).results));
    return raw ? JSON.parse(raw) : null;
  }

  async saveResults(activityId: string, results: unknown, keepMs: number): Promise<void> {
    await this.redis.command((c) => c.set(activityKeys(this.keys, activityId).results, JSON.stringify(results), 'PX', keepMs));
  }

  /** The Redis clock, epoch ms. */
  async now(): Promise<number> {
    const [s, us] = await this.redis.command((c) => c.time());
    return Number(s) * 1000 + Math.floor(Number(us) / 1000);
  }

  // ---- product shards

  async load(k: ShardKeys, a: { gen: string; stock: number; startsAt: number; endsAt: number; limit: number; shard: number; expireAt: number }) {
    const [ok, reserved, sold] = await this.scripts.run<[number, number?, number?]>(
      'seckill/load',
      SHARD_PARTS.map((p) => k[p]),
      [a.gen, a.stock, a.startsAt, a.endsAt, a.limit, a.shard, a.expireAt],
    );
    return ok === 1 ? { loaded: true as const } : { loaded: false as const, reserved: reserved ?? 0, sold: sold ?? 0 };
  }

  async endShard(k: ShardKeys): Promise<number> {
    const [endedAt] = await this.scripts.run<[number]>('seckill/end', [k.stock]);
    return endedAt;
  }

  /** Deletes a shard's keys (a product or shard an edit removed, before the sale). */
  async dropShard(k: ShardKeys): Promise<void> {
    await Promise.all(SHARD_PARTS.map((p) => this.redis.command((c) => c.del(k[p]))));
  }

  /** Which of the shard's keys exist (for the pre-sale check's leftovers). */
  async existingParts(k: ShardKeys): Promise<string[]> {
    const found = await Promise.all(SHARD_PARTS.map((p) => this.redis.command((c) => c.exists(k[p]))));
    return SHARD_PARTS.filter((_, i) => found[i] === 1);
  }

  async stock(k: ShardKeys): Promise<ShardStock | null> {
    const v = await this.redis.command((c) => c.hmget(k.stock, ...STOCK_FIELDS));
    if (v[0] === null) return null;
    const out: Record<string, string | number> = {};
    STOCK_FIELDS.forEach((f, i) => (out[f] = f === 'gen' ? (v[i] ?? '') : Number(v[i] ?? 0)));
    return out as unknown as ShardStock;
  }

  /** The shard's available units only (the listing's read). */
  async available(k: ShardKeys): Promise<number> {
    return Number((await this.redis.command((c) => c.hget(k.stock, 'available'))) ?? 0);
  }

  async counts(k: ShardKeys): Promise<{ holds: number; claims: number; reservations: number; buyers: number }> {
    const [holds, claims, reservations, buyers] = await Promise.all([
      this.redis.command((c) => c.hlen(k.holds)),
      this.redis.command((c) => c.hlen(k.claims)),
      this.redis.command((c) => c.hlen(k.rsv)),
      this.redis.command((c) => c.scard(k.buyers)),
    ]);
    return { holds, claims, reservations, buyers };
  }

  async buyers(k: ShardKeys): Promise<string[]> {
    return this.redis.command((c) => c.smembers(k.buyers));
  }

  async record(k: ShardKeys, rsvId: string): Promise<ReservationRecord | null> {
    const raw = await this.redis.command((c) => c.hget(k.rsv, rsvId));
    return raw ? (JSON.parse(raw) as ReservationRecord) : null;
  }

  /**
   * Reservations of the shard still RESERVED whose expiry is at or before `upTo` (epoch ms, Redis clock), soonest
   * first, `limit` of them after the first `offset`.
   */
  async due(k: ShardKeys, upTo: number, limit: number, offset = 0): Promise<string[]> {
    return this.redis.command((c) => c.zrangebyscore(k.due, '-inf', upTo, 'LIMIT', offset, limit));
  }

  /** Drops an id from the due set (one whose record is gone). */
  async forgetDue(k: ShardKeys, rsvId: string): Promise<void> {
    await this.redis.command((c) => c.zrem(k.due, rsvId));
  }

  async hasClaim(k: ShardKeys, rsvId: string): Promise<boolean> {
    return (await this.redis.command((c) => c.hexists(k.claims, rsvId))) === 1;
  }

  // ---- reservations

  /**
   * reserve-5.lua on the buyer's home shard. `plan`: the other shards to take the rest from, in order (absent: the
   * first call, which writes nothing when the home shard has too little and answers SHORT). `attempt`: replace a
   * master record given back (f) by attempt - 1 with a fresh attempt.
   */
  async reserve(
    k: ShardKeys,
    a: {
      rsvId: string;
      account: string;
      qty: number;
      eligible: boolean;
      payWindowMs: number;
      canFallOver: boolean;
      plan?: readonly number[];
      attempt?: number;
      /** The id of the reservation's order, recorded on a new reservation (an existing one keeps its own). */
      orderId?: string;
    },
  ): Promise<ReserveReply> {
    const r = await this.scripts.run<[string, ...(string | number)[]]>(
      'seckill/reserve',
      [k.stock, k.rsv, k.holds, k.claims, k.due],
      [a.rsvId, a.account, a.qty, a.eligible ? 1 : 0, a.payWindowMs, a.canFallOver ? 1 : 0, a.plan?.join(',') ?? '', a.attempt ?? '', a.orderId ?? ''],
    );
    return decodeReserve(r) as ReserveReply;
  }

  /** take-3.lua: one shard's part of a reservation taken over several shards (at most `need` units, maybe none). */
  async take(
    k: ShardKeys,
    a: { rsvId: string; account: string; need: number; expiresAt: number; home: number; total: number; attempt?: number },
  ): Promise<TakeReply> {
    const r = await this.scripts.run<[string, ...(string | number)[]]>(
      'seckill/take',
      [k.stock, k.rsv, k.due],
      [a.rsvId, a.account, a.need, a.expiresAt, a.home, a.total, a.attempt ?? 0],
    );
    return decodeReserve(r) as TakeReply;
  }

  /** The available units of each of the shards, read at once. */
  async availableOn(shards: readonly ShardKeys[]): Promise<number[]> {
    return Promise.all(shards.map((k) => this.available(k)));
  }

  /** `failed`: given back because the whole quantity could not be taken (the record keeps `f`). */
  async release(k: ShardKeys, rsvId: string, account: string, product: string, failed = false): Promise<ReleaseReply> {
    const [stock, claim, available] = await this.scripts.run<[ReleaseReply['stock'], number, number]>(
      'seckill/release',
      [k.stock, k.rsv, k.holds, k.claims, k.due],
      [rsvId, account, this.restockChannel, product, failed ? 1 : 0],
    );
    return { stock, claimFreed: claim === 1, available };
  }

  /** `attempt`: a part of a reservation taken over several shards, of this attempt (a part of another one is NONE). */
  async sell(k: ShardKeys, rsvId: string, attempt?: number): Promise<'SOLD' | 'ALREADY' | 'RELEASED' | 'NONE'> {
    const args = attempt === undefined ? [rsvId] : [rsvId, attempt];
    const [outcome] = await this.scripts.run<['SOLD' | 'ALREADY' | 'RELEASED' | 'NONE']>('seckill/sell', [k.stock, k.rsv, k.buyers, k.due], args);
    return outcome;
  }

  // ---- the buyers' index

  async locate(accountId: string, rsvId: string): Promise<ReservationLocation | null> {
    const raw = await this.redis.command((c) => c.hget(buyerIndexKey(this.keys, accountId), rsvId));
    return raw ? (JSON.parse(raw) as ReservationLocation) : null;
  }

  /** The buyer's reservation whose order is `orderId`, with where it is (the index's entry for the order), or null. */
  async reservationOfOrder(accountId: string, orderId: string): Promise<{ rsvId: string; loc: ReservationLocation } | null> {
    const raw = await this.redis.command((c) => c.hget(buyerIndexKey(this.keys, accountId), orderField(orderId)));
    if (!raw) return null;
    const { r, ...loc } = JSON.parse(raw) as ReservationLocation & { r: string };
    return { rsvId: r, loc };
  }

  /**
   * Indexes the buyer's reservation: where it is, and (`orderId`) which of the buyer's reservations its order belongs
   * to, with where that is, so that the order can be stored when the buyer first opens or pays it. A durable write
   * (money): with replicas configured it is acknowledged once they have it, as the reserve script is, since the order
   * id answered after it is found through it.
   */
  async remember(accountId: string, rsvId: string, at: ReservationLocation, keepUntil: number, orderId?: string): Promise<void> {
    const k = buyerIndexKey(this.keys, accountId);
    const where = JSON.stringify(at);
    const fields = orderId ? [rsvId, where, orderField(orderId), JSON.stringify({ r: rsvId, ...at })] : [rsvId, where];
    // One round trip: the three are written together on the one command connection, and Redis runs them in that
    // order (the same key, so the same node on a cluster): the HSET makes the key before its expiry is set.
    // NX gives a new index its expiry (GT alone never does: a key without one counts as never expiring); GT only ever
    // lengthens it, so a later activity that ends sooner does not cut short an earlier one's reservations.
    await Promise.all([
      this.redis.command((c) => c.hset(k, ...fields)),
      this.redis.command((c) => c.pexpireat(k, keepUntil, 'NX')),
      this.redis.command((c) => c.pexpireat(k, keepUntil, 'GT')),
    ]);
    await this.scripts.confirmWrite('seckill/buyer-index', k, 'money');
  }

  /** The buyer's reservations with where they are (of one activity, when given: chosen before the limit), newest first, at most `limit`. */
  async located(accountId: string, limit: number, activityId?: string): Promise<[string, ReservationLocation][]> {
    const all = await this.redis.command((c) => c.hgetall(buyerIndexKey(this.keys, accountId)));
    return Object.entries(all)
      .filter(([field]) => !field.startsWith(ORDER_FIELD))
      .map(([id, raw]): [string, ReservationLocation] => [id, JSON.parse(raw) as ReservationLocation])
      .filter(([, loc]) => !activityId || loc.activityId === activityId)
      .sort(([, x], [, y]) => (y.at ?? 0) - (x.at ?? 0))
      .slice(0, limit);
  }
}

/** The buyer index's field of an order id (its value: the reservation's id and location); reservation ids never start so. */
const ORDER_FIELD = 'o:';
const orderField = (orderId: string) => `${ORDER_FIELD}${orderId}`;

/** The replies of reserve-5.lua and take-3.lua: an outcome, then its details (see the scripts' contracts). */
function decodeReserve(r: [string, ...(string | number)[]]): ReserveReply | TakeReply {
  const [outcome, a, b] = r;
  switch (outcome) {
    case 'RESERVED':
      return { outcome, expiresAt: Number(a), left: Number(b), orderId: String(r[3] ?? '') };
    case 'TAKEN':
      return { outcome, units: Number(a), left: Number(b) };
    case 'EXISTING':
    case 'CLAIM':
      return { outcome, record: JSON.parse(String(a)) as ReservationRecord };
    case 'CLAIMED':
      return { outcome, units: Number(a), record: b ? (JSON.parse(String(b)) as ReservationRecord) : null };
    case 'SHORT':
    case 'SOLD_OUT':
      return { outcome, available: Number(a) };
    case 'LIMIT_EXCEEDED':
      return { outcome, held: Number(a), limit: Number(b) };
    default:
      return { outcome: outcome as 'EXPIRED' | 'NOT_STARTED' | 'ENDED' | 'NOT_ELIGIBLE' | 'NO_PRODUCT' };
  }
}
