import { Injectable } from '@nestjs/common';
import type { Counter } from 'prom-client';
import { MetricsService } from '../../platform/metrics/metrics.service';

/** The wallets' counters. */
@Injectable()
export class WalletMetrics {
  readonly entries: Counter<'direction' | 'kind' | 'outcome'>;

  constructor(metrics: MetricsService) {
    this.entries = metrics.counter(
      'wallet_operations_total',
      'Wallet credits and debits, by direction, entry kind and outcome (applied, existing, reused, voided, insufficient, limit)',
      ['direction', 'kind', 'outcome'],
    );
  }
}
