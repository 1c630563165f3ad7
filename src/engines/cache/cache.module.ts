import { Global, Module } from '@nestjs/common';
import { CacheMetrics } from './cache.metrics';
import { CacheRedis } from './cache-redis';
import { PageCache } from './page-cache';

/**
 * The cache role: `CacheRedis` (the connection caches use: a separate Redis when `REDIS_CACHE_URL` is set,
 * else the main one) and `PageCache` (read-through, single-flight page cache). Global, so a feature module
 * injects `PageCache` without importing this module.
 */
@Global()
@Module({
  providers: [CacheMetrics, CacheRedis, PageCache],
  exports: [CacheRedis, PageCache],
})
export class CacheModule {}
