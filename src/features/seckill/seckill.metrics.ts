import { Injectable } from '@nestjs/common';
import type { Counter } from 'prom-client';
import { MetricsService } from '../../platform/metrics/metrics.service';

/** A product's units by state, as the stock gauge reports them. */
export interface StockUnits {
  available: number;
  reserved: number;
  sold: number;
}

/** The sales the stock gauge reports: each activity's products, by product id. */
export type StockSource = () => Promise<{ activityId: string; products: Map<string, StockUnits> }[]>;

const STOCK_STATES = ['available', 'reserved', 'sold'] as const;

/** The flash sales' counters, and the stock of the current and upcoming sales. */
@Injectable()
export class SeckillMetrics {
  readonly reserved: Counter;
  readonly refused: Counter<'reason'>;
  readonly sold: Counter;
  readonly released: Counter;
  readonly safetyNetReleases: Counter;
  readonly fallOvers: Counter;
  private stockSource?: StockSource;

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
    const source = () => this.stockSource?.() ?? Promise.resolve([]);
    metrics.gauge(
      'seckill_stock_units',
      'Units of each product of the current and upcoming sales, by state (available | reserved | sold), read from Redis at scrape time',
      ['activity', 'product', 'state'],
      async function () {
        this.reset();
        for (const { activityId, products } of await source().catch(() => []))
          for (const [product, units] of products) for (const state of STOCK_STATES) this.set({ activity: activityId, product, state }, units[state]);
      },
    );
  }

  /** Where the stock gauge reads the sales (the activities service). */
  setStockSource(source: StockSource): void {
    this.stockSource = source;
  }
}
