import { Injectable, Logger } from '@nestjs/common';
import Redis, { Cluster } from 'ioredis';
import { AppConfig } from '../config/app-config';
import { noRedisConfigured } from '../config/load-config';
import { MetricsService } from '../metrics/metrics.service';
import { coalesceCommandWrites } from './coalesce-writes';
import { clusterOptions, standaloneOrSentinelOptions } from './redis-options';
import { isRedisUnavailable, RedisUnavailableError } from './redis-unavailable.error';

/** A command connection: one standalone/Sentinel-managed node or a whole cluster. */
export type RedisClient = Redis | Cluster;

/**
 * Owns every ioredis connection of the process: one for commands, plus
 * dedicated ones for pub/sub and blocking commands, created on first use and
 * all closed on shutdown (by the worker registry, after the workers). Nothing else calls `new Redis()`.
 */
@Injectable()
export class RedisService {
  private readonly logger = new Logger(RedisService.name);
  /** The shared command connection. Never use it for SUBSCRIBE or blocking commands. */
  readonly client: RedisClient;
  private subscriberConn?: RedisClient;
  private readonly blockingConns = new Map<string, RedisClient>();
  private lastErrorLog = 0;

  constructor(
    /** The configuration the connections were made with. */
    readonly config: AppConfig,
    /** Where the connections' errors are counted; script wrappers add their metrics to it. */
    readonly metrics: MetricsService,
  ) {
    this.client = this.create('command');
    const connected = () => this.isConnected;
    metrics.gauge('redis_up', 'Whether the command connection to Redis is up (1) or not (0): connecting, reconnecting, closed', [], function () {
      this.set(connected() ? 1 : 0);
    });
  }

  get isCluster(): boolean {
    return this.client instanceof Cluster;
  }

  /** True once the command connection is up. */
  get isConnected(): boolean {
    return this.client.status === 'ready';
  }

  /** Connects the command connection and proves it answers. Rejects if Redis cannot be reached. */
  async warmUp(): Promise<void> {
    if (this.client.status === 'wait') await this.client.connect();
    await this.client.ping();
  }

  /**
   * Runs commands on the command connection and classifies what fails, in one
   * place: an unreachable or not-serving Redis becomes `RedisUnavailableError`
   * (a 503), and both kinds of failure are counted in `redis_errors_total`.
   */
  async command<T>(fn: (client: RedisClient) => Promise<T>): Promise<T> {
    try {
      return await fn(this.client);
    } catch (err) {
      throw this.failure(err);
    }
  }

  /** What a failed command on the command connection becomes (see `command`), counted. For callers that chain rather than await. */
  failure(err: unknown): unknown {
    if (isRedisUnavailable(err)) {
      this.metrics.redisErrors.inc({ kind: 'unavailable' });
      return new RedisUnavailableError(err);
    }
    this.metrics.redisErrors.inc({ kind: 'command' });
    return err;
  }

  /** The dedicated pub/sub connection, created on first use. */
  subscriber(): RedisClient {
    this.subscriberConn ??= this.create('subscriber', { enableOfflineQueue: true });
    return this.subscriberConn;
  }

  /**
   * A dedicated connection for blocking commands (BLMOVE, BZPOPMIN...), one per name,
   * created on first use. It has no command timeout: callers must pass a bounded block time.
   * A command in flight when the connection drops fails at once (maxRetriesPerRequest 0): commands are
   * never re-sent after a reconnect, and without a timeout one neither failed nor re-sent would never settle.
   */
  blocking(name: string): RedisClient {
    let conn = this.blockingConns.get(name);
    if (!conn) {
      conn = this.create(`blocking:${name}`, { commandTimeout: undefined, enableOfflineQueue: true, maxRetriesPerRequest: 0 });
      this.blockingConns.set(name, conn);
    }
    return conn;
  }

  /**
   * Closes the blocking connection `name` at once, failing a command blocked on it, and forgets it:
   * the next `blocking(name)` opens a new one. For a worker that must not wait out its block time to stop.
   */
  closeBlocking(name: string): void {
    const conn = this.blockingConns.get(name);
    if (!conn) return;
    this.blockingConns.delete(name);
    conn.disconnect();
  }

