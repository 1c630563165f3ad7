// Minimal typings for the parts of autocannon 9 the benchmarks use (the package ships none).
declare module 'autocannon' {
  import type { EventEmitter } from 'node:events';

  namespace autocannon {
    interface Client extends EventEmitter {
      setHeaders(headers: Record<string, string>): void;
      setBody(body: string | Buffer): void;
      setHeadersAndBody(headers: Record<string, string>, body: string | Buffer): void;
      /** Replaces the client's request list (each connection keeps its own). */
      setRequests(requests: Request[]): void;
    }

    /** One entry of `requests`: fixed fields, or `setupRequest` to build each request as it is sent. */
    interface Request {
      method?: string;
      path?: string;
      headers?: Record<string, string>;
      body?: string | Buffer;
      /** Called before each send of this entry with the defaults filled in; returns the request to send. */
      setupRequest?: (req: Request & { method: string; path: string; headers: Record<string, string> }, context: Record<string, unknown>) => Request;
    }

    interface Options {
      url: string;
      /** Sent in turn by every connection (each connection keeps its own place in the list). */
      requests?: Request[];
      connections?: number;
      duration?: number | string;
      amount?: number;
      timeout?: number;
      method?: string;
      title?: string;
      body?: string | Buffer;
      headers?: Record<string, string>;
      setupClient?: (client: Client) => void;
    }

    interface Histogram {
      average: number;
      p50: number;
      p99: number;
    }

    /** The fields lib/load.ts reads. */
    interface Result {
      requests: Histogram;
      latency: Histogram;
      duration: number;
      errors: number;
      timeouts: number;
      non2xx: number;
      '2xx': number;
      statusCodeStats: Record<string, { count: number }>;
    }

    interface Instance extends EventEmitter, PromiseLike<Result> {
      stop(): void;
    }
  }

  function autocannon(opts: autocannon.Options, cb?: (err: Error | null, result: autocannon.Result) => void): autocannon.Instance;
  export = autocannon;
}
