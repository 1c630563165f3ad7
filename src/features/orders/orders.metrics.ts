import { Injectable } from '@nestjs/common';
import type { Counter } from 'prom-client';
import { MetricsService } from '../../platform/metrics/metrics.service';

/** Counters of the orders and payment module. */
@Injectable()
export class OrdersMetrics {
  readonly ordersCreated: Counter;
  readonly ordersClosed: Counter<'reason'>;
  readonly ordersPaid: Counter;
  readonly plansCreated: Counter;
  readonly pays: Counter<'outcome'>;
  readonly channelCalls: Counter<'method' | 'op' | 'outcome'>;
  readonly reversals: Counter<'outcome'>;
  readonly queries: Counter<'outcome'>;
  readonly eventsHandled: Counter<'group' | 'outcome'>;

  constructor(metrics: MetricsService) {
    this.ordersCreated = metrics.counter('orders_created_total', 'New master orders (duplicates of an existing merchantOrderNo not counted)');
    this.ordersClosed = metrics.counter('orders_closed_total', 'Orders closed, by reason (MERCHANT | EXPIRED)', ['reason']);
    this.ordersPaid = metrics.counter('orders_paid_total', 'Orders paid');
    this.plansCreated = metrics.counter('payment_plans_created_total', 'Payment plans created');
    this.pays = metrics.counter(
      'payment_pays_total',
      'Plan executions by their result: paid, failed, pending (waiting for a channel query), done (already finished, nothing run)',
      ['outcome'],
    );
    this.channelCalls = metrics.counter(
      'payment_channel_calls_total',
      'Calls to the payment channels by method, operation (pay | query | reverse) and outcome',
      ['method', 'op', 'outcome'],
    );
    this.reversals = metrics.counter(
      'payment_reversals_total',
      'Reversals of instructions of failed plans: reversed, retry (queued again), or orphaned (an entry of an earlier version whose plan is gone: reverse by hand)',
      ['outcome'],
    );
    this.queries = metrics.counter('payment_queries_total', 'Channel queries for unknown outcomes, by the answer (success | failure | unknown)', ['outcome']);
    this.eventsHandled = metrics.counter(
      'order_events_handled_total',
      'Order events handed to consumers, by group and outcome (acked | failed | dead: given up after maxDeliveries, on the dead-events stream of its shard)',
      ['group', 'outcome'],
    );
  }
}
