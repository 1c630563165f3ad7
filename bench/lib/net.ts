import { type Agent, request } from 'node:http';
import { connect } from 'node:net';

export { freePort } from '../../test/harness/free-port';

/** Resolves once 127.0.0.1:port accepts a TCP connection. `check` may abort early (e.g. the process died). */
export function waitForPort(port: number, timeoutMs: number, check: () => void = () => undefined): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  return new Promise((resolve, reject) => {
    const attempt = () => {
      try {
        check();
      } catch (err) {
        reject(err as Error);
        return;
      }
      const s = connect(port, '127.0.0.1');
      s.once('connect', () => {
        s.end();
        resolve();
      });
      s.once('error', () => {
        s.destroy();
        if (Date.now() > deadline) reject(new Error(`port ${port} not open after ${timeoutMs} ms`));
        else setTimeout(attempt, 50);
      });
    };
    attempt();
  });
}

export interface HttpAnswer {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  body: string;
}

/** One HTTP request: on `agent` (default: none, no keep-alive), for probes, smoke checks and fixtures. */
export function httpRequest(
  url: string,
  opts: { method?: string; headers?: Record<string, string>; body?: string; timeoutMs?: number; agent?: Agent } = {},
): Promise<HttpAnswer> {
  const timeout = opts.timeoutMs ?? 5000;
  return new Promise((resolve, reject) => {
    const req = request(url, { method: opts.method ?? 'GET', headers: opts.headers, agent: opts.agent ?? false, timeout }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body: Buffer.concat(chunks).toString('utf8') }));
      res.on('error', reject);
    });
    req.on('timeout', () => req.destroy(new Error(`timeout after ${timeout} ms: ${opts.method ?? 'GET'} ${url}`)));
    req.on('error', reject);
    req.end(opts.body);
  });
}

/** Polls `url` until it answers 2xx. */
export async function waitForHttpOk(url: string, timeoutMs: number, check: () => void = () => undefined): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  let last: string;
  for (;;) {
    check();
    try {
      const r = await httpRequest(url, { timeoutMs: 1000 });
      if (r.status >= 200 && r.status < 300) return;
      last = `${r.status} ${r.body.slice(0, 200)}`;
    } catch (err) {
      last = (err as Error).message;
    }
    if (Date.now() > deadline) throw new Error(`${url} not ready after ${timeoutMs} ms (last: ${last})`);
    await new Promise((r) => setTimeout(r, 100));
  }
}
