import { Injectable } from '@nestjs/common';
import { LRUCache } from 'lru-cache';
import { SeckillStore } from './seckill.store';
import type { ActivityRecord, ProductRecord } from './seckill.types';

/** An activity as the request paths use it: its record and its products by id. */
export interface Activity extends ActivityRecord {
  productsById: Map<string, ProductRecord>;
}

/** How long an instance uses an activity it read before reading it again, ms (edits, and an early end, show within this). */
export const CATALOG_TTL_MS = 1000;

/**
 * Each instance's copy of the activities it serves, read at most once a second per activity (single-flight): the
 * reservation and listing paths never read the configuration from Redis per request. Purchase decisions do not
 * depend on it being fresh: the window, the limit and the stock are checked by the script on the product's shard.
 */
@Injectable()
export class ActivityCatalog {
  private readonly entries = new LRUCache<string, { at: number; value: Promise<Activity | null> }>({ max: 10_000 });

  constructor(private readonly store: SeckillStore) {}

  get(activityId: string): Promise<Activity | null> {
    const now = Date.now();
    const e = this.entries.get(activityId);
    if (e && now - e.at < CATALOG_TTL_MS) return e.value;
    const value = this.store.activity(activityId).then((a) => (a ? withIndex(a) : null));
    this.entries.set(activityId, { at: now, value });
    // A failed read is not kept: the next request asks again.
    value.catch(() => this.entries.get(activityId)?.value === value && this.entries.delete(activityId));
    return value;
  }

  /** Forget the copy (this instance changed the activity). */
  forget(activityId: string): void {
    this.entries.delete(activityId);
  }
}

export function withIndex(a: ActivityRecord): Activity {
  return { ...a, productsById: new Map(a.products.map((p) => [p.productId, p])) };
}
