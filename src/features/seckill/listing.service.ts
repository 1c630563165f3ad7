import { Injectable } from '@nestjs/common';
import { md5Bytes } from '../../platform/core/digest';
import { PageCache } from '../../engines/cache/page-cache';
import { type Activity, ActivityCatalog } from './activity-catalog';
import type { ActivitySummaryDto, ProductPageDto } from './dto/reservation.dto';
import { SeckillConfig } from './seckill.config';
import { SeckillNotFoundError } from './seckill.errors';
import { SeckillStore } from './seckill.store';
import type { ActivityRecord } from './seckill.types';

/** Activities the app lists at most. */
const MAX_LISTED = 100;

/** Where an activity is in its life on the local clock (for display only: purchases check the Redis clock). */
export function stateOf(a: ActivityRecord, now = Date.now()): 'UPCOMING' | 'OPEN' | 'ENDED' {
  if (a.endedAt > 0 || now >= a.endsAt) return 'ENDED';
  return now < a.startsAt ? 'UPCOMING' : 'OPEN';
}

/**
 * What the app lists: current and upcoming activities, and an activity's products a page at a time, in an order
 * of their own for each visitor. Product pages are cached for SECKILL_LISTING_TTL_MS (2 s) under the 16-hex md5
 * of the query's inputs (account, activity, page, size), built once per instance on a miss, and built from the
 * core Redis when the cache is down. `available` may be that old; reservations never read it.
 */
@Injectable()
export class ListingService {
  constructor(
    private readonly store: SeckillStore,
    private readonly catalog: ActivityCatalog,
    private readonly cache: PageCache,
    private readonly config: SeckillConfig,
  ) {}

  async activities(): Promise<ActivitySummaryDto[]> {
    const now = Date.now();
    const ids = await this.store.activityIds(now, MAX_LISTED);
    const all = await Promise.all(ids.map((id) => this.catalog.get(id)));
    return all
      .filter((a): a is Activity => a !== null && stateOf(a, now) !== 'ENDED')
      .sort((x, y) => x.startsAt - y.startsAt)
      .map((a) => ({
        activityId: a.activityId,
        title: a.title,
        startsAt: new Date(a.startsAt).toISOString(),
        endsAt: new Date(a.endsAt).toISOString(),
        state: stateOf(a, now),
        products: a.products.length,
      }));
  }

  /** A page of the activity's products for this visitor, as the JSON text of a ProductPageDto (cached). */
  async productsJson(accountId: string, activityId: string, page: number, size: number): Promise<string> {
    const a = await this.catalog.get(activityId);
    if (!a) throw new SeckillNotFoundError('activity');
    const key = PageCache.keyOf('sk:', accountId, activityId, 'products', page, size);
    return (await this.cache.getOrBuildJson(key, this.config.listingTtlMs, () => this.build(a, accountId, page, size))).json;
  }

  private async build(a: Activity, accountId: string, page: number, size: number): Promise<ProductPageDto> {
    const order = visitorOrder(a.products.length, `${accountId}\n${a.activityId}`, page * size);
    const products = order.slice((page - 1) * size, page * size).map((i) => a.products[i]);
    const items = await Promise.all(
      products.map(async (p) => {
        const shards = await Promise.all(Array.from({ length: p.shards }, (_, k) => this.store.available(this.store.shard(a.activityId, p, k))));
        const available = shards.reduce((s, n) => s + Math.max(0, n), 0);
        return { productId: p.productId, title: p.title, price: p.price, currency: p.currency, available, soldOut: available === 0 };
      }),
    );
    return { activityId: a.activityId, state: stateOf(a), page, size, total: a.products.length, items, builtAt: new Date().toISOString() };
  }
}

/**
 * The first `count` positions of a shuffle of 0..n-1 that is the same for the same seed (a visitor of an
 * activity): a partial Fisher–Yates driven by a small PRNG seeded from md5(seed).
 */
export function visitorOrder(n: number, seed: string, count: number): number[] {
  const idx = Array.from({ length: n }, (_, i) => i);
  let s = md5Bytes(seed).readUInt32BE(0);
  const next = () => {
    // mulberry32
    s = (s + 0x6d2b79f5) | 0;
    let t = Math.imul(s ^ (s >>> 15), 1 | s);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
  const m = Math.min(count, n);
  for (let i = 0; i < m; i++) {
    const j = i + Math.floor(next() * (n - i));
    [idx[i], idx[j]] = [idx[j], idx[i]];
  }
  return idx.slice(0, m);
}
