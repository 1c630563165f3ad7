import type { Registry } from 'prom-client';

/** One label set's counts: per bucket (not cumulative), the total and the sum of the observed seconds. */
interface Series {
  labels: { method: string; route: string; status: string };
  perBucket: Float64Array;
  count: number;
  sum: number;
  /** When the label set was first seen (the exposition lists them in that order, as prom-client does). */
  order: number;
}

/** A value of the exposition, in prom-client's shape: the series' labels are `sharedLabels`, `le` the bucket's own. */
interface ExportedValue {
  value: number;
  metricName: string;
  labels: Record<string, string | number>;
  sharedLabels: Series['labels'];
  /** prom-client's buckets carry one (null: exemplars are off). */
  exemplar?: null;
}

/**
 * The request-duration histogram (`method`, `route`, `status`), observed once per request. It is a prom-client metric
 * of the service's registry, exposed in the very text a prom-client `Histogram` gives (cumulative `_bucket` lines with
 * `le`, then `+Inf`, `_sum`, `_count`), but its `observe` is one Map lookup by a string and a few additions:
 * prom-client's own validates the label object, hashes it and searches the buckets on every call, about a microsecond
 * of every request.
 */
export class RequestDurations {
  readonly type = 'histogram';
  readonly aggregator = 'sum';
  /** By route, then method, then status: no key is built per request, and a route's string (one object per route) keeps its hash. */
  private readonly series = new Map<string, Map<string, Map<number, Series>>>();
  private seen = 0;

  constructor(
    readonly name: string,
    readonly help: string,
    private readonly buckets: readonly number[],
    registry: Registry,
  ) {
    registry.registerMetric(this as unknown as Parameters<Registry['registerMetric']>[0]);
  }

  /** Counts one request of `method` on `route` answered with `status` after `seconds`. */
  observe(method: string, route: string, status: number, seconds: number): void {
    let byMethod = this.series.get(route);
    if (byMethod === undefined) this.series.set(route, (byMethod = new Map()));
    let byStatus = byMethod.get(method);
    if (byStatus === undefined) byMethod.set(method, (byStatus = new Map()));
    let s = byStatus.get(status);
    if (s === undefined) {
      s = { labels: { method, route, status: String(status) }, perBucket: new Float64Array(this.buckets.length), count: 0, sum: 0, order: this.seen++ };
      byStatus.set(status, s);
    }
    const b = this.buckets;
    let i = 0;
    while (i < b.length && seconds > b[i]) i++;
    if (i < b.length) s.perBucket[i]++;
    s.count++;
    s.sum += seconds;
  }

  /** What the registry writes out (prom-client's `getForPromString` shape). */
  getForPromString(): { name: string; help: string; type: string; aggregator: string; values: ExportedValue[] } {
    const values: ExportedValue[] = [];
    const bucketName = `${this.name}_bucket`;
    for (const s of this.allSeries()) {
      let cumulative = 0;
      this.buckets.forEach((le, i) => {
        cumulative += s.perBucket[i];
        values.push({ value: cumulative, metricName: bucketName, labels: { le }, sharedLabels: s.labels, exemplar: null });
      });
      values.push({ value: s.count, metricName: bucketName, labels: { le: '+Inf' }, sharedLabels: s.labels, exemplar: null });
      values.push({ value: s.sum, metricName: `${this.name}_sum`, labels: {}, sharedLabels: s.labels });
      values.push({ value: s.count, metricName: `${this.name}_count`, labels: {}, sharedLabels: s.labels });
    }
    return { name: this.name, help: this.help, type: this.type, aggregator: this.aggregator, values };
  }

  /** The registry's JSON view (`getMetricsAsJSON`): each value's labels in one object, as prom-client's `get()` gives. */
  get() {
    const data = this.getForPromString();
    return Promise.resolve({
      ...data,
      values: data.values.map(({ sharedLabels, labels, ...rest }) => ({ ...rest, labels: { ...sharedLabels, ...labels } })),
    });
  }

  /** Every label set, in the order each was first seen. */
  private *allSeries(): Iterable<Series> {
    const seen: Series[] = [];
    for (const byMethod of this.series.values()) for (const byStatus of byMethod.values()) seen.push(...byStatus.values());
    yield* seen.sort((a, b) => a.order - b.order);
  }

  reset(): void {
    this.series.clear();
  }
}
