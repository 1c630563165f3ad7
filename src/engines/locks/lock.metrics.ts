import { Injectable } from '@nestjs/common';
import type { Counter, Histogram } from 'prom-client';

/** The metric children of one (policy, mode), looked up once rather than by labels on every acquire. */
export interface AcquireMetrics {
  acquired: { inc(): void };
  contended: { inc(): void };
  unavailable: { inc(): void };
  wait: { observe(seconds: number): void };
}
import { MetricsService } from '../../platform/metrics/metrics.service';

/** The lock engine's counters. */
@Injectable()
export class LockMetrics {
  readonly acquired: Counter<'policy' | 'mode' | 'outcome'>;
  readonly waitSeconds: Histogram<'policy' | 'mode'>;
  readonly released: Counter;
  readonly lost: Counter<'when'>;
  private readonly children = new Map<string, AcquireMetrics>();

  constructor(metrics: MetricsService) {
    this.acquired = metrics.counter('lock_acquire_total', 'Lock acquires by business policy, mode and outcome (acquired | contended | unavailable)', [
      'policy',
      'mode',
      'outcome',
    ]);
    this.waitSeconds = metrics.histogram(
      'lock_wait_seconds',
      'Time from asking for a lock to holding it',
      [0.0005, 0.001, 0.002, 0.005, 0.01, 0.05, 0.1, 0.5, 1, 5],
      ['policy', 'mode'],
    );
    this.released = metrics.counter('lock_released_total', 'Locks freed by their last hold being released');
    this.lost = metrics.counter(
      'lock_lost_total',
      'Holds whose lease ended before they were released (when = held: seen by the watchdog; release: seen at release)',
      ['when'],
    );
  }

  /** The children for one policy and mode (policies are a small fixed set). */
  forAcquire(policy: string, mode: string): AcquireMetrics {
    const key = `${policy}\u0000${mode}`;
    let c = this.children.get(key);
    if (!c) {
      c = {
        acquired: this.acquired.labels({ policy, mode, outcome: 'acquired' }),
        contended: this.acquired.labels({ policy, mode, outcome: 'contended' }),
        unavailable: this.acquired.labels({ policy, mode, outcome: 'unavailable' }),
        wait: this.waitSeconds.labels({ policy, mode }),
      };
      this.children.set(key, c);
    }
    return c;
  }
}
