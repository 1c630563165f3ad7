// Minimal typings for the parts of autocannon 9 the benchmarks use (the package ships none).
declare module 'autocannon' {
  import type { EventEmitter } from 'node:events';

  namespace autocannon {
    interface Client extends EventEmitter {
      /** Replaces the client's request list (each connection keeps its own). */
      setRequests(requests: Request[]): void;
    }

    /** One request: fixed fields, or `setupRequest` to build each request as it is sent. */
    interface Request {
      method?: string;
      path?: string;
      headers?: Record<string, string>;
      body?: string | Buffer;
      setupRequest?: (req: Request & { method: string; path: string; headers: Record<string, string> }, context: Record<string, unknown>) => Request;
    }

    interface Options extends Request {
      url: string;
      requests?: Request[];
      connections?: number;
      duration?: number | string;
      amount?: number;
      timeout?: number;
      title?: string;
      setupClient?: (client: Client) => void;
    }

    /** The fields lib/load.ts reads. */
    type Result = Record<'duration' | 'errors' | 'non2xx' | '2xx', number> & {
      requests: { average: number };
      latency: { p50: number; p99: number };
      statusCodeStats: Record<string, { count: number }>;
    };

    interface Instance extends EventEmitter, PromiseLike<Result> {
      stop(): void;
    }
  }

  function autocannon(opts: autocannon.Options): autocannon.Instance;
  export = autocannon;
}
