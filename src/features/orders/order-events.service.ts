import { Injectable } from '@nestjs/common';
import { hostname } from 'node:os';
import { randomBytes } from 'node:crypto';
import { InvalidArgumentError } from '../../platform/core/domain.error';
import { KeyBuilder } from '../../platform/redis/key-builder';
import { STREAM_RETRY } from '../../engines/streams/stream-group-runner';
import { StreamRunners } from '../../engines/streams/stream-runners.service';
import type { StreamConsumerSpec } from '../../engines/workers/worker-declarations';
import { WorkerRegistry } from '../../engines/workers/worker-registry';
import { ConsumeOptions, EventConsumer, OrderEventHandler, toOrderEvent } from './order.events';
import { deadEventStreamKeys, eventStreamKeys } from './order.keys';
import { OrdersMetrics } from './orders.metrics';

const NAME_RE = /^[A-Za-z0-9_.:-]{1,64}$/;

/** Dead events kept per shard (approximately): the newest ones. */
export const DEAD_EVENTS_MAXLEN = 10_000;

/** The stream source of the order events, as consumers declare it: `@StreamConsumer({ stream: ORDER_EVENTS, group })`. */
export const ORDER_EVENTS = 'order-events';

/** The most events of one shard a consumer handles at once. */
const MAX_CONCURRENCY = 1000;

/**
 * Order events (order.created, order.paid, order.closed) for other modules.
 * Each is appended by the script that makes the state change, to the stream
 * of the order's shard (same hash tag, so the same slot on Redis Cluster);
 * consumers read every shard through a Redis consumer group (a StreamGroupRunner:
 * blocking reads, takeover of what a dead consumer left, a dead-events stream per
 * shard), so events survive restarts and each group gets every event at least once.
 */
@Injectable()
export class OrderEventsService {
  constructor(
    private readonly keys: KeyBuilder,
    private readonly runners: StreamRunners,
    private readonly metrics: OrdersMetrics,
    registry: WorkerRegistry,
  ) {
    // The engine of every @StreamConsumer({ stream: 'order-events', group }): the registry starts each group at boot.
    registry.provide(`stream:${ORDER_EVENTS}`, {
      defaults: STREAM_RETRY,
      trigger: (spec) => `stream \`${ORDER_EVENTS}\` (every shard), group \`${(spec as StreamConsumerSpec).group}\``,
      deadLetter: () => "the shard's dead-events stream",
      metric: () => 'order_events_handled_total{group}, stream_entries_total{runner,group}',
      start: (spec, handler, retry, options) => this.consume((spec as StreamConsumerSpec).group, handler as OrderEventHandler, { ...options, retry }),
    });
  }

  /** The shard streams, by shard number. */
  streams(): string[] {
    return eventStreamKeys(this.keys);
  }

  /** Where consumers record the events they gave up on, by shard number. */
  deadStreams(): string[] {
    return deadEventStreamKeys(this.keys);
  }

  /**
   * Starts consuming as `group` (created on first use). Handlers should be idempotent: an event whose
   * handler threw, or whose consumer died before the ack, is handed over again. The consumer is stopped
   * on shutdown with the other background workers.
   */
  async consume(group: string, handler: OrderEventHandler, options: ConsumeOptions = {}): Promise<EventConsumer> {
    const consumer = options.consumer ?? `${hostname()}-${process.pid}-${randomBytes(3).toString('hex')}`.replace(/[^A-Za-z0-9_.:-]/g, '_').slice(0, 64);
    for (const [name, value] of [
      ['group', group],
      ['consumer', consumer],
    ]) {
      if (!NAME_RE.test(value)) throw new InvalidArgumentError(`${name} must be 1-64 characters of A-Z a-z 0-9 _ . : -`, name);
    }
    const concurrency = options.concurrency ?? 1;
    if (!Number.isInteger(concurrency) || concurrency < 1 || concurrency > MAX_CONCURRENCY)
      throw new InvalidArgumentError(`concurrency must be an integer from 1 to ${MAX_CONCURRENCY}`, 'concurrency');
    const dead = this.deadStreams();
    return this.runners.start({
      name: ORDER_EVENTS,
      streams: this.streams().map((key, shard) => ({ key, deadLetterKey: dead[shard] })),
      group,
      consumer,
      handler: (entry) => handler(toOrderEvent(entry.stream, entry.id, entry.fields)),
      batchSize: options.batchSize ?? 50,
      concurrency,
      retry: options.retry,
      deadLetterMaxLen: DEAD_EVENTS_MAXLEN,
      startFrom: options.startFrom,
      onOutcome: (outcome) => {
        if (outcome !== 'skipped') this.metrics.eventsHandled.inc({ group, outcome });
      },
    });
  }
}
