import { Injectable, Logger } from '@nestjs/common';
import { AppConfig } from '../config/app-config';
import { KeyBuilder } from '../redis/key-builder';
import { RedisService } from '../redis/redis.service';
import { ScriptRegistry } from '../scripts/script-registry.service';
import { BackgroundWorkers } from '../workers/background-workers.service';
import { encodePayload, processorSettings, timeArgs } from './delay-queue.args';
import { DelayQueueArgumentError } from './delay-queue.errors';
import { checkItemId, checkQueueName, QueueKeys, queueKeys, registryKey } from './delay-queue.keys';
import { DelayQueueMetrics } from './delay-queue.metrics';
import type {
  CancelResult,
  DeadLetter,
  Handler,
  ItemState,
  ItemView,
  Page,
  ProcessOptions,
  Processor,
  QueueStats,
  ScheduleOptions,
  ScheduleResult,
  When,
} from './delay-queue.types';
import { QueueEventBus } from './queue-event-bus';
import { QueueProcessor } from './queue-processor';

const STATES: ItemState[] = ['absent', 'pending', 'ready', 'in-flight', 'dead'];

/**
 * The delay-queue engine: "do X at time T unless it is cancelled first", for
 * every module. Storage per queue (one hash tag, so one cluster slot): a
 * pending zset (id → due ms), a ready zset, an in-flight zset keyed by
 * visibility deadline, a dead zset, and hashes for payloads, delivery counts
 * and last errors. Every operation is one Lua script of O(log n) or bounded
 * batch work; due times are compared on the Redis server's clock.
 */
@Injectable()
export class DelayQueueService {
  private readonly logger = new Logger(DelayQueueService.name);
  private readonly known = new Set<string>();
  private readonly keyCache = new Map<string, QueueKeys>();
  private readonly processors = new Map<string, QueueProcessor<unknown>>();
  private eventBus?: QueueEventBus;

  constructor(
    private readonly redis: RedisService,
    private readonly scripts: ScriptRegistry,
    private readonly keyBuilder: KeyBuilder,
    private readonly workers: BackgroundWorkers,
    private readonly metrics: DelayQueueMetrics,
    private readonly config: AppConfig,
  ) {
    // Every queue in the shared registry, so any instance's scrape shows them all (aggregate with max, not sum).
    metrics.setStatsSource(async () => Promise.all((await this.listQueues()).slice(0, 1000).map((q) => this.stats(q))));
  }

  /**
   * Schedules `payload` under (queue, id). Idempotent: at most one entry per id.
   * By default an existing entry is replaced (new due time and payload); with
   * `{ifExists: 'keep'}` it is left untouched.
   */
  async schedule<T>(queue: string, id: string, when: When, payload: T, options: ScheduleOptions = {}): Promise<ScheduleResult> {
    const k = this.keys(queue);
    checkItemId(id);
    const [mode, value] = timeArgs(when);
    const raw = encodePayload(payload);
    const ifExists = options.ifExists ?? 'replace';
    if (ifExists !== 'replace' && ifExists !== 'keep') throw new DelayQueueArgumentError('ifExists', "must be 'replace' or 'keep'");
    const [r] = await Promise.all([
      this.scripts.run<[number, number, string]>('delay-queue/schedule', k.keys, [id, mode, value, raw, ifExists, k.channel]),
      this.remember(queue),
    ]);
    const written = r[0] === 1;
    if (written) this.metrics.scheduled.inc({ queue });
    return { written, created: r[1] === 0, dueAt: Number(r[2]) };
  }

  /** Cancels (queue, id) wherever it is, in O(log n). `wasPending`: no live delivery held it (see CancelResult). */
  async cancel(queue: string, id: string): Promise<CancelResult> {
    const k = this.keys(queue);
    checkItemId(id);
    const [code, attempts] = await this.scripts.run<[number, number]>('delay-queue/cancel', k.keys, [id, k.channel]);
    if (code !== 0) this.metrics.cancelled.inc({ queue });
    return { wasPending: code === 1 || code === 2, state: STATES[code], attempts };
  }

  /** Moves a pending or ready item to a new due time. 404 when absent, 409 when in flight or dead. */
  async reschedule(queue: string, id: string, when: When): Promise<number> {
    const k = this.keys(queue);
    checkItemId(id);
    const [mode, value] = timeArgs(when);
    return Number(await this.scripts.run<number>('delay-queue/reschedule', k.keys, [id, mode, value, k.channel]));
  }

  async get<T = unknown>(queue: string, id: string): Promise<ItemView<T> | null> {
    const k = this.keys(queue);
    checkItemId(id);
    const r = await this.scripts.run<[number, string, string, string, string]>('delay-queue/get', k.keys, [id]);
    if (r[0] === 0) return null;
    return {
      id,
      state: STATES[r[0]] as ItemView['state'],
      at: Number(r[1]),
      payload: JSON.parse(r[2]) as T,
      attempts: Number(r[3]),
      ...(r[4] ? { lastError: r[4] } : {}),
    };
  }

