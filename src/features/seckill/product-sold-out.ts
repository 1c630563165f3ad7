import { Injectable, OnApplicationBootstrap } from '@nestjs/common';
import { RedisService } from '../../platform/redis/redis.service';
import { SoldOutMemory } from '../../engines/sharded-pool/sold-out-memory';
import { SeckillConfig } from './seckill.config';
import { SeckillStore } from './seckill.store';

/**
 * The products this instance saw sold out on every shard (the sharded-pool engine's sold-out memory), forgotten when
 * release-5.lua publishes a product on the restock channel, and in any case after SECKILL_SOLD_OUT_MEMORY_MS.
 */
@Injectable()
export class ProductSoldOutMemory extends SoldOutMemory implements OnApplicationBootstrap {
  constructor(
    private readonly redis: RedisService,
    private readonly store: SeckillStore,
    config: SeckillConfig,
  ) {
    super(config.soldOutMemoryMs);
  }

  onApplicationBootstrap(): Promise<void> {
    return this.listen(this.redis, this.store.restockChannel);
  }
}

/** A product's name in the sold-out memory and on the restock channel. */
export { poolTopic as productTopic } from '../../engines/sharded-pool/sold-out-memory';
