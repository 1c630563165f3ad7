import { Injectable } from '@nestjs/common';
import { LRUCache } from 'lru-cache';
import { KeyBuilder } from '../../platform/redis/key-builder';
import { RedisService } from '../../platform/redis/redis.service';
import { ScriptRegistry } from '../../platform/scripts/script-registry.service';
import { activityIndexKey, activityKey, POOL_PARTS, poolKeys, type PoolKeys, type PoolPlacement, stallsKey } from './red-envelope.keys';
import type { ActivityRecord, PoolStats, Stall } from './red-envelope.types';

/** What grab-6.lua and take-5.lua answered. */
export type GrabReply =
  | { outcome: 'GRABBED' | 'ALREADY_GRABBED' | 'EXISTING'; envelopeId: string; amount: number }
  | { outcome: 'CLAIMED' | 'FALL_OVER'; ordinal: number }
  | { outcome: 'NONE_LEFT' | 'EMPTY' | 'NOT_STARTED' | 'ENDED' | 'NOT_LOADED' };

/** Sub-pools whose keys are kept built (activities × sub-pools live at once are far fewer). */
const POOL_KEYS_KEPT = 4096;

const STAT_FIELDS = [
  'armed',
  'loadedCount',
  'loadedAmount',
  'leftCount',
  'leftAmount',
  'grabbedCount',
  'grabbedAmount',
  'pendingCount',
  'pendingAmount',
  'creditedCount',
  'creditedAmount',
  'deadCount',
  'deadAmount',
  'refundedCount',
  'refundedAmount',
] as const;

export type SettleTarget = 'credited' | 'dead' | 'pending';
export interface Settled {
  moved: boolean;
  previous: string;
}

/** The one typed wrapper of the lua/features/red-envelope scripts and the red envelopes' keys. */
@Injectable()
export class RedEnvelopeStore {
  private readonly pools = new LRUCache<string, PoolKeys>({ max: POOL_KEYS_KEPT });

  constructor(
    private readonly scripts: ScriptRegistry,
    private readonly redis: RedisService,
    private readonly keys: KeyBuilder,
  ) {}

  /** A sub-pool of an activity (its record: where its sub-pools are), its keys built once (every grab and every credit needs them). */
  pool(a: PoolPlacement, pool: number): PoolKeys {
    const id = `${a.activityId}:${pool}:${a.subPools}:${a.tags ?? 1}`;
    let k = this.pools.get(id);
    if (!k) {
      this.pools.set(id, (k = poolKeys(this.keys, a, pool)));
    }
    return k;
  }

  // ---- activities

  async activity(activityId: string): Promise<ActivityRecord | null> {
    const raw = await this.redis.command((c) => c.get(activityKey(this.keys, activityId)));
    return raw ? (JSON.parse(raw) as ActivityRecord) : null;
  }

  /** Stores the record; `onlyIfNew`: only when there is none (false then). */
  async saveActivity(a: ActivityRecord, expireAt: number, onlyIfNew = false): Promise<boolean> {
    const k = activityKey(this.keys, a.activityId);
    const json = JSON.stringify(a);
    const r = await this.redis.command((c) => (onlyIfNew ? c.set(k, json, 'PXAT', expireAt, 'NX') : c.set(k, json, 'PXAT', expireAt)));
    if (r === 'OK') await this.redis.command((c) => c.zadd(activityIndexKey(this.keys), a.endsAt, a.activityId));
    return r === 'OK';
  }

  async deleteActivity(activityId: string): Promise<void> {
    await this.redis.command((c) => c.del(activityKey(this.keys, activityId), stallsKey(this.keys, activityId)));
    await this.redis.command((c) => c.zrem(activityIndexKey(this.keys), activityId));
  }

  /** The steps of the rain that cannot advance, oldest first (a hash: step → {reason, since}). */
  async stalls(activityId: string): Promise<Stall[]> {
    const raw = await this.redis.command((c) => c.hgetall(stallsKey(this.keys, activityId)));
    return Object.entries(raw)
      .map(([step, v]) => ({ step, ...(JSON.parse(v) as { reason: string; since: number }) }) as Stall)
      .sort((x, y) => x.since - y.since);
  }

