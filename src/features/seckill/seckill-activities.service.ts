import { Injectable } from '@nestjs/common';
import { createHash, randomBytes } from 'node:crypto';
import { crashPoint } from '../../platform/core/crash-points';
import { LockService } from '../../engines/locks/lock.service';
import { eachLimit } from '../../platform/core/for-each-limit';
import { ActivityCatalog } from './activity-catalog';
import type { ActivityLimits } from './seckill-activity.command';
import type { ActivityCommand } from './seckill.commands';
import { SeckillConfig } from './seckill.config';
import { seckillConflict, SeckillNotFoundError } from './seckill.errors';
import { SeckillMetrics } from './seckill.metrics';
import { SeckillStore } from './seckill.store';
import type { ActivityRecord, ProductRecord, ShardStock } from './seckill.types';
import { SPREAD_TAGS } from '../../platform/redis/slot-tags';
import { GEN_IDS } from './seckill.keys';

/** How the activity lock is taken. */
export const ACTIVITY_LOCK = { policy: 'seckill-activity' } as const;
const lockName = (activityId: string) => `seckill-activity:${activityId}`;

/** Product shards loaded or read at once by one admin request. */
const PARALLEL = 256;

/** Sales the stock gauge reports at most (those ending soonest): a scrape reads every shard of each. */
const STOCK_GAUGE_SALES = 20;

/** A product's live stock: the sum of its shards. */
export interface ProductStock {
  initial: number;
  available: number;
  reserved: number;
  sold: number;
  released: number;
}

/** An activity's results (see ActivitiesService.results). */
export interface ActivityResults {
  activityId: string;
  final: boolean;
  computedAt: string;
  products: { productId: string; stock: number; sold: number; returned: number; reserved: number; buyers: number; revenue: number; currency: string }[];
  revenue: Record<string, number>;
}

/** The units of `stock` in shard `k` of `shards`: an even split, the remainder on the first shards. */
export const shardStock = (stock: number, shards: number, k: number) => Math.floor(stock / shards) + (k < stock % shards ? 1 : 0);

/**
 * Ops' side of the flash sales: activities are loaded (every product shard), edited until they start, ended
 * early, checked before the sale, and their results computed after it.
 */
@Injectable()
export class ActivitiesService {
  constructor(
    private readonly store: SeckillStore,
    private readonly catalog: ActivityCatalog,
    private readonly locks: LockService,
    private readonly config: SeckillConfig,
    metrics: SeckillMetrics,
  ) {
    metrics.setStockSource(() => this.liveStock());
  }

  get limits(): ActivityLimits {
    return { maxProducts: this.config.maxProducts, maxShards: this.config.maxShards };
  }

  /** Creates the activity once: the same payload again returns it (`created` false); another payload is a 409. */
  create(cmd: ActivityCommand): Promise<{ activity: ActivityRecord; created: boolean }> {
    return this.locks.withLock(lockName(cmd.activityId), ACTIVITY_LOCK, async () => {
      const existing = await this.store.activity(cmd.activityId);
      const fingerprint = fingerprintOf(cmd);
      if (existing) {
        if (existing.fingerprint === fingerprint) return { activity: existing, created: false };
        throw seckillConflict('ACTIVITY_EXISTS', `Activity ${cmd.activityId} exists with another configuration; edit it with PUT before it starts`);
      }
      return { activity: await this.load(cmd, fingerprint, null), created: true };
    });
  }

  /** Replaces the activity's configuration; only before it starts. */
  async edit(cmd: ActivityCommand): Promise<ActivityRecord> {
    // An activity that does not exist gets its 404 before any lock is taken, so it leaves no lock state behind.
    await this.mustRead(cmd.activityId);
    return this.locks.withLock(lockName(cmd.activityId), ACTIVITY_LOCK, async () => {
      const existing = await this.store.activity(cmd.activityId);
      if (!existing) throw new SeckillNotFoundError('activity');
      const now = await this.store.now();
      if (now >= existing.startsAt || existing.endedAt > 0) throw seckillConflict('ACTIVITY_STARTED', 'The activity has started; it can only be ended');
      const fingerprint = fingerprintOf(cmd);
      if (existing.fingerprint === fingerprint) return existing;
      return this.load(cmd, fingerprint, existing);
    });
  }

  /** Ends the sale now, on every product shard (reservations already made stay). Idempotent. */
  async end(activityId: string): Promise<ActivityRecord> {
    // As for an edit: the 404 comes before the lock.
    await this.mustRead(activityId);
    return this.locks.withLock(lockName(activityId), ACTIVITY_LOCK, async () => {
      const a = await this.mustRead(activityId);
      if (a.endedAt > 0) return a;
      const now = await this.store.now();
      if (now >= a.endsAt) return a;
      await eachLimit(shardsOf(a), PARALLEL, ([p, k]) => this.store.endShard(this.store.shard(a.activityId, p, k)));
      const ended = { ...a, endedAt: now, updatedAt: now };
      await this.store.saveActivity(ended, a.endsAt + this.config.liveRetentionMs, false);
      this.catalog.forget(activityId);
      return ended;
    });
  }

