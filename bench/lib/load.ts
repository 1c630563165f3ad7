import autocannon from 'autocannon';

/** One request: `method` by default LoadOptions.method, `path` (and query) the URL's, no `body` (or '') none. */
export type LoadRequest = { headers: Record<string, string>; body?: string; method?: string; path?: string };

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
  /** Called when the run starts (e.g. to sample CPU). */
  onStart?: () => void;
}

/** `rps`: the mean of autocannon's per-second counts; `okPerSecond`: 2xx answers per second over the whole run. */
export type LoadSummary = Record<'rps' | 'okPerSecond' | 'p50' | 'p99' | 'total' | 'ok' | 'non2xx' | 'errors' | 'durationS', number> & {
  statusCodes: Record<string, number>;
};

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
