import { Inject, Injectable, Logger } from '@nestjs/common';
import { AppConfig } from '../../platform/config/app-config';
import { RedisService } from '../../platform/redis/redis.service';
import { BackgroundWorkers } from '../workers/background-workers.service';
import { CLOCK, type Clock } from '../workers/clock';
import { backoffDelay, type RetryPolicyInput } from '../workers/retry-policy';
import type { DelayQueueHandlerSpec } from '../workers/worker-declarations';
import { WorkerRegistry } from '../workers/worker-registry';
import { DELAY_QUEUE_RETRY, encodePayload, processorSettings, timeArgs } from './delay-queue.args';
import { DelayQueueArgumentError } from './delay-queue.errors';
import { checkItemId } from './delay-queue.keys';
import { DelayQueueMetrics } from './delay-queue.metrics';
import { DelayQueueStore } from './delay-queue.store';
import type {
  CancelResult,
  DeadLetter,
  Delivery,
  Handler,
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
  private readonly processors = new Map<string, QueueProcessor<unknown>>();
  private eventBus?: QueueEventBus;

  constructor(
    private readonly redis: RedisService,
    private readonly store: DelayQueueStore,
    private readonly workers: BackgroundWorkers,
    private readonly metrics: DelayQueueMetrics,
    private readonly config: AppConfig,
    registry: WorkerRegistry,
    @Inject(CLOCK) private readonly clock: Clock,
  ) {
    // Every queue in the shared registry, so any instance's scrape shows them all (aggregate with max, not sum).
    metrics.setStatsSource(async () => Promise.all((await this.listQueues()).slice(0, 1000).map((q) => this.stats(q))));
    // The engine of every @DelayQueueHandler: the registry starts them at boot and stops them on shutdown.
    registry.provide('delay-queue', {
      defaults: DELAY_QUEUE_RETRY,
      trigger: (spec) => `delay queue \`${(spec as DelayQueueHandlerSpec).queue}\``,
      deadLetter: (spec) => `dead set: \`GET /admin/delay-queues/${(spec as DelayQueueHandlerSpec).queue}/dead\``,
      metric: () => 'delay_queue_*{queue}',
      unhandled: async (declared, drained) => {
        const handled = new Set([...declared.map((s) => (s as DelayQueueHandlerSpec).queue), ...drained, ...this.processors.keys()]);
        const stats = await Promise.all((await this.listQueues()).filter((q) => !handled.has(q)).map((q) => this.stats(q)));
        return stats.filter((s) => s.pending + s.ready + s.inFlight > 0).map((s) => `delay-queue:${s.queue}`);
      },
      start: (spec, handler, retry, options) => this.process((spec as DelayQueueHandlerSpec).queue, handler as Handler, { ...options, retry }),
    });
  }

  /**
   * Schedules `payload` under (queue, id). Idempotent: at most one entry per id.
   * By default an existing entry is replaced (new due time and payload); with
   * `{ifExists: 'keep'}` it is left untouched.
   */
  async schedule<T>(queue: string, id: string, when: When, payload: T, options: ScheduleOptions = {}): Promise<ScheduleResult> {
    const k = this.store.keys(queue);
    checkItemId(id);
    const [mode, value] = timeArgs(when);
    const raw = encodePayload(payload);
    const ifExists = options.ifExists ?? 'replace';
    if (ifExists !== 'replace' && ifExists !== 'keep') throw new DelayQueueArgumentError('ifExists', "must be 'replace' or 'keep'");
    const [r] = await Promise.all([this.store.schedule(k, id, mode, value, raw, ifExists), this.remember(queue)]);
    if (r.written) this.metrics.scheduled.inc({ queue });
    return { written: r.written, created: r.existed === 'absent', dueAt: r.dueAt };
  }

  /** Cancels (queue, id) wherever it is, in O(log n). `wasPending`: no live delivery held it (see CancelResult). */
  async cancel(queue: string, id: string): Promise<CancelResult> {
    const k = this.store.keys(queue);
    checkItemId(id);
    const { state, attempts } = await this.store.cancel(k, id);
    if (state !== 'absent') this.metrics.cancelled.inc({ queue });
    return { wasPending: state === 'pending' || state === 'ready', state, attempts };
  }

  /** Moves a pending or ready item to a new due time. 404 when absent, 409 when in flight or dead. */
  async reschedule(queue: string, id: string, when: When): Promise<number> {
    const k = this.store.keys(queue);
    checkItemId(id);
    const [mode, value] = timeArgs(when);
    return this.store.reschedule(k, id, mode, value);
  }

  async get<T = unknown>(queue: string, id: string): Promise<ItemView<T> | null> {
    const k = this.store.keys(queue);
    checkItemId(id);
    const item = await this.store.get(k, id);
    if (!item) return null;
    return {
      id,
      state: item.state,
      at: item.at,
      payload: JSON.parse(item.rawPayload) as T,
      attempts: item.attempts,
      ...(item.lastError ? { lastError: item.lastError } : {}),
    };
  }

  async stats(queue: string): Promise<QueueStats> {
    const { now, pending, ready, inFlight, dead, pendingHead, readyHead } = await this.store.stats(this.store.keys(queue));
    const overdueSince = Math.min(readyHead ?? Infinity, pendingHead !== null && pendingHead <= now ? pendingHead : Infinity);
    return {
      queue,
      pending,
      ready,
      inFlight,
      dead,
      oldestOverdueMs: Number.isFinite(overdueSince) ? Math.max(0, now - overdueSince) : 0,
      nextDueAt: pendingHead,
    };
  }

  /** Whether `queue` is known: scheduled on or processed by this instance, or by any other (the shared registry). */
  async isKnown(queue: string): Promise<boolean> {
    return this.known.has(queue) || (await this.store.isRegistered(queue));
  }

  /** Every queue ever scheduled on or processed (by any instance), sorted. */
  async listQueues(): Promise<string[]> {
    const names = await this.store.registered();
    return [...new Set([...names, ...this.known])].sort();
  }

  /** Dead letters, newest first. */
  async deadLetters<T = unknown>(queue: string, offset = 0, limit = 20): Promise<Page<DeadLetter<T>>> {
    const k = this.store.keys(queue);
    if (!Number.isInteger(offset) || offset < 0 || offset > 1_000_000) throw new DelayQueueArgumentError('offset', 'must be an integer from 0 to 1000000');
    if (!Number.isInteger(limit) || limit < 1 || limit > 100) throw new DelayQueueArgumentError('limit', 'must be an integer from 1 to 100');
    const { items, total } = await this.store.deadPage<T>(k, offset, limit);
    return { items, total, offset, limit };
  }

  /** Makes one dead letter due now, with its delivery count reset. 404 when it is not a dead letter. */
  async retryDead(queue: string, id: string): Promise<number> {
    const k = this.store.keys(queue);
    checkItemId(id);
    return this.store.retryDead(k, id);
  }

  /**
   * Registers this instance's worker for `queue` (features declare theirs with
   * `@DelayQueueHandler`, which the worker registry starts with this). Delivery
   * is at-least-once: a handler that throws is retried with backoff, up to
   * `retry.attempts`, then dead-lettered; a handler whose instance dies is
   * redelivered elsewhere once `retry.visibilityMs` passes. One processor per
   * queue per instance.
   */
  async process<T>(queue: string, handler: Handler<T>, options: ProcessOptions = {}): Promise<Processor> {
    const k = this.store.keys(queue);
    if (this.processors.has(queue)) throw new DelayQueueArgumentError('queue', `already has a processor in this instance`);
    const settings = processorSettings(options, this.config.shutdownGraceMs, this.config.redis.commandTimeoutMs);
    this.eventBus ??= new QueueEventBus(this.redis.subscriber());
    const processor = new QueueProcessor<T>(queue, k, handler, settings, this.store, this.eventBus, this.metrics, this.clock);
    this.processors.set(queue, processor as QueueProcessor<unknown>);
    this.workers.register(`delay-queue:${queue}`, processor);
    await this.remember(queue).catch(() => undefined);
    await processor.start();
    return processor;
  }

  /**
   * Hands the due items of `queue` to `handler` once, without a processor: for a queue nothing processes any more whose
   * entries must still be settled (a former queue being drained by a periodic job). Each item is claimed as a
   * processor claims it (`retry.visibilityMs`), acked once the handler resolves, retried after its backoff or
   * dead-lettered after `retry.attempts` when it throws. `more`: due items are left for the next call.
   */
  async drainDue<T>(
    queue: string,
    handler: Handler<T>,
    options: { batch?: number; retry?: RetryPolicyInput } = {},
  ): Promise<{ handled: number; more: boolean }> {
    const k = this.store.keys(queue);
    const s = processorSettings({ claimBatch: options.batch ?? 100, retry: options.retry }, this.config.shutdownGraceMs, this.config.redis.commandTimeoutMs);
    const { attempts, visibilityMs, backoff } = s.retry;
    const r = await this.store.claim(k, s.claimBatch, visibilityMs, attempts, s.promoteBatch);
    const labels = { queue };
    let handled = 0;
    for (const c of r.claimed) {
      this.metrics.fired.inc(labels);
      const delivery: Delivery<T> = {
        queue,
        id: c.id,
        payload: undefined as T,
        attempt: c.attempt,
        token: c.token,
        dueAt: c.dueAt,
        serverNow: () => r.now,
        signal: new AbortController().signal,
        stillWanted: () => this.store.extend(k, c.id, c.token, visibilityMs),
      };
      try {
        delivery.payload = JSON.parse(c.rawPayload) as T;
        await handler(delivery);
        if (await this.store.ack(k, c.id, c.token)) this.metrics.acked.inc(labels);
        handled++;
      } catch (err) {
        const text = (err instanceof Error ? `${err.name}: ${err.message}` : String(err)).slice(0, 2000);
        // Not recorded (Redis failed): the item stays in flight and is claimed again after its visibility timeout.
        const outcome = await this.store.fail(k, c.id, c.token, attempts, backoffDelay(c.attempt, backoff, this.clock.random), text).catch(() => 'stale');
        if (outcome === 'retried') this.metrics.retried.inc(labels);
        if (outcome === 'dead') this.metrics.dead.inc(labels);
      }
    }
    return { handled, more: r.readyLeft > 0 || r.promoted === s.promoteBatch };
  }

  /** Adds the queue to the shared registry once per process (for the admin list and the gauges). */
  private async remember(queue: string): Promise<void> {
    if (this.known.has(queue)) return;
    this.known.add(queue);
    try {
      await this.store.register(queue);
    } catch (err) {
      this.known.delete(queue);
      this.logger.warn({ queue, err: (err as Error).message }, 'could not record the queue name');
    }
  }
}
