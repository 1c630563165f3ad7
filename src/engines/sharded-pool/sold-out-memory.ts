import { Logger } from '@nestjs/common';
import type { RedisService } from '../../platform/redis/redis.service';

/** A pool's name in the sold-out memory and on the restock channel: its owner (an activity) and the pool in it. */
export const poolTopic = (ownerId: string, poolId: string) => `${ownerId}/${poolId}`;

/**
 * Each instance remembers the pools it saw empty on every shard and refuses them without asking Redis. A pool's
 * memory is cleared by a restock notice (a release script publishes the pool's topic on the restock channel when
 * units come back), when this instance gives units back itself, and in any case after `holdMs`, which bounds how long a
 * lost notice can keep a pool wrongly refused. `holdMs` Infinity: the pool's units never come back (a rain's
 * envelopes); 0: nothing is remembered.
 */
export class SoldOutMemory {
  private readonly logger = new Logger(SoldOutMemory.name);
  private readonly until = new Map<string, number>();

  constructor(private readonly holdMs: number) {}

  /** Listens for restock notices on `channel` (a reconnect loses what was published meanwhile: everything is forgotten then). */
  async listen(redis: RedisService, channel: string): Promise<void> {
    if (this.holdMs === 0) return;
    const sub = redis.subscriber();
    sub.on('message', (ch: string, topic: string) => {
      if (ch === channel) this.until.delete(topic);
    });
    sub.on('ready', () => this.until.clear());
    await sub
      .subscribe(channel)
      .catch((err: Error) => this.logger.warn({ err: err.message }, 'restock channel: subscribe failed; the sold-out memory expires by time only'));
  }

  isSoldOut(topic: string): boolean {
    const t = this.until.get(topic);
    if (t === undefined) return false;
    if (Date.now() < t) return true;
    this.until.delete(topic);
    return false;
  }

  /** Every shard of the pool was seen empty. */
  remember(topic: string): void {
    if (this.holdMs > 0) this.until.set(topic, Date.now() + this.holdMs);
  }

  /** Forget a pool (this instance gave units back). */
  forget(topic: string): void {
    this.until.delete(topic);
  }
}