  async stats(queue: string): Promise<QueueStats> {
    const k = this.keys(queue);
    const r = await this.scripts.run<[number, number, number, number, number, string, string]>('delay-queue/stats', k.stateKeys);
    const now = Number(r[0]);
    const pendingHead = r[5] === '' ? null : Number(r[5]);
    const readyHead = r[6] === '' ? null : Number(r[6]);
    const overdueSince = Math.min(readyHead ?? Infinity, pendingHead !== null && pendingHead <= now ? pendingHead : Infinity);
    return {
      queue,
      pending: r[1],
      ready: r[2],
      inFlight: r[3],
      dead: r[4],
      oldestOverdueMs: Number.isFinite(overdueSince) ? Math.max(0, now - overdueSince) : 0,
      nextDueAt: pendingHead,
    };
  }

  /** Whether `queue` is known: scheduled on or processed by this instance, or by any other (the shared registry). */
  async isKnown(queue: string): Promise<boolean> {
    return this.known.has(queue) || (await this.redis.command((c) => c.sismember(registryKey(this.keyBuilder), queue))) === 1;
  }

  /** Every queue ever scheduled on or processed (by any instance), sorted. */
  async listQueues(): Promise<string[]> {
    const names = await this.redis.command((c) => c.smembers(registryKey(this.keyBuilder)));
    return [...new Set([...names, ...this.known])].sort();
  }

  /** Dead letters, newest first. */
  async deadLetters<T = unknown>(queue: string, offset = 0, limit = 20): Promise<Page<DeadLetter<T>>> {
    const k = this.keys(queue);
    if (!Number.isInteger(offset) || offset < 0 || offset > 1_000_000) throw new DelayQueueArgumentError('offset', 'must be an integer from 0 to 1000000');
    if (!Number.isInteger(limit) || limit < 1 || limit > 100) throw new DelayQueueArgumentError('limit', 'must be an integer from 1 to 100');
    const r = await this.scripts.run<Array<string | number>>('delay-queue/dead-page', k.keys, [offset, limit]);
    const items: DeadLetter<T>[] = [];
    for (let i = 1; i < r.length; i += 5) {
      items.push({
        id: String(r[i]),
        payload: JSON.parse(String(r[i + 1]) || 'null') as T,
        attempts: Number(r[i + 2]),
        lastError: String(r[i + 3]),
        diedAt: Number(r[i + 4]),
      });
    }
    return { items, total: Number(r[0]), offset, limit };
  }

  /** Makes one dead letter due now, with its delivery count reset. 404 when it is not a dead letter. */
  async retryDead(queue: string, id: string): Promise<number> {
    const k = this.keys(queue);
    checkItemId(id);
    return Number(await this.scripts.run<number>('delay-queue/retry-dead', k.keys, [id, k.channel]));
  }

  /**
   * Registers this instance's worker for `queue`. Delivery is at-least-once:
   * a handler that throws is retried with backoff, up to `maxAttempts`, then
   * dead-lettered; a handler whose instance dies is redelivered elsewhere
   * once its visibility timeout passes. One processor per queue per instance.
   */
  async process<T>(queue: string, handler: Handler<T>, options: ProcessOptions = {}): Promise<Processor> {
    const k = this.keys(queue);
    if (this.processors.has(queue)) throw new DelayQueueArgumentError('queue', `already has a processor in this instance`);
    const settings = processorSettings(options, this.config.shutdownGraceMs);
    this.eventBus ??= new QueueEventBus(this.redis.subscriber());
    const processor = new QueueProcessor<T>(queue, k, handler, settings, this.scripts, this.eventBus, this.metrics);
    this.processors.set(queue, processor as QueueProcessor<unknown>);
    this.workers.register(`delay-queue:${queue}`, processor);
    await this.remember(queue).catch(() => undefined);
    await processor.start();
    return processor;
  }

  private keys(queue: string): QueueKeys {
    let k = this.keyCache.get(queue);
    if (!k) {
      k = queueKeys(this.keyBuilder, checkQueueName(queue));
      if (this.keyCache.size < 10_000) this.keyCache.set(queue, k);
    }
    return k;
  }

  /** Adds the queue to the shared registry once per process (for the admin list and the gauges). */
  private async remember(queue: string): Promise<void> {
    if (this.known.has(queue)) return;
    this.known.add(queue);
    try {
      await this.redis.command((c) => c.sadd(registryKey(this.keyBuilder), queue));
    } catch (err) {
      this.known.delete(queue);
      this.logger.warn({ queue, err: (err as Error).message }, 'could not record the queue name');
    }
  }
}
