import { Histogram, Registry } from 'prom-client';
import { RequestDurations } from './request-durations';

describe(RequestDurations.name, () => {
  const buckets = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5];
  const observations: [string, string, number, number][] = [
    ['POST', '/diagnostics/touch', 200, 0.0004],
    ['POST', '/diagnostics/touch', 200, 0.001], // exactly on a bound: counted in it
    ['POST', '/diagnostics/touch', 200, 0.0031],
    ['POST', '/diagnostics/touch', 400, 0.02],
    ['GET', '/orders/:id', 200, 7], // above the largest bound: only +Inf
    ['GET', 'unmatched', 404, 0.3],
    ['POST', '/diagnostics/touch', 200, 0.75],
  ];

  /** The same observations through prom-client's Histogram and through RequestDurations, each in its own registry. */
  function both() {
    const reference = new Registry();
    const histogram = new Histogram({ name: 'd_seconds', help: 'durations', labelNames: ['method', 'route', 'status'], buckets, registers: [reference] });
    const ours = new Registry();
    const durations = new RequestDurations('d_seconds', 'durations', buckets, ours);
    for (const [method, route, status, s] of observations) {
      histogram.observe({ method, route, status: String(status) }, s);
      durations.observe(method, route, status, s);
    }
    return { reference, ours, durations };
  }

  it('writes the exposition text a prom-client Histogram writes for the same requests', async () => {
    const { reference, ours } = both();
    const text = await ours.metrics();
    expect(text).toBe(await reference.metrics());
    expect(text).toContain('d_seconds_bucket{le="0.001",method="POST",route="/diagnostics/touch",status="200"} 2');
    expect(text).toContain('d_seconds_bucket{le="5",method="GET",route="/orders/:id",status="200"} 0');
    expect(text).toContain('d_seconds_count{method="GET",route="/orders/:id",status="200"} 1');
  });

  it('gives the same JSON as a prom-client Histogram, and starts again after a reset', async () => {
    const { reference, ours } = both();
    expect(await ours.getMetricsAsJSON()).toEqual(await reference.getMetricsAsJSON());
    ours.resetMetrics();
    expect(await ours.metrics()).toBe('# HELP d_seconds durations\n# TYPE d_seconds histogram\n');
  });
});
