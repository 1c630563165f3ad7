import { Injectable } from '@nestjs/common';
import type { Counter, Histogram } from 'prom-client';
import { MetricsService } from '../../platform/metrics/metrics.service';

/** The red envelopes' counters. */
@Injectable()
export class RedEnvelopeMetrics {
  readonly grabs: Counter<'status'>;
  readonly credited: Counter;
  readonly deadLettered: Counter;
  readonly creditLag: Histogram;
  readonly fallOvers: Counter;
  readonly stalls: Counter<'step'>;

  constructor(metrics: MetricsService) {
    this.grabs = metrics.counter('red_envelope_grabs_total', 'Grab answers, by status (NONE_LEFT_LOCAL: answered by the instance without Redis)', ['status']);
    this.credited = metrics.counter('red_envelope_credited_total', 'Grabs credited into a wallet (once each)');
    this.deadLettered = metrics.counter('red_envelope_dead_lettered_total', 'Grabs whose crediting was given up and dead-lettered');
    this.fallOvers = metrics.counter('red_envelope_fall_overs_total', 'Grabs taken from another sub-pool than the user’s home sub-pool');
    this.stalls = metrics.counter(
      'red_envelope_stalls_total',
      'Rain steps found unable to advance, once per distinct cause (step: funding, load, end, refund, credit); the admin view shows the stall',
      ['step'],
    );
    this.creditLag = metrics.histogram(
      'red_envelope_credit_lag_seconds',
      'From the grab to the credit in the wallet',
      [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10, 30, 60],
    );
  }
}