  /** The master nodes: every node of a cluster, or the one node otherwise. */
  masters(): Redis[] {
    return this.client instanceof Cluster ? this.client.nodes('master') : [this.client];
  }

  /**
   * Replicas connected to each master (INFO replication `connected_slaves`), fewest first.
   * Rejects if a master cannot be asked.
   */
  async connectedReplicas(): Promise<number[]> {
    const counts = await Promise.all(this.masters().map(async (node) => Number(/^connected_slaves:(\d+)/m.exec(await node.info('replication'))?.[1] ?? 0)));
    return counts.sort((a, b) => a - b);
  }

  /** Each master's `maxmemory-policy` (INFO memory, which managed services that disable CONFIG still answer). */
  async evictionPolicies(): Promise<string[]> {
    return Promise.all(this.masters().map(async (node) => /^maxmemory_policy:(\S+)/m.exec(await node.info('memory'))?.[1] ?? 'unknown'));
  }

  /**
   * Closes every connection. The worker registry calls it on shutdown, once every background worker has stopped
   * (src/engines/workers/worker-registry.ts): it is the one owner of that order.
   */
  async close(): Promise<void> {
    const all = [this.client, this.subscriberConn, ...this.blockingConns.values()].filter(Boolean) as RedisClient[];
    await Promise.all(
      all.map(async (c) => {
        try {
          let timer: NodeJS.Timeout | undefined;
          const timeout = new Promise((r) => (timer = setTimeout(r, this.config.redis.commandTimeoutMs)));
          const ended = new Promise((r) => c.once('end', r));
          // In Sentinel mode disconnect() also closes the failover detector's connections to the Sentinels;
          // call it right after QUIT's reply, while the socket is still open, so it leaves no 2 s timer behind.
          const sentinel = this.config.redis.topology.mode === 'sentinel';
          const quit = c.quit().then(() => (sentinel ? c.disconnect() : undefined));
          await Promise.race([quit.then(() => ended), timeout]).finally(() => clearTimeout(timer));
        } catch {
          /* already closed */
        } finally {
          // quit() normally ends it; disconnect only what is still open (a second disconnect leaves a 2 s timer behind).
          if (c.status !== 'end') c.disconnect();
        }
      }),
    );
  }

  /**
   * Builds one connection. The command connection never queues offline (fail fast: 503); the pub/sub and
   * blocking ones, created on first use, queue their first commands until connected.
   */
  private create(role: string, overrides: { commandTimeout?: number; enableOfflineQueue?: boolean; maxRetriesPerRequest?: number } = {}): RedisClient {
    const cfg = this.config.redis;
    const t = cfg.topology;
    let conn: RedisClient;
    if (t.mode === 'none') throw noRedisConfigured(this.config.env === 'production');
    if (t.mode === 'cluster') {
      const opts = clusterOptions(cfg);
      opts.redisOptions = { ...opts.redisOptions, ...overrides, connectionName: `redis-pay:${role}` };
      if (overrides.enableOfflineQueue !== undefined) opts.enableOfflineQueue = overrides.enableOfflineQueue;
      conn = new Cluster(t.nodes, opts);
    } else {
      const opts = { ...standaloneOrSentinelOptions(cfg), ...overrides, connectionName: `redis-pay:${role}` };
      conn = t.mode === 'standalone' ? new Redis(t.url, opts) : new Redis(opts);
    }
    // Commands written in one turn of the event loop leave in one syscall (see coalesceWrites). Only here: the
    // pub/sub and blocking connections carry a command now and then.
    if (role === 'command') coalesceCommandWrites(conn);
    conn.on('error', (err: Error) => {
      this.metrics.redisErrors.inc({ kind: 'connection' });
      // A down Redis emits an error per reconnect attempt; log at most once a second.
      const now = Date.now();
      if (now - this.lastErrorLog > 1000) {
        this.lastErrorLog = now;
        this.logger.warn({ role, err: err.message }, 'redis connection error');
      }
    });
    if (role !== 'command' && conn.status === 'wait') conn.connect().catch(() => undefined);
    return conn;
  }
}
