import { Injectable, Logger, OnApplicationBootstrap } from '@nestjs/common';
import { RedisService } from '../redis/redis.service';
import { SeckillConfig } from './seckill.config';
import { SeckillStore } from './seckill.store';

/** The restock message's text for a product. */
export const productTopic = (activityId: string, productId: string) => `${activityId}/${productId}`;

/**
 * Each instance remembers the products it saw sold out (every shard empty) and refuses them without asking
 * Redis. The memory of a product is cleared when release-5.lua publishes it on the restock channel (its stock
 * came back), and in any case after SECKILL_SOLD_OUT_MEMORY_MS, which bounds how long a lost message can keep
 * a product wrongly refused.
 */
@Injectable()
export class SoldOutMemory implements OnApplicationBootstrap {
  private readonly logger = new Logger(SoldOutMemory.name);
  private readonly until = new Map<string, number>();

  constructor(
    private readonly redis: RedisService,
    private readonly store: SeckillStore,
    private readonly config: SeckillConfig,
  ) {}

  async onApplicationBootstrap(): Promise<void> {
    if (this.config.soldOutMemoryMs === 0) return;
    const sub = this.redis.subscriber();
    const channel = this.store.restockChannel;
    sub.on('message', (ch: string, message: string) => {
      if (ch === channel) this.until.delete(message);
    });
    // A reconnect loses what was published meanwhile: forget everything then.
    sub.on('ready', () => this.until.clear());
    await sub
      .subscribe(channel)
      .catch((err: Error) => this.logger.warn({ err: err.message }, 'restock channel: subscribe failed; sold-out memory expires by time only'));
  }

  isSoldOut(activityId: string, productId: string): boolean {
    const key = productTopic(activityId, productId);
    const t = this.until.get(key);
    if (t === undefined) return false;
    if (Date.now() < t) return true;
    this.until.delete(key);
    return false;
  }

  remember(activityId: string, productId: string): void {
    if (this.config.soldOutMemoryMs === 0) return;
    this.until.set(productTopic(activityId, productId), Date.now() + this.config.soldOutMemoryMs);
  }

  /** Forget a product (this instance gave stock back). */
  forget(activityId: string, productId: string): void {
    this.until.delete(productTopic(activityId, productId));
  }
}