  async mustRead(activityId: string): Promise<ActivityRecord> {
    const a = await this.store.activity(activityId);
    if (!a) throw new SeckillNotFoundError('activity');
    return a;
  }

  /** Every product's live stock (the sum of its shards). */
  async stockOf(a: ActivityRecord): Promise<Map<string, ProductStock>> {
    const out = new Map<string, ProductStock>(a.products.map((p) => [p.productId, { initial: 0, available: 0, reserved: 0, sold: 0, released: 0 }]));
    await eachLimit(shardsOf(a), PARALLEL, async ([p, k]) => {
      const s = await this.store.stock(this.store.shard(a.activityId, p, k));
      if (s) add(out.get(p.productId)!, s);
    });
    return out;
  }

  /** The stock of the sales that have not ended (at most STOCK_GAUGE_SALES of them, soonest end first), for the stock gauge. */
  private async liveStock(): Promise<{ activityId: string; products: Map<string, ProductStock> }[]> {
    const ids = await this.store.activityIds(Date.now(), STOCK_GAUGE_SALES);
    const out: { activityId: string; products: Map<string, ProductStock> }[] = [];
    for (const id of ids) {
      const a = await this.store.activity(id);
      if (a) out.push({ activityId: id, products: await this.stockOf(a) });
    }
    return out;
  }

  /**
   * The check before the sale: every shard is loaded by this activity's load with its share of the stock, the
   * invariant holds, nothing is left from an earlier activity under the same ids (shards beyond the configured
   * ones; before the start, reservations, holds, claims or buyers), and the eligibility list is there.
   */
  async check(activityId: string): Promise<{ ok: boolean; problems: string[]; checkedAt: number }> {
    const a = await this.mustRead(activityId);
    const now = await this.store.now();
    const before = now < a.startsAt;
    const problems: string[] = [];
    await eachLimit(shardsOf(a), PARALLEL, async ([p, k]) => {
      const keys = this.store.shard(a.activityId, p, k);
      const where = `product ${p.productId} shard ${k}`;
      const s = await this.store.stock(keys);
      if (!s) return void problems.push(`${where}: not loaded`);
      if (s.gen !== a.gen) problems.push(`${where}: loaded by another load (${s.gen}), not this activity's (${a.gen})`);
      const share = shardStock(p.stock, p.shards, k);
      if (s.initial !== share) problems.push(`${where}: initial stock ${s.initial}, loaded ${share}`);
      if (s.available + s.reserved + s.sold !== s.initial) {
        problems.push(`${where}: available ${s.available} + reserved ${s.reserved} + sold ${s.sold} != initial ${s.initial}`);
      }
      if (s.startsAt !== a.startsAt || s.endsAt !== a.endsAt) problems.push(`${where}: window differs from the activity's`);
      if (before) {
        const c = await this.store.counts(keys);
        if (s.reserved || s.sold || c.reservations || c.holds || c.claims || c.buyers) {
          problems.push(`${where}: holds reservations or sales before the start (left from an earlier activity)`);
        }
      }
    });
    await eachLimit(a.products, PARALLEL, async (p) => {
      for (let k = p.shards; k < this.config.maxShards; k++) {
        // Under the first tags (without a salt): the shards of an activity loaded before spread tags, under this id.
        const parts = await this.store.existingParts(this.store.shard(a.activityId, { ...p, tags: undefined, salts: undefined }, k));
        if (parts.length) problems.push(`product ${p.productId} shard ${k}: leftover keys (${parts.join(', ')}) beyond the ${p.shards} configured`);
      }
    });
    problems.sort();
    return { ok: problems.length === 0, problems: problems.slice(0, 1000), checkedAt: now };
  }

  /**
   * After the end: sold, returned, still reserved and buyers per product, and revenue. Kept SECKILL_RESULTS_RETENTION_DAYS;
   * computed again from the live keys until no reservation waits for payment (then `final`), and served from the kept copy
   * once the live keys have expired.
   */
  async results(activityId: string): Promise<ActivityResults> {
    const a = await this.store.activity(activityId);
    const kept = (await this.store.results(activityId)) as ActivityResults | null;
    if (!a) {
      if (kept) return kept;
      throw new SeckillNotFoundError('activity');
    }
    const now = await this.store.now();
    if (a.endedAt === 0 && now < a.endsAt) throw seckillConflict('ACTIVITY_NOT_ENDED', 'The activity has not ended; its results come after the end');
    if (kept?.final) return kept;
    const stock = await this.stockOf(a);
    const buyers = new Map<string, Set<string>>(a.products.map((p) => [p.productId, new Set<string>()]));
    await eachLimit(shardsOf(a), PARALLEL, async ([p, k]) => {
      for (const b of await this.store.buyers(this.store.shard(a.activityId, p, k))) buyers.get(p.productId)!.add(b);
    });
    const revenue: Record<string, number> = {};
    const products = a.products.map((p) => {
      const s = stock.get(p.productId)!;
      revenue[p.currency] = (revenue[p.currency] ?? 0) + s.sold * p.price;
      return {
        productId: p.productId,
        stock: p.stock,
        sold: s.sold,
        returned: s.released,
        reserved: s.reserved,
        buyers: buyers.get(p.productId)!.size,
        revenue: s.sold * p.price,
        currency: p.currency,
      };
    });
    const results: ActivityResults = {
      activityId,
      final: products.every((p) => p.reserved === 0),
      computedAt: new Date(now).toISOString(),
      products,
      revenue,
    };
    await this.store.saveResults(activityId, results, this.config.resultsRetentionMs);
    return results;
  }

