import { LRUCache } from 'lru-cache';

/** How long an instance uses a record it read before reading it again, ms (edits, and an early end, show within this). */
export const CATALOG_TTL_MS = 1000;

/**
 * Each instance's copy of the records its pools are configured by (flash-sale activities, rains), read at most once
 * per `ttlMs` per id, however many requests ask at once (single-flight): the request paths never read the
 * configuration from Redis per request. Decisions do not depend on it being fresh: the window, the limit and the
 * stock are checked by the scripts on the shards. A failed read is not kept: the next request asks again.
 */
export class SingleFlightCatalog<T> {
  private readonly entries = new LRUCache<string, { at: number; value: Promise<T | null> }>({ max: 10_000 });

  constructor(
    private readonly load: (id: string) => Promise<T | null>,
    private readonly ttlMs = CATALOG_TTL_MS,
  ) {}

  get(id: string): Promise<T | null> {
    const now = Date.now();
    const e = this.entries.get(id);
    if (e && now - e.at < this.ttlMs) return e.value;
    const value = this.load(id);
    this.entries.set(id, { at: now, value });
    value.catch(() => this.entries.get(id)?.value === value && this.entries.delete(id));
    return value;
  }

  /** Forget the copy (this instance changed the record). */
  forget(id: string): void {
    this.entries.delete(id);
  }
}