  /**
   * Records that `step` cannot advance for `reason`: true when that is news (a new step, or a new reason for it), false
   * when it was recorded already. Concurrent reports of one cause (grabs dead-lettered at once) record it once: the
   * first is the HSETNX that sets the step's field.
   */
  async noteStall(activityId: string, step: Stall['step'], reason: string, expireAt: number): Promise<boolean> {
    const k = stallsKey(this.keys, activityId);
    const now = await this.now();
    const first = await this.redis.command((c) => c.hsetnx(k, step, JSON.stringify({ reason, since: now })));
    await this.redis.command((c) => c.pexpireat(k, expireAt));
    if (first === 1) return true;
    const seen = JSON.parse((await this.redis.command((c) => c.hget(k, step))) ?? 'null') as { reason: string; since: number } | null;
    if (seen?.reason === reason) return false;
    await this.redis.command((c) => c.hset(k, step, JSON.stringify({ reason, since: seen?.since ?? now })));
    return true;
  }

  /** Forgets a step's stall once it has advanced (every step's, when none is named: the rain has). */
  async clearStall(activityId: string, step?: Stall['step']): Promise<void> {
    const k = stallsKey(this.keys, activityId);
    await this.redis.command((c) => (step === undefined ? c.del(k) : c.hdel(k, step)));
  }

  /** Whether an activity with this id was ever created (the index keeps every id, past its record's expiry). */
  async wasUsed(activityId: string): Promise<boolean> {
    return (await this.redis.command((c) => c.zscore(activityIndexKey(this.keys), activityId))) !== null;
  }

  /** Activities whose end is at `from` or later (the ones whose jobs may still have work), soonest first: `limit` of them after the first `offset`. */
  async activityIds(from: number, limit: number, offset = 0): Promise<string[]> {
    return this.redis.command((c) => c.zrangebyscore(activityIndexKey(this.keys), from, '+inf', 'LIMIT', offset, limit));
  }

  async now(): Promise<number> {
    const [s, us] = await this.redis.command((c) => c.time());
    return Number(s) * 1000 + Math.floor(Number(us) / 1000);
  }

  // ---- preload

  async clearStaging(k: PoolKeys): Promise<void> {
    await this.redis.command((c) => c.unlink(k.staging));
  }

  async stage(k: PoolKeys, items: string[]): Promise<number> {
    return this.redis.command((c) => c.rpush(k.staging, ...items));
  }

  async arm(k: PoolKeys, a: { count: number; amount: number; startsAt: number; endsAt: number; limit: number; pool: number; expireAt: number }) {
    const [r, staged] = await this.scripts.run<[number, number?]>(
      'red-envelope/arm',
      [k.staging, k.pool, k.stats],
      [a.count, a.amount, a.startsAt, a.endsAt, a.limit, a.pool, a.expireAt],
    );
    return { armed: r !== 0, staged: staged ?? 0 };
  }

  /**
   * Gives every key of a sub-pool the rain's expiry. Arming gives it to the envelopes and the stats; the keys the grabs
   * and their crediting create (grabs, claims, envelope states, the credit stream and its dead letters) have none of
   * their own until the rain ends.
   */
  async expirePool(k: PoolKeys, expireAt: number): Promise<void> {
    await Promise.all(POOL_PARTS.map((part) => this.redis.command((c) => c.pexpireat(k[part], expireAt))));
  }

  // ---- grabbing

  async grab(k: PoolKeys, account: string, canFallOver: boolean): Promise<GrabReply> {
    return decodeGrab(
      await this.scripts.run<[string, string?, number?]>(
        'red-envelope/grab',
        [k.pool, k.grabs, k.claims, k.env, k.stats, k.credits],
        [account, canFallOver ? 1 : 0],
      ),
    );
  }

