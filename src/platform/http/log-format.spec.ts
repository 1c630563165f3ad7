import { Transform, Writable } from 'node:stream';
import type { FastifyReply, FastifyRequest } from 'fastify';
import pino from 'pino';
import type { AppConfig } from '../config/app-config';
import { AccessLogController, logFormat, prettyDestination, serviceLogger } from './logging';

const config = (env: AppConfig['env']) => ({ env, logLevel: 'info' }) as AppConfig;
const streamOf = (log: pino.Logger) => (log as unknown as Record<symbol, unknown>)[pino.symbols.streamSym];

describe('log format: readable lines for a person at a terminal in development, JSON otherwise', () => {
  it.each([
    ['development', true, 'pretty'],
    ['test', true, 'pretty'],
    ['development', false, 'json'],
    ['development', undefined, 'json'],
    ['production', true, 'json'],
    ['production', false, 'json'],
  ] as const)('%s, stdout a terminal: %s → %s', (env, tty, format) => {
    expect(logFormat(env, tty)).toBe(format);
  });

  it('the service logger writes through pino-pretty on a terminal in development, and not in production or to a pipe', () => {
    expect(streamOf(serviceLogger(config('development'), true))).toBeInstanceOf(Transform);
    expect(streamOf(serviceLogger(config('production'), true))).not.toBeInstanceOf(Transform);
    expect(streamOf(serviceLogger(config('development'), false))).not.toBeInstanceOf(Transform);
  });

  it('pretty lines are readable: level, message and fields, no JSON; the access line included', () => {
    let out = '';
    const sink = new Writable({
      write(chunk: Buffer, _enc, done) {
        out += chunk.toString();
        done();
      },
    });
    const log = pino({ base: { service: 'redis-pay' } }, prettyDestination(sink));
    log.warn({ queue: 'order-close' }, 'item moved to dead-letter');
    const request = { id: 'req-1', method: 'GET', url: '/wallet', routeOptions: { url: '/wallet' } } as unknown as FastifyRequest;
    new AccessLogController(log).logRequest(undefined, request, { statusCode: 200 } as FastifyReply, 1.5);
    const lines = out.trim().split('\n');
    expect(lines[0]).toMatch(/WARN.*item moved to dead-letter/);
    expect(out).toMatch(/queue: "order-close"/);
    expect(out).toMatch(/INFO.*request completed/);
    expect(out).toMatch(/statusCode: 200/);
    expect(lines.every((l) => !l.startsWith('{'))).toBe(true);
  });
});
