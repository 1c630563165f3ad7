import { Injectable } from '@nestjs/common';
import type { Counter, Histogram } from 'prom-client';
import { MetricsService } from '../metrics/metrics.service';

/** The lock engine's counters. */
@Injectable()
export class LockMetrics {
  readonly acquired: Counter<'policy' | 'mode' | 'outcome'>;
  readonly waitSeconds: Histogram<'policy' | 'mode'>;
  readonly released: Counter;
  readonly lost: Counter<'when'>;

  constructor(metrics: MetricsService) {
    this.acquired = metrics.counter('lock_acquire_total', 'Lock acquires by business policy, mode and outcome (acquired | contended | unavailable)', ['policy', 'mode', 'outcome']);
    this.waitSeconds = metrics.histogram('lock_wait_seconds', 'Time from asking for a lock to holding it', [0.0005, 0.001, 0.002, 0.005, 0.01, 0.05, 0.1, 0.5, 1, 5], ['policy', 'mode']);
    this.released = metrics.counter('lock_released_total', 'Locks freed by their last hold being released');
    this.lost = metrics.counter('lock_lost_total', 'Holds whose lease ended before they were released (when = held: seen by the watchdog; release: seen at release)', ['when']);
  }
}
