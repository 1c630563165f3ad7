import { Injectable } from '@nestjs/common';
import { BroadcastEntry, MessagesStore } from './messages.store';

/** How many recent broadcasts each instance keeps at hand. */
export const FEED_SIZE = 100;
/** How long the feed is reused before it is read again. */
export const FEED_TTL_MS = 1000;

export interface Feed {
  latest: number;
  /** `entries` holds every broadcast with a sequence above this one. */
  from: number;
  entries: BroadcastEntry[];
}

/**
 * This instance's copy of the newest broadcasts, read at most once a second:
 * every pull needs the latest broadcast sequence, and tens of millions of
 * accounts must not all read one Redis key. A broadcast therefore reaches
 * pulls within about a second.
 */
@Injectable()
export class BroadcastFeed {
  private cached?: { feed: Feed; at: number };
  private loading?: Promise<Feed>;
  /** Bumped by invalidate(): a read that started before it must not be cached. */
  private generation = 0;

  constructor(private readonly store: MessagesStore) {}

  async get(): Promise<Feed> {
    if (this.cached && Date.now() - this.cached.at < FEED_TTL_MS) return this.cached.feed;
    this.loading ??= this.load().finally(() => (this.loading = undefined));
    return this.loading;
  }

  /** Forget the copy (after this instance broadcast, so its own next pull sees it). */
  invalidate(): void {
    this.cached = undefined;
    this.loading = undefined; // a read already in flight may predate the broadcast
    this.generation++;
  }

  private async load(): Promise<Feed> {
    const generation = this.generation;
    const { latest, entries } = await this.store.recentBroadcasts(undefined, FEED_SIZE);
    const from = entries.length < FEED_SIZE ? 0 : entries[0].seq - 1;
    const feed = { latest, from, entries };
    if (generation === this.generation) this.cached = { feed, at: Date.now() };
    return feed;
  }
}
