/**
 * The seckill module's public file: what other features may use (the module, for
 * the application root) and the key layout a same-work baseline needs (the
 * benchmarks' floor servers). Anything not exported here is the module's own
 * (lint: feature-through-public-file).
 */
export { SeckillModule } from './seckill.module';
export { activityKeys, buyerIndexKey, shardKeys } from './seckill.keys';
export type { ActivityRecord as SaleRecord } from './seckill.types';
