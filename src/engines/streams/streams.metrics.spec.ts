import { MetricsService } from '../../platform/metrics/metrics.service';
import { type PendingSource, StreamsMetrics } from './streams.metrics';

describe(StreamsMetrics.name, () => {
  it('asks every consumer for its pending entries at once, so a scrape with Redis hung waits one timeout, not one per consumer', async () => {
    const metrics = new MetricsService();
    const streams = new StreamsMetrics(metrics);
    let inFlight = 0;
    let most = 0;
    const source = (name: string, count: number | undefined): PendingSource => ({
      name,
      group: 'g',
      pending: async () => {
        most = Math.max(most, ++inFlight);
        await new Promise((r) => setTimeout(r, 20));
        inFlight--;
        return count;
      },
    });
    streams.track(source('a', 1));
    streams.track(source('b', undefined));
    streams.track(source('c', 3));
    const { body } = await metrics.render();
    expect(most).toBe(3);
    expect(body).toContain('stream_pending_entries{runner="a",group="g"} 1');
    expect(body).toContain('stream_pending_entries{runner="c",group="g"} 3');
    expect(body).not.toContain('runner="b"');
  });
});
