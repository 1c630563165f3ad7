import { Injectable } from '@nestjs/common';
import type { Counter, Histogram } from 'prom-client';
import { MetricsService } from '../../platform/metrics/metrics.service';

/** The outcomes `stream_entries_total` counts (EntryOutcome of the runner). */
const STREAM_OUTCOMES = ['acked', 'failed', 'dead', 'skipped'] as const;

/** What the pending-entries gauge asks each running consumer at scrape time. */
export interface PendingSource {
  readonly name: string;
  readonly group: string;
  /** Entries delivered to the group and not acked yet, over all its streams; undefined when Redis did not answer. */
  pending(): Promise<number | undefined>;
}

/** Metrics of every stream consumer-group runner, labelled by runner name and group. */
@Injectable()
export class StreamsMetrics {
  /** Entries by outcome: acked (handled), failed (a delivery whose handler threw), dead (given up: on the dead-letter stream), skipped (gone from the stream). */
  readonly entries: Counter<'runner' | 'group' | 'outcome'>;
  /** Entries taken over (XAUTOCLAIM) after they stayed pending too long. */
  readonly claimed: Counter<'runner' | 'group'>;
  readonly handlerSeconds: Histogram<'runner' | 'group'>;
  private readonly sources = new Set<PendingSource>();

  constructor(metrics: MetricsService) {
    this.entries = metrics.counter(
      'stream_entries_total',
      'Stream entries handed to consumer groups, by runner, group and outcome (acked | failed | dead | skipped)',
      ['runner', 'group', 'outcome'],
    );
    this.claimed = metrics.counter(
      'stream_entries_claimed_total',
      'Stream entries taken over from a consumer that left them pending too long (XAUTOCLAIM), by runner and group',
      ['runner', 'group'],
    );
    this.handlerSeconds = metrics.histogram(
      'stream_handler_duration_seconds',
      'Time a stream entry handler took, by runner and group',
      [0.001, 0.005, 0.025, 0.1, 0.5, 2.5, 10],
      ['runner', 'group'],
    );
    const sources = this.sources;
    metrics.gauge(
      'stream_pending_entries',
      'Entries delivered and not yet acked, by runner and group (asked of Redis at scrape time)',
      ['runner', 'group'],
      async function () {
        this.reset();
        // All at once: with Redis hung, one after another made a scrape wait a command timeout per consumer.
        const counts = await Promise.all([...sources].map(async (s) => [s, await s.pending()] as const));
        for (const [s, n] of counts) if (n !== undefined) this.set({ runner: s.name, group: s.group }, n);
      },
    );
  }

  /** Reports `source` in the pending gauge until `untrack`. */
  track(source: PendingSource): void {
    this.sources.add(source);
  }

  untrack(source: PendingSource): void {
    this.sources.delete(source);
  }

  /**
   * Drops a stopped runner's series. Some runners are named per entity (a rain's crediting runner carries its
   * activity id), so series kept after their runner ends would grow the scrape with every rain for the life of
   * the process.
   */
  forget(source: Pick<PendingSource, 'name' | 'group'>): void {
    const labels = { runner: source.name, group: source.group };
    for (const outcome of STREAM_OUTCOMES) this.entries.remove({ ...labels, outcome });
    this.claimed.remove(labels);
    this.handlerSeconds.remove(labels);
  }
}
