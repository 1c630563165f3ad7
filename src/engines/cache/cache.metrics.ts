import { Injectable } from '@nestjs/common';
import type { Counter } from 'prom-client';
import { MetricsService } from '../../platform/metrics/metrics.service';

/** What one page-cache lookup came to: a cached value, none (built), or a cache that failed or was too slow (built). */
export type PageCacheResult = 'hit' | 'miss' | 'error';
/** Where the cache Redis failed: its dedicated connection (error events), a read, or a write. */
export type CacheRedisFailure = 'connection' | 'get' | 'set';

/** The cache role's counters. */
@Injectable()
export class CacheMetrics {
  readonly requests: Counter<'result'>;
  readonly builds: Counter;
  readonly redisErrors: Counter<'op'>;

  constructor(metrics: MetricsService) {
    this.requests = metrics.counter('page_cache_requests_total', 'Page cache lookups, by result (hit | miss | error: the cache failed or was too slow)', [
      'result',
    ]);
    this.builds = metrics.counter('page_cache_builds_total', 'Pages built because the cache had no value (one per key per instance at a time)');
    this.redisErrors = metrics.counter(
      'cache_redis_errors_total',
      'Cache Redis failures, by operation (connection: the dedicated cache connection; get/set: a command failed or timed out)',
      ['op'],
    );
    for (const result of ['hit', 'miss', 'error']) this.requests.inc({ result }, 0);
    for (const op of ['connection', 'get', 'set']) this.redisErrors.inc({ op }, 0);
  }
}