  private async load(cmd: ActivityCommand, fingerprint: string, previous: ActivityRecord | null): Promise<ActivityRecord> {
    const now = await this.store.now();
    const gen = randomBytes(8).toString('hex');
    const expireAt = cmd.endsAt + this.config.liveRetentionMs;
    const products: ProductRecord[] = cmd.products.map((p) => {
      return {
        productId: p.productId,
        title: p.title,
        price: p.price,
        currency: p.currency,
        stock: p.stock,
        ...(p.perUserLimit !== undefined ? { perUserLimit: p.perUserLimit } : {}),
        shards: p.shards ?? 1,
        tags: SPREAD_TAGS,
      };
    });
    const record: ActivityRecord = {
      activityId: cmd.activityId,
      merchantId: cmd.merchantId,
      title: cmd.title,
      startsAt: cmd.startsAt,
      endsAt: cmd.endsAt,
      payWindowMinutes: cmd.payWindowMinutes,
      perUserLimit: cmd.perUserLimit,
      restricted: cmd.eligibleAccounts !== undefined,
      eligibleCount: cmd.eligibleAccounts ? new Set(cmd.eligibleAccounts).size : 0,
      products,
      gen,
      ids: GEN_IDS,
      fingerprint,
      createdAt: previous?.createdAt ?? now,
      updatedAt: now,
      endedAt: 0,
    };
    const refused: string[] = [];
    await eachLimit(shardsOf(record), PARALLEL, async ([p, k]) => {
      const r = await this.store.load(this.store.shard(record.activityId, p, k), {
        gen,
        stock: shardStock(p.stock, p.shards, k),
        startsAt: record.startsAt,
        endsAt: record.endsAt,
        limit: p.perUserLimit ?? record.perUserLimit,
        shard: k,
        expireAt,
      });
      if (!r.loaded) refused.push(`product ${p.productId} shard ${k}: ${r.reserved} reserved and ${r.sold} sold by an earlier activity`);
    });
    if (refused.length) {
      throw seckillConflict('LEFTOVER_KEYS', 'Products of an earlier activity with these ids still hold reservations or sales', {
        problems: refused.slice(0, 100),
      });
    }
    await this.store.saveEligible(record.activityId, cmd.eligibleAccounts ?? [], expireAt);
    if (previous) crashPoint('seckill.edit.before-save');
    await this.store.saveActivity(record, expireAt, false);
    this.catalog.forget(record.activityId);
    // Only once the record names the new shards: until then the old record's shards must all be there.
    if (previous) {
      crashPoint('seckill.edit.after-save');
      await this.dropRemoved(previous, record);
    }
    return record;
  }

  /**
   * Before the sale, an edit deletes the keys of the shards it no longer has: products or shards removed, and shards whose
   * tag changed (another shard count moves every spread tag; a product loaded under the first tags moves to spread tags).
   */
  private async dropRemoved(previous: ActivityRecord, next: ActivityRecord): Promise<void> {
    const kept = new Set(shardsOf(next).map(([p, k]) => this.store.shard(next.activityId, p, k).stock));
    const gone = shardsOf(previous).filter(([p, k]) => !kept.has(this.store.shard(previous.activityId, p, k).stock));
    await eachLimit(gone, PARALLEL, ([p, k]) => this.store.dropShard(this.store.shard(previous.activityId, p, k)));
  }
}

/** Every (product, shard) of an activity. */
export function shardsOf(a: ActivityRecord): [ProductRecord, number][] {
  return a.products.flatMap((p) => Array.from({ length: p.shards }, (_, k) => [p, k] as [ProductRecord, number]));
}

function add(to: ProductStock, s: ShardStock): void {
  to.initial += s.initial;
  to.available += s.available;
  to.reserved += s.reserved;
  to.sold += s.sold;
  to.released += s.released;
}

function fingerprintOf(cmd: ActivityCommand): string {
  return createHash('sha256')
    .update(JSON.stringify({ ...cmd, eligibleAccounts: cmd.eligibleAccounts ? [...new Set(cmd.eligibleAccounts)].sort() : null }))
    .digest('hex');
}
