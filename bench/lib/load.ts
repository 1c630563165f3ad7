import autocannon from 'autocannon';

export interface LoadRequest {
  headers: Record<string, string>;
  /** Omitted or '' for none (no Content-Length either). */
  body?: string;
  /** Default: LoadOptions.method. */
  method?: string;
  /** Path and query; default: the path of LoadOptions.url. */
  path?: string;
}

export interface LoadOptions {
  url: string;
  method?: string;
  connections: number;
  durationS: number;
  /** Send this many requests, then stop (instead of after durationS). */
  amount?: number;
  /**
   * An array: each connection gets one of these, round-robin by connection, and sends it again and again (one account
   * per connection). A function: called for every request sent, by any connection, so each request can differ.
   */
  requests: LoadRequest[] | (() => LoadRequest);
  title?: string;
  /** Called when the measured run starts (e.g. to sample CPU). */
  onStart?: () => void;
}

export interface LoadSummary {
  /** Mean of the per-second request counts, as autocannon reports it. */
  rps: number;
  /** 2xx responses per second over the whole run. */
  okPerSecond: number;
  p50: number;
  p99: number;
  total: number;
  ok: number;
  non2xx: number;
  errors: number;
  statusCodes: Record<string, number>;
  durationS: number;
}

/** Runs autocannon in this process (the server under test runs in its own process). */
export async function runLoad(opts: LoadOptions): Promise<LoadSummary> {
  const { requests } = opts;
  // Not a call of a request function: that would use up a request (an id, a plan) that is never sent.
  const first: LoadRequest = Array.isArray(requests) ? requests[0] : { headers: {} };
  if (!first) throw new Error('runLoad needs at least one request');
  const method = first.method ?? opts.method ?? 'POST';
  const as = (r: LoadRequest) => ({
    method: r.method ?? method,
    ...(r.path === undefined ? {} : { path: r.path }),
    headers: { ...r.headers },
    body: r.body ?? '',
  });
  let next = 0;
  const instance = autocannon({
    url: opts.url,
    method,
    connections: opts.connections,
    duration: opts.durationS,
    ...(opts.amount ? { amount: opts.amount } : {}),
    timeout: 10,
    title: opts.title,
    headers: first.headers,
    body: first.body ?? '',
    ...(Array.isArray(requests)
      ? { setupClient: (client: autocannon.Client) => client.setRequests([as(requests[next++ % requests.length])]) }
      : // A copy of the headers: autocannon writes Content-Length into the object it is given.
        { requests: [{ setupRequest: (req: autocannon.Request) => ({ ...req, ...as(requests()) }) }] }),
  });
  instance.on('start', () => opts.onStart?.());
  const r = await instance;
  const statusCodes = Object.fromEntries(Object.entries(r.statusCodeStats ?? {}).map(([code, { count }]) => [code, Number(count)]));
  return {
    rps: r.requests.average,
    okPerSecond: r.duration > 0 ? r['2xx'] / r.duration : 0,
    p50: r.latency.p50,
    p99: r.latency.p99,
    total: Object.values(statusCodes).reduce((a, b) => a + b, 0),
    ok: r['2xx'],
    non2xx: r.non2xx,
    errors: r.errors,
    statusCodes,
    durationS: r.duration,
  };
}
