import type { Registry } from 'prom-client';

/** One label set's counts: per bucket (not cumulative), the total and the sum of the observed seconds. */
interface Series {
  labels: { method: string; route: string; status: string };
  perBucket: Float64Array;
  count: number;
  sum: number;
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
  private readonly series = new Map<string, Series>();

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
    // Neither a method nor a route pattern holds a NUL: the key names one label set.
    const key = method + '\0' + route + '\0' + status;
    let s = this.series.get(key);
    if (s === undefined) {
      s = { labels: { method, route, status: String(status) }, perBucket: new Float64Array(this.buckets.length), count: 0, sum: 0 };
      this.series.set(key, s);
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
    for (const s of this.series.values()) {
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

  reset(): void {
    this.series.clear();
  }
}
