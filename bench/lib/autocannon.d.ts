// Minimal typings for the parts of autocannon 9 the benchmarks use (the package ships none).
declare module 'autocannon' {
  import type { EventEmitter } from 'node:events';

  namespace autocannon {
    interface Client extends EventEmitter {
      setHeaders(headers: Record<string, string>): void;
      setBody(body: string | Buffer): void;
      setHeadersAndBody(headers: Record<string, string>, body: string | Buffer): void;
    }

    interface Options {
      url: string;
      connections?: number;
      duration?: number | string;
      amount?: number;
      timeout?: number;
      pipelining?: number;
      method?: string;
      title?: string;
      body?: string | Buffer;
      headers?: Record<string, string>;
      setupClient?: (client: Client) => void;
      excludeErrorStats?: boolean;
    }

    interface Histogram {
      min: number;
      max: number;
      average: number;
      mean: number;
      stddev: number;
      total: number;
      p2_5: number;
      p50: number;
      p75: number;
      p90: number;
      p97_5: number;
      p99: number;
      p99_9: number;
    }

    interface Result {
      title?: string;
      url: string;
      requests: Histogram;
      latency: Histogram;
      throughput: Histogram;
      duration: number;
      errors: number;
      timeouts: number;
      mismatches: number;
      non2xx: number;
      resets: number;
      start: Date;
      finish: Date;
      connections: number;
      pipelining: number;
      '1xx': number;
      '2xx': number;
      '3xx': number;
      '4xx': number;
      '5xx': number;
      statusCodeStats: Record<string, { count: number }>;
    }

    interface Instance extends EventEmitter, PromiseLike<Result> {
      stop(): void;
    }
  }

  function autocannon(opts: autocannon.Options, cb?: (err: Error | null, result: autocannon.Result) => void): autocannon.Instance;
  export = autocannon;
}
