import { Injectable } from '@nestjs/common';
import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client';
import { RequestDurations } from './request-durations';

/**
 * The one Prometheus registry. Feature modules add their own metrics with
 * `counter()`, `gauge()` and `histogram()` so names stay unique and prefixed.
 */
@Injectable()
export class MetricsService {
  readonly registry = new Registry();

  /** HTTP request duration by method, route pattern and status. */
  readonly httpDuration: RequestDurations;

  /** Redis errors by kind: `unavailable` (connection, timeout) or `command` (script/command error). */
  readonly redisErrors: Counter<'kind'>;

  constructor() {
    collectDefaultMetrics({ register: this.registry, prefix: 'redis_pay_' });
    this.httpDuration = new RequestDurations(
      'http_request_duration_seconds',
      'HTTP request duration in seconds, by method, route pattern and status code',
      [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5],
      this.registry,
    );
    this.redisErrors = new Counter({
      name: 'redis_errors_total',
      help: 'Redis errors seen by the service, by kind (unavailable | command | connection)',
      labelNames: ['kind'],
      registers: [this.registry],
    });
    for (const kind of ['unavailable', 'command', 'connection']) this.redisErrors.inc({ kind }, 0);
  }

  counter<L extends string>(name: string, help: string, labelNames: readonly L[] = []): Counter<L> {
    return new Counter({ name, help, labelNames, registers: [this.registry] });
  }

  /** A gauge whose value is read at scrape time by `collect` (set values on `this` inside it). */
  gauge<L extends string>(name: string, help: string, labelNames: readonly L[], collect: (this: Gauge<L>) => Promise<void> | void): Gauge<L> {
    return new Gauge({ name, help, labelNames, collect, registers: [this.registry] });
  }

  histogram<L extends string>(name: string, help: string, buckets: number[], labelNames: readonly L[] = []): Histogram<L> {
    return new Histogram({ name, help, labelNames, buckets, registers: [this.registry] });
  }

  async render(): Promise<{ contentType: string; body: string }> {
    return { contentType: this.registry.contentType, body: await this.registry.metrics() };
  }
}
