import type { FastifyReply, FastifyRequest } from 'fastify';
import pino from 'pino';
import { AccessLogController } from './logging';

/** A pino logger set up as the service's (base, level) whose lines land in an array. */
function capturingLogger(level = 'info') {
  const lines: string[] = [];
  const log = pino({ level, base: { service: 'redis-pay' } }, { write: (l: string) => void lines.push(l) });
  return { log, lines };
}

function completed(log: pino.Logger, fields: { id: string; method: string; url: string; route?: string; status: number; elapsed: number; caller?: object }) {
  const request = {
    id: fields.id,
    method: fields.method,
    url: fields.url,
    routeOptions: { url: fields.route },
    caller: fields.caller,
  } as unknown as FastifyRequest;
  const reply = { statusCode: fields.status } as unknown as FastifyReply;
  new AccessLogController(log).logRequest(undefined, request, reply, fields.elapsed);
}

describe('the access line of a completed request', () => {
  const cases = [
    {
      id: 'req-1',
      method: 'POST',
      url: '/diagnostics/touch',
      route: '/diagnostics/touch',
      status: 200,
      elapsed: 1.23456,
      caller: { kind: 'user', id: 'acc_1' },
    },
    {
      id: 'b3c1d2e4-0000-4000-8000-000000000001',
      method: 'GET',
      url: '/health/live',
      route: '/health/live',
      status: 204,
      elapsed: 0.1,
      caller: { kind: 'anonymous', id: '127.0.0.1' },
    },
    {
      id: 'x',
      method: 'GET',
      url: '/messages?after="q\\\\x"&t=\u0001\u2028é🙂',
      route: '/messages',
      status: 200,
      elapsed: 12,
      caller: { kind: 'merchant', id: 'm"1' },
    },
    { id: 'y', method: 'GET', url: '/nowhere', route: undefined, status: 302, elapsed: 0, caller: undefined },
  ];

  it.each(cases)('is the line pino writes for the same fields ($url)', (c) => {
    const ours = capturingLogger();
    completed(ours.log, c);
    const theirs = capturingLogger();
    const caller = c.caller && c.caller.kind !== 'anonymous' ? `${c.caller.kind}:${c.caller.id}` : undefined;
    const fields = {
      requestId: c.id,
      method: c.method,
      url: c.url,
      route: c.route,
      statusCode: c.status,
      responseTimeMs: Math.round(c.elapsed * 100) / 100,
      caller,
    };
    theirs.log.info(fields, 'request completed');
    expect(ours.lines).toHaveLength(1);
    expect(ours.lines[0].endsWith('}\n')).toBe(true);
    const strip = (line: string) => ({ ...(JSON.parse(line) as Record<string, unknown>), time: 0 });
    expect(strip(ours.lines[0])).toEqual(strip(theirs.lines[0]));
    // The same keys in the same order: level, time, pid, hostname, service, then the request's fields, then msg.
    expect(Object.keys(JSON.parse(ours.lines[0]) as object)).toEqual(Object.keys(JSON.parse(theirs.lines[0]) as object));
  });

  it('is not written above info level, and failures still go through pino at warn and error', () => {
    const quiet = capturingLogger('warn');
    completed(quiet.log, { ...cases[0] });
    expect(quiet.lines).toEqual([]);
    completed(quiet.log, { ...cases[0], status: 404 });
    completed(quiet.log, { ...cases[0], status: 503 });
    expect(quiet.lines.map((l) => (JSON.parse(l) as { level: number; msg: string }).msg)).toEqual(['request rejected', 'request failed']);
  });
});
