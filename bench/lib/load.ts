import autocannon from 'autocannon';

export interface LoadRequest {
  headers: Record<string, string>;
  body: string;
}

export interface LoadOptions {
  url: string;
  method?: string;
  connections: number;
  durationS: number;
  /** Each connection gets one of these, round-robin by connection (one account per connection). */
  requests: LoadRequest[];
  title?: string;
  /** Called when the measured run starts and when it ends (e.g. to sample CPU). */
  onStart?: () => void;
}

export interface LoadSummary {
  title?: string;
  /** Mean of the per-second request counts, as autocannon reports it. */
  rps: number;
  /** 2xx responses per second over the whole run. */
  okPerSecond: number;
  p50: number;
  p99: number;
  meanLatency: number;
  total: number;
  ok: number;
  non2xx: number;
  errors: number;
  timeouts: number;
  statusCodes: Record<string, number>;
  durationS: number;
}

/** Runs autocannon in this process (the server under test runs in its own process). */
export async function runLoad(opts: LoadOptions): Promise<LoadSummary> {
  if (opts.requests.length === 0) throw new Error('runLoad needs at least one request');
  let next = 0;
  const first = opts.requests[0];
  const instance = autocannon({
    url: opts.url,
    method: opts.method ?? 'POST',
    connections: opts.connections,
    duration: opts.durationS,
    timeout: 10,
    title: opts.title,
    headers: first.headers,
    body: first.body,
    setupClient: (client) => {
      const r = opts.requests[next++ % opts.requests.length];
      client.setHeadersAndBody(r.headers, r.body);
    },
  });
  instance.on('start', () => opts.onStart?.());
  const r = await instance;
  const statusCodes: Record<string, number> = {};
  for (const [code, { count }] of Object.entries(r.statusCodeStats ?? {})) statusCodes[code] = Number(count);
  const ok = r['2xx'];
  const total = Object.values(statusCodes).reduce((a, b) => a + b, 0);
  return {
    title: opts.title,
    rps: r.requests.average,
    okPerSecond: r.duration > 0 ? ok / r.duration : 0,
    p50: r.latency.p50,
    p99: r.latency.p99,
    meanLatency: r.latency.average,
    total,
    ok,
    non2xx: r.non2xx,
    errors: r.errors,
    timeouts: r.timeouts,
    statusCodes,
    durationS: r.duration,
  };
}
