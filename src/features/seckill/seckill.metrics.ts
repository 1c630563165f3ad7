import { Injectable } from '@nestjs/common';
import type { Counter } from 'prom-client';
import { MetricsService } from '../../platform/metrics/metrics.service';

/** The flash sales' counters. */
@Injectable()
export class SeckillMetrics {
  readonly reserved: Counter;
  readonly refused: Counter<'reason'>;
  readonly sold: Counter;
  readonly released: Counter;
  readonly safetyNetReleases: Counter;
  readonly fallOvers: Counter;

  constructor(metrics: MetricsService) {
    this.reserved = metrics.counter('seckill_reservations_total', 'Reservations made (units taken from stock)');
    this.refused = metrics.counter(
      'seckill_refusals_total',
      'Reservations refused, by reason (SOLD_OUT_LOCAL: by the instance’s sold-out memory, without Redis)',
      ['reason'],
    );
    this.sold = metrics.counter('seckill_sold_total', 'Reservations whose order was paid');
    this.released = metrics.counter('seckill_released_total', 'Reservations given back to stock (order closed, expired or cancelled)');
    this.safetyNetReleases = metrics.counter(
      'seckill_safety_net_releases_total',
      'Reservations the safety net released (their order events were missing or late)',
    );
    this.fallOvers = metrics.counter('seckill_fall_overs_total', 'Reservations taken from another shard than the buyer’s home shard');
  }
}