  /** Fall-over: the user's `ordinal`-th envelope (1 for the first) taken from this sub-pool. */
  async take(k: PoolKeys, account: string, home: number, ordinal = 1): Promise<GrabReply> {
    return decodeGrab(
      await this.scripts.run<[string, (string | number)?, number?]>(
        'red-envelope/take',
        [k.pool, k.grabs, k.env, k.stats, k.credits],
        [account, home, ordinal],
      ),
    );
  }

  /**
   * Each sub-pool as a fall-over reads it, all at once: the envelopes it has left, then the account's entries there
   * (in that order on the sub-pool's connection: an entry the second read misses was not there when the first saw
   * envelopes, and envelopes never come back, so a sub-pool read empty without the account's entry holds none of its).
   */
  async fallOverView(pools: readonly PoolKeys[], account: string): Promise<{ left: number; held: string[] }[]> {
    return Promise.all(
      pools.map(async (k) => {
        const [left, held] = await Promise.all([this.redis.command((c) => c.llen(k.pool)), this.grabsOf(k, account)]);
        return { left, held };
      }),
    );
  }

  async confirm(home: PoolKeys, account: string, entry: string): Promise<void> {
    await this.scripts.run('red-envelope/confirm', [home.grabs, home.claims], [account, entry]);
  }

  /** The account's grabs in this sub-pool: "envelopeId:amount:pool:ordinal" entries. */
  async grabsOf(k: PoolKeys, account: string): Promise<string[]> {
    const raw = await this.redis.command((c) => c.hget(k.grabs, account));
    return raw ? raw.split(',') : [];
  }

  /** An envelope's crediting state: pending, credited, dead, or undefined. */
  async envelopeState(k: PoolKeys, envelopeId: string): Promise<'pending' | 'credited' | 'dead' | undefined> {
    const raw = await this.redis.command((c) => c.hget(k.env, envelopeId));
    return raw ? ({ P: 'pending', C: 'credited', D: 'dead' } as const)[raw[0] as 'P' | 'C' | 'D'] : undefined;
  }

  // ---- crediting and the end

  async settle(k: PoolKeys, envelopeId: string, to: SettleTarget): Promise<Settled> {
    return (await this.settleMany(k, [envelopeId], to))[0];
  }

  /** settle() for many envelopes of one sub-pool in one call; the answers in the same order. */
  async settleMany(k: PoolKeys, envelopeIds: readonly string[], to: SettleTarget): Promise<Settled[]> {
    const flat = await this.scripts.run<Array<number | string>>('red-envelope/settle', [k.env, k.stats], [to, ...envelopeIds]);
    return envelopeIds.map((_, i) => ({ moved: flat[2 * i] === 1, previous: String(flat[2 * i + 1]) }));
  }

  async drain(k: PoolKeys): Promise<{ count: number; amount: number }> {
    const [count, amount] = await this.scripts.run<[number, number]>('red-envelope/drain', [k.pool, k.stats]);
    return { count, amount };
  }

  async redrive(k: PoolKeys, most: number): Promise<number> {
    const [n] = await this.scripts.run<[number]>('red-envelope/redrive', [k.credits, k.dead, k.env, k.stats], [most]);
    return n;
  }

  async stats(k: PoolKeys): Promise<PoolStats> {
    const v = await this.redis.command((c) => c.hmget(k.stats, ...STAT_FIELDS));
    const out: Record<string, number | boolean> = {};
    STAT_FIELDS.forEach((f, i) => (out[f] = f === 'armed' ? v[i] === '1' : Number(v[i] ?? 0)));
    return out as unknown as PoolStats;
  }
}

function decodeGrab(r: [string, (string | number)?, number?]): GrabReply {
  const [outcome, envelopeId, amount] = r;
  if (outcome === 'GRABBED' || outcome === 'ALREADY_GRABBED' || outcome === 'EXISTING')
    return { outcome, envelopeId: String(envelopeId), amount: Number(amount) };
  if (outcome === 'CLAIMED' || outcome === 'FALL_OVER') return { outcome, ordinal: Number(envelopeId) };
  return { outcome: outcome as 'NONE_LEFT' };
}
