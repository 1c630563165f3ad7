import { Injectable } from '@nestjs/common';
import type { Counter, Histogram } from 'prom-client';
import { MetricsService } from '../../platform/metrics/metrics.service';

/** Why a reminder was not sent. */
export type SkipReason =
  'too-late' | 'already-paid' | 'already-closed' | 'paid' | 'closed' | 'paying' | 'expired' | 'no-payer' | 'merchant-disabled' | 'order-missing';

/** The close reminders' counters and lateness histogram. */
@Injectable()
export class CloseReminderMetrics {
  readonly scheduled: Counter;
  readonly cancelled: Counter;
  readonly sent: Counter;
  readonly withdrawn: Counter;
  readonly skipped: Counter<'reason'>;
  readonly lateness: Histogram;

  constructor(metrics: MetricsService) {
    this.scheduled = metrics.counter('close_reminders_scheduled_total', 'Close reminders scheduled (once per order)');
    this.cancelled = metrics.counter('close_reminders_cancelled_total', 'Close reminders cancelled before they were sent (the order was paid or closed)');
    this.sent = metrics.counter('close_reminders_sent_total', 'Close reminders delivered to the payer’s inbox');
    this.withdrawn = metrics.counter('close_reminders_withdrawn_total', 'Sent close reminders taken back from the inbox because the order was paid or closed');
    this.skipped = metrics.counter('close_reminders_skipped_total', 'Close reminders not sent, by reason', ['reason']);
    this.lateness = metrics.histogram(
      'close_reminder_lateness_seconds',
      'How late each close reminder reached the inbox: sent time minus due time, on the Redis clock',
      [0.01, 0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10, 30, 60, 300],
    );
  }
}
