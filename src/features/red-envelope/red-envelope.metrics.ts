import { Injectable } from '@nestjs/common';
import type { Counter, Histogram } from 'prom-client';
import { MetricsService } from '../../platform/metrics/metrics.service';

/** A rain's envelopes by state, as the progress gauge reports them. */
export interface RainProgress {
  activityId: string;
  /** Still in the pools. */
  left: number;
  grabbed: number;
  /** Grabbed and not yet credited (nor dead-lettered). */
  pending: number;
  credited: number;
  dead: number;
}

const PROGRESS_STATES = ['left', 'grabbed', 'pending', 'credited', 'dead'] as const;

/** The red envelopes' counters, and the progress of the rains being credited. */
@Injectable()
export class RedEnvelopeMetrics {
  readonly grabs: Counter<'status'>;
  readonly credited: Counter;
  readonly deadLettered: Counter;
  readonly creditLag: Histogram;
  readonly fallOvers: Counter;
  readonly stalls: Counter<'step'>;
  private progressSource?: () => Promise<RainProgress[]>;

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
    const source = () => this.progressSource?.() ?? Promise.resolve([]);
    metrics.gauge(
      'red_envelope_rain_envelopes',
      'Envelopes of each rain the instance credits (READY or ENDED), by state (left | grabbed | pending | credited | dead), read from Redis at scrape time',
      ['activity', 'state'],
      async function () {
        this.reset();
        for (const rain of await source().catch(() => [])) for (const state of PROGRESS_STATES) this.set({ activity: rain.activityId, state }, rain[state]);
      },
    );
  }

  /** Where the progress gauge reads the rains (the crediting service: the rains it credits). */
  setProgressSource(source: () => Promise<RainProgress[]>): void {
    this.progressSource = source;
  }
}
