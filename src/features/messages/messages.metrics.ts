import { Injectable } from '@nestjs/common';
import type { Counter } from 'prom-client';
import { MetricsService } from '../../platform/metrics/metrics.service';

/** The message center's counters. */
@Injectable()
export class MessagesMetrics {
  readonly written: Counter<'source'>;
  readonly duplicates: Counter<'source'>;
  readonly pulled: Counter;
  readonly remindersSent: Counter<'bizType'>;
  readonly broadcasts: Counter<'audience'>;
  readonly withdrawn: Counter;

  constructor(metrics: MetricsService) {
    this.written = metrics.counter('messages_written_total', 'New messages stored, by source (api | batch | broadcast | reminder)', ['source']);
    this.duplicates = metrics.counter('messages_duplicates_total', 'Writes answered with an existing message (same bizType and outerBizId), by source', [
      'source',
    ]);
    this.pulled = metrics.counter('messages_pulled_total', 'Messages returned to apps by pulls');
    this.remindersSent = metrics.counter('messages_reminders_sent_total', 'Reminder messages for unfinished actions, by action type', ['bizType']);
    this.broadcasts = metrics.counter('messages_broadcasts_total', 'Broadcasts sent, by audience (all | accounts)', ['audience']);
    this.withdrawn = metrics.counter('messages_withdrawn_total', 'Messages taken back by business systems while the app could still see them');
  }
}
