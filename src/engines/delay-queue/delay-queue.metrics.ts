import { Injectable } from '@nestjs/common';
import type { Counter, Histogram } from 'prom-client';
import { MetricsService } from '../../platform/metrics/metrics.service';
import type { QueueStats } from './delay-queue.types';

type Label = 'queue';

/**
 * The delay queue's Prometheus metrics. Counters move as events happen; the
 * pending/ready/in-flight gauges are read from Redis at scrape time for the
 * queues this instance knows.
 */
@Injectable()
export class DelayQueueMetrics {
  readonly scheduled: Counter<Label>;
  readonly cancelled: Counter<Label>;
  readonly fired: Counter<Label>;
  readonly acked: Counter<Label>;
  readonly retried: Counter<Label>;
  readonly dead: Counter<Label>;
  readonly lateness: Histogram<Label>;
  private statsSource?: () => Promise<QueueStats[]>;
  private cached?: Promise<QueueStats[]>;

  constructor(metrics: MetricsService) {
    const c = (name: string, help: string) => metrics.counter(`delay_queue_${name}_total`, help, ['queue']);
    this.scheduled = c('scheduled', 'Items scheduled (new or replaced), by queue');
    this.cancelled = c('cancelled', 'Items cancelled while they existed, by queue');
    this.fired = c('fired', 'Deliveries handed to a handler, by queue');
    this.acked = c('acked', 'Deliveries acknowledged (handler succeeded), by queue');
    this.retried = c('retried', 'Handler failures that scheduled a retry, by queue');
    this.dead = c('dead', 'Items moved to dead-letter, by queue');
    this.lateness = metrics.histogram(
      'delay_queue_lateness_seconds',
      'How late each delivery started: claim time minus due time, on the Redis clock',
      [0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60],
      ['queue'],
    );
    // One Redis read per scrape feeds all three gauges.
    const read = () => (this.cached ??= (this.statsSource?.() ?? Promise.resolve([])).finally(() => setImmediate(() => (this.cached = undefined))));
    const gauge = (name: string, help: string, pick: (s: QueueStats) => number) =>
      metrics.gauge(`delay_queue_${name}`, help, ['queue'], async function () {
        this.reset();
        for (const s of await read().catch(() => [])) this.set({ queue: s.queue }, pick(s));
      });
    gauge('pending', 'Items waiting for their due time, by queue', (s) => s.pending);
    gauge('ready', 'Items due and not yet claimed, by queue', (s) => s.ready);
    gauge('in_flight', 'Items held by a handler, by queue', (s) => s.inFlight);
  }

  /** Where the gauges read their numbers (the service's known queues). */
  setStatsSource(source: () => Promise<QueueStats[]>): void {
    this.statsSource = source;
  }
}
