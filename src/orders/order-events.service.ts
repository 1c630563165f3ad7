import { Injectable } from '@nestjs/common';
import { hostname } from 'node:os';
import { randomBytes } from 'node:crypto';
import { ApiError } from '../http/api-error';
import { KeyBuilder } from '../redis/key-builder';
import { RedisService } from '../redis/redis.service';
import { BackgroundWorkers } from '../workers/background-workers.service';
import { ConsumeOptions, EventConsumer, OrderEventHandler } from './order-event';
import { OrderEventConsumer } from './order-event-consumer';
import { deadEventStreamKeys, eventStreamKeys } from './order-keys';
import { OrdersMetrics } from './orders.metrics';

const NAME_RE = /^[A-Za-z0-9_.:-]{1,64}$/;

/**
 * Order events (order.created, order.paid, order.closed) for other modules.
 * Each is appended by the script that makes the state change, to the stream
 * of the order's shard (same hash tag, so the same slot on Redis Cluster);
 * consumers read every shard through a Redis consumer group, so events
 * survive restarts and each group gets every event at least once.
 */
@Injectable()
export class OrderEventsService {
  constructor(
    private readonly redis: RedisService,
    private readonly keys: KeyBuilder,
    private readonly workers: BackgroundWorkers,
    private readonly metrics: OrdersMetrics,
  ) {}

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
    for (const [name, value] of [['group', group], ['consumer', consumer]]) {
      if (!NAME_RE.test(value)) throw new ApiError(400, 'VALIDATION_FAILED', `${name} must be 1-64 characters of A-Z a-z 0-9 _ . : -`);
    }
    const streams = this.streams();
    const start = options.startFrom === 'now' ? '$' : '0';
    await Promise.all(
      streams.map((s) =>
        this.redis.command((c) => c.xgroup('CREATE', s, group, start, 'MKSTREAM')).catch((err: Error) => {
          if (!/BUSYGROUP/.test(err.message)) throw err;
        }),
      ),
    );
    const worker = new OrderEventConsumer(
      group,
      consumer,
      streams,
      this.deadStreams(),
      handler,
      { batchSize: options.batchSize ?? 50, pollMs: options.pollMs ?? 200, claimIdleMs: options.claimIdleMs ?? 30_000, maxDeliveries: options.maxDeliveries ?? 20 },
      this.redis,
      this.metrics,
    );
    this.workers.register(`order-events:${group}:${consumer}`, worker);
    worker.start();
    return worker;
  }
}
