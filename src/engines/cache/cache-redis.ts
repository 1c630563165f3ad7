import { Injectable, Logger, OnApplicationShutdown } from '@nestjs/common';
import Redis from 'ioredis';
import { AppConfig } from '../../platform/config/app-config';
import { nodeOptions } from '../../platform/redis/redis-options';
import { RedisClient, RedisService } from '../../platform/redis/redis.service';
import { CacheMetrics, CacheRedisFailure } from './cache.metrics';

/**
 * The cache role's Redis. With `REDIS_CACHE_URL` set it owns one connection to that separate Redis
 * (run with `allkeys-lru`: losing a cached page costs a rebuild, nothing more); unset, caches share the
 * main command connection (`RedisService.client`, which may be a Cluster: caches use single-key commands
 * only, so they work on one).
 *
 * A cache is never worth waiting for: every command is given up after `CACHE_COMMAND_TIMEOUT_MS`, and
 * nothing here ever rejects. A failed or slow read resolves `undefined` (the caller builds the value), a
 * failed write resolves `false`; both are counted in `cache_redis_errors_total` and logged at most once a
 * second, as are the dedicated connection's own errors.
 */
@Injectable()
export class CacheRedis implements OnApplicationShutdown {
  private readonly logger = new Logger(CacheRedis.name);
  /** The connection caches use: the dedicated cache connection, or the main command connection. */
  readonly client: RedisClient;
  /** True when `client` is a connection of its own to `REDIS_CACHE_URL` (closed by this on shutdown). */
  readonly dedicated: boolean;
  private readonly timeoutMs: number;
  private lastErrorLog = 0;

  constructor(
    private readonly config: AppConfig,
    redis: RedisService,
    private readonly metrics: CacheMetrics,
  ) {
    this.timeoutMs = config.cache.commandTimeoutMs;
    const url = config.cache.url;
    if (url === undefined) {
      this.client = redis.client;
      this.dedicated = false;
      return;
    }
    // The platform's node options (reconnect backoff, no re-sent commands, the TLS CA settings), with the
    // cache's own short timeout. Credentials and TLS come from the cache URL itself (user:pass@, rediss://),
    // never from the main Redis's REDIS_USERNAME / REDIS_PASSWORD.
    const base = nodeOptions({ ...config.redis, username: undefined, password: undefined, tls: url.startsWith('rediss://'), commandTimeoutMs: this.timeoutMs });
    const conn = new Redis(url, { ...base, enableOfflineQueue: false, maxRetriesPerRequest: 1, connectionName: 'redis-pay:cache' });
    conn.on('error', (err: Error) => this.failed('connection', err));
    // Connect in the background: a cache that is down must not hold up the boot (reads miss until it is up).
    conn.connect().catch(() => undefined);
    this.client = conn;
    this.dedicated = true;
  }

  /** The value at `key`; null when there is none; undefined when the cache failed or took longer than the timeout. Never rejects. */
  async get(key: string): Promise<string | null | undefined> {
    return this.bounded('get', (c) => c.get(key));
  }

  /** Sets `key` to `value` for `ttlMs` milliseconds. Resolves false when the cache failed or was too slow (counted). Never rejects. */
  async set(key: string, value: string, ttlMs: number): Promise<boolean> {
    return (await this.bounded('set', (c) => c.set(key, value, 'PX', ttlMs))) !== undefined;
  }

  /**
   * Runs one command, given up after the cache timeout. The dedicated connection has that timeout as its own
   * command timeout; the main connection has a longer one, so the wait is cut here too (the command itself
   * still completes or fails on its connection, unobserved).
   */
  private bounded<T>(op: Exclude<CacheRedisFailure, 'connection'>, fn: (c: RedisClient) => Promise<T>): Promise<T | undefined> {
    return new Promise<T | undefined>((resolve) => {
      let done = false;
      const finish = (value: T | undefined, err?: unknown) => {
        // Whichever comes first, the reply or the timeout, settles and is counted; the other is ignored.
        if (done) return;
        done = true;
        clearTimeout(timer);
        if (err !== undefined) this.failed(op, err);
        resolve(value);
      };
      const timer = setTimeout(() => finish(undefined, new Error(`cache ${op} took longer than ${this.timeoutMs} ms`)), this.timeoutMs);
      let running: Promise<T>;
      try {
        running = fn(this.client);
      } catch (err) {
        running = Promise.reject(err as Error);
      }
      running.then(
        (value) => finish(value),
        (err: unknown) => finish(undefined, err ?? new Error(`cache ${op} failed`)),
      );
    });
  }

  private failed(op: CacheRedisFailure, err: unknown): void {
    this.metrics.redisErrors.inc({ op });
    // A down cache fails every request and emits an error per reconnect attempt: log at most once a second.
    const now = Date.now();
    if (now - this.lastErrorLog > 1000) {
      this.lastErrorLog = now;
      this.logger.warn({ op, dedicated: this.dedicated, err: err instanceof Error ? err.message : String(err) }, 'cache redis error');
    }
  }

  /** Closes the dedicated cache connection (the main one is RedisService's to close). */
  async onApplicationShutdown(): Promise<void> {
    if (!this.dedicated) return;
    const c = this.client;
    let timer: NodeJS.Timeout | undefined;
    try {
      const timeout = new Promise((r) => (timer = setTimeout(r, this.config.redis.commandTimeoutMs)));
      await Promise.race([c.quit(), timeout]);
    } catch {
      /* already closed */
    } finally {
      clearTimeout(timer);
      if (c.status !== 'end') c.disconnect();
    }
  }
}
