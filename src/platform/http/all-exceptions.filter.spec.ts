import { ArgumentsHost, BadRequestException, ForbiddenException, HttpException, Logger, NotFoundException } from '@nestjs/common';
import { ReplyError } from 'ioredis';
import { MaxRetriesPerRequestError } from 'ioredis/built/errors';
import { loadConfig } from '../config/load-config';
import { RedisUnavailableError } from '../redis/redis-unavailable.error';
import { ScriptCode, scriptErrorFor } from '../scripts/script.errors';
import { AllExceptionsFilter, toErrorResponse } from './all-exceptions.filter';
import { DomainError, ForbiddenError, RateLimitedError, UnauthenticatedError } from '../core/domain.error';
import { ApiError } from './api.error';

const RID = 'req-7f3a';
const RETRY_AFTER = 7;
/** A V8 stack frame line, e.g. "    at Object.<anonymous> (/x.ts:1:2)". */
const STACK_FRAME = /\bat \S+ \(|\n\s+at /;

const fakeLogger = () => ({ error: jest.fn(), warn: jest.fn(), log: jest.fn() });
const respond = (err: unknown, logger = fakeLogger()) => toErrorResponse(err, RID, RETRY_AFTER, logger as unknown as Logger);

const withProps = <T extends Error>(err: T, props: Record<string, unknown>): T => Object.assign(err, props);

describe(toErrorResponse.name, () => {
  describe('ApiError', () => {
    it('uses its status, code, message, details and headers', () => {
      const err = new ApiError(429, 'RATE_LIMITED', 'Slow down', { limit: 50 }, { 'retry-after': '3' });
      expect(respond(err)).toEqual({
        status: 429,
        body: { statusCode: 429, error: 'RATE_LIMITED', message: 'Slow down', details: { limit: 50 }, requestId: RID },
        headers: { 'retry-after': '3' },
      });
    });

    it('omits details when there are none', () => {
      const { status, body, headers } = respond(new ApiError(404, 'NOT_FOUND', 'Bearer token has expired'));
      expect(status).toBe(404);
      expect(body).toEqual({ statusCode: 404, error: 'NOT_FOUND', message: 'Bearer token has expired', requestId: RID });
      expect('details' in body).toBe(false);
      expect(headers).toEqual({});
    });
  });

  describe('DomainError', () => {
    class Paid extends DomainError {
      readonly kind = 'conflict' as const;
    }
    class Busy extends DomainError {
      readonly kind = 'limit' as const;
    }

    it.each([
      ['not-found', 404],
      ['conflict', 409],
      ['invalid', 400],
      ['limit', 429],
      ['unavailable', 503],
      ['unauthenticated', 401],
      ['forbidden', 403],
    ] as const)('maps the kind %s to %i, the one place a kind becomes a status', (kind, status) => {
      class Some extends DomainError {
        readonly kind = kind;
      }
      const r = respond(new Some('SOME_CODE', 'Something'));
      expect(r.status).toBe(status);
      expect(r.body).toEqual({ statusCode: status, error: 'SOME_CODE', message: 'Something', requestId: RID });
    });

    it('carries its code, details, and Retry-After in whole seconds', () => {
      expect(respond(new Paid('ORDER_PAID', 'The order is paid', { orderId: 'o1' }))).toEqual({
        status: 409,
        body: { statusCode: 409, error: 'ORDER_PAID', message: 'The order is paid', details: { orderId: 'o1' }, requestId: RID },
        headers: {},
      });
      expect(respond(new Busy('SOLD_OUT_RETRY', 'Try again', undefined, 1200)).headers).toEqual({ 'retry-after': '2' });
      expect(respond(new Busy('SOLD_OUT_RETRY', 'Try again', undefined, 10)).headers).toEqual({ 'retry-after': '1' });
    });

    it('answers the platform refusals as their helpers in the HTTP layer once did: 401, 403 and 429 with Retry-After', () => {
      expect(respond(new UnauthenticatedError('Bearer token has expired'))).toEqual({
        status: 401,
        body: { statusCode: 401, error: 'UNAUTHORIZED', message: 'Bearer token has expired', requestId: RID },
        headers: {},
      });
      expect(respond(new ForbiddenError('Not for you'))).toEqual({
        status: 403,
        body: { statusCode: 403, error: 'FORBIDDEN', message: 'Not for you', requestId: RID },
        headers: {},
      });
      expect(respond(new RateLimitedError('Slow down', 2500))).toEqual({
        status: 429,
        body: { statusCode: 429, error: 'RATE_LIMITED', message: 'Slow down', requestId: RID },
        headers: { 'retry-after': '3' },
      });
    });
  });

  describe('ScriptError', () => {
    it.each<[ScriptCode, number, string]>([
      [ScriptCode.NOT_FOUND, 404, 'NOT_FOUND'],
      [ScriptCode.ALREADY_EXISTS, 409, 'ALREADY_EXISTS'],
      [ScriptCode.CONFLICT, 409, 'CONFLICT'],
      [ScriptCode.LIMIT_EXCEEDED, 429, 'LIMIT_EXCEEDED'],
      [ScriptCode.INVALID_STATE, 409, 'INVALID_STATE'],
      [ScriptCode.INVALID_ARGUMENT, 400, 'INVALID_ARGUMENT'],
    ])('code %i → %i with the code name as error', (code, status, name) => {
      const err = scriptErrorFor('seckill.buy', code);
      const r = respond(err);
      expect(r.status).toBe(status);
      expect(r.body).toEqual({ statusCode: status, error: name, message: err.message, requestId: RID });
      expect(r.headers).toEqual({});
    });

    it('an unknown script code is a 500', () => {
      const r = respond(scriptErrorFor('seckill.buy', -99));
      expect(r.status).toBe(500);
      expect(r.body.statusCode).toBe(500);
      expect(r.body.requestId).toBe(RID);
    });
  });

  describe('Redis unavailable → 503 with Retry-After', () => {
    const econnrefused = withProps(new Error('connect ECONNREFUSED 10.1.2.3:6379'), { code: 'ECONNREFUSED', errno: -111, syscall: 'connect' });

    it.each<[string, unknown]>([
      ['RedisUnavailableError', new RedisUnavailableError(new Error('Command timed out'))],
      ['ioredis command timeout', new Error('Command timed out')],
      ['ioredis closed connection', new Error('Connection is closed.')],
      ['a wrapped ECONNREFUSED', new RedisUnavailableError(econnrefused)],
      ['a BUSY reply', new ReplyError('BUSY Redis is busy running a script. You can only call SCRIPT KILL or SHUTDOWN NOSCRIPT.')],
      ['an OOM reply (noeviction, memory full)', new ReplyError("OOM command not allowed when used memory > 'maxmemory'.")],
      ['a MISCONF reply', new ReplyError('MISCONF Errors writing to the AOF file')],
      ['an aborted auto-pipelined command', new Error('Command aborted due to connection close')],
      ['ioredis MaxRetriesPerRequestError', new MaxRetriesPerRequestError(1)],
      ['a LOADING reply', new ReplyError('LOADING Redis is loading the dataset in memory')],
      ['a CLUSTERDOWN reply', new ReplyError('CLUSTERDOWN The cluster is down')],
    ])('%s', (_label, err) => {
      const logger = fakeLogger();
      const r = respond(err, logger);
      expect(r.status).toBe(503);
      expect(r.body).toEqual({
        statusCode: 503,
        error: 'REDIS_UNAVAILABLE',
        message: 'A backing store is unavailable; retry later',
        requestId: RID,
      });
      expect(r.headers).toEqual({ 'retry-after': String(RETRY_AFTER) });
    });

    it('a socket error from another dependency is not a Redis outage (500, not 503 REDIS_UNAVAILABLE)', () => {
      expect(respond(econnrefused).status).toBe(500);
      expect(respond(withProps(new Error('socket failure'), { code: 'ECONNRESET' })).status).toBe(500);
    });

    it('does not leak the Redis address or stack', () => {
      const json = JSON.stringify(respond(new RedisUnavailableError(econnrefused)).body);
      expect(json).not.toContain('10.1.2.3');
      expect(json).not.toMatch(STACK_FRAME);
    });

    it('a Redis command error that is not an outage is a 500, not a 503', () => {
      const r = respond(new ReplyError("ERR wrong number of arguments for 'get' command"));
      expect(r.status).toBe(500);
      expect(r.headers).toEqual({});
    });
  });

  describe('Nest HttpException', () => {
    it.each<[string, HttpException, number, string, string]>([
      ['NotFoundException', new NotFoundException('No such order'), 404, 'NOT_FOUND', 'No such order'],
      ['ForbiddenException', new ForbiddenException(), 403, 'FORBIDDEN', 'Forbidden'],
      ['BadRequestException with a list', new BadRequestException(['a is bad', 'b is bad']), 400, 'BAD_REQUEST', 'a is bad; b is bad'],
      ['string response', new HttpException('I am a teapot', 418), 418, 'HTTP_418', 'I am a teapot'],
      ['object response', new HttpException({ message: 'Too many' }, 429), 429, 'RATE_LIMITED', 'Too many'],
    ])('%s', (_label, err, status, code, message) => {
      const r = respond(err);
      expect(r.status).toBe(status);
      expect(r.body).toEqual({ statusCode: status, error: code, message, requestId: RID });
      expect(r.headers).toEqual({});
    });
  });

  describe('Fastify errors with a 4xx statusCode', () => {
    it('413 → PAYLOAD_TOO_LARGE with a fixed message', () => {
      const err = withProps(new Error('Request body is too large'), { statusCode: 413, code: 'FST_ERR_CTP_BODY_TOO_LARGE' });
      expect(respond(err)).toEqual({
        status: 413,
        body: { statusCode: 413, error: 'PAYLOAD_TOO_LARGE', message: 'Request body is too large', requestId: RID },
        headers: {},
      });
    });

    it("400 invalid JSON → BAD_REQUEST without the parser's details", () => {
      const err = withProps(new SyntaxError('Unexpected token } in JSON at position 12'), { statusCode: 400, code: 'FST_ERR_CTP_INVALID_JSON_BODY' });
      const r = respond(err);
      expect(r.status).toBe(400);
      expect(r.body).toEqual({ statusCode: 400, error: 'BAD_REQUEST', message: 'Request body is not valid JSON', requestId: RID });
    });

    it('400 JSON error recognised by message alone', () => {
      const err = withProps(new SyntaxError('Unexpected end of JSON input'), { statusCode: 400 });
      expect(respond(err).body.message).toBe('Request body is not valid JSON');
    });

    it("415 keeps Fastify's message", () => {
      const err = withProps(new Error('Unsupported Media Type: text/csv'), { statusCode: 415, code: 'FST_ERR_CTP_INVALID_MEDIA_TYPE' });
      const r = respond(err);
      expect(r.status).toBe(415);
      expect(r.body).toEqual({ statusCode: 415, error: 'UNSUPPORTED_MEDIA_TYPE', message: 'Unsupported Media Type: text/csv', requestId: RID });
    });

    it('a 5xx statusCode is not trusted: generic 500', () => {
      const err = withProps(new Error('plugin crashed at /srv/app'), { statusCode: 502 });
      const r = respond(err);
      expect(r.status).toBe(500);
      expect(r.body.message).toBe('Internal server error');
    });
  });

  describe('unknown errors', () => {
    it('become a bare 500 with no stack or internal message in the body', () => {
      const err = new Error('db password is hunter2');
      expect(err.stack).toMatch(STACK_FRAME); // the assertion below could fail
      const logger = fakeLogger();
      const r = respond(err, logger);
      expect(r.status).toBe(500);
      expect(r.headers).toEqual({});
      expect(r.body).toEqual({ statusCode: 500, error: 'INTERNAL', message: 'Internal server error', requestId: RID });
      const json = JSON.stringify(r.body);
      expect(json).not.toMatch(STACK_FRAME);
      expect(json).not.toContain('at ');
      expect(json).not.toContain('hunter2');
      expect(json).not.toContain(__filename);
    });

    it('are logged once with their stack and the request id', () => {
      const err = new TypeError('boom');
      const logger = fakeLogger();
      respond(err, logger);
      expect(logger.error).toHaveBeenCalledTimes(1);
      const [context] = logger.error.mock.calls[0] as [{ err: { message: string; stack: string; name: string }; requestId: string }];
      expect(context.requestId).toBe(RID);
      expect(context.err).toEqual({ message: 'boom', stack: err.stack, name: 'TypeError' });
    });

    it('known errors are not logged as unhandled', () => {
      const logger = fakeLogger();
      respond(new NotFoundException(), logger);
      respond(new Error('Command timed out'), logger);
      respond(new UnauthenticatedError('x'), logger);
      respond(scriptErrorFor('s', ScriptCode.NOT_FOUND), logger);
      expect(logger.error).not.toHaveBeenCalled();
    });

    it.each<[string, unknown]>([
      ['a string', 'oops'],
      ['null', null],
      ['undefined', undefined],
      ['a number', 42],
      ['a plain object', { message: 'Command timed out' }],
      ['an object with a bad statusCode', { statusCode: '404' }],
    ])('non-Error thrown (%s) → 500', (_label, thrown) => {
      const r = respond(thrown);
      expect(r.status).toBe(500);
      expect(r.body).toEqual({ statusCode: 500, error: 'INTERNAL', message: 'Internal server error', requestId: RID });
    });
  });

  it.each<[string, unknown]>([
    ['ApiError', new ApiError(401, 'UNAUTHORIZED', 'x')],
    ['DomainError', new UnauthenticatedError('x')],
    ['ScriptError', scriptErrorFor('s', ScriptCode.NOT_FOUND)],
    ['RedisUnavailableError', new RedisUnavailableError()],
    ['HttpException', new NotFoundException()],
    ['Fastify error', withProps(new Error('too large'), { statusCode: 413 })],
    ['Error', new Error('x')],
    ['string', 'x'],
  ])('always carries the requestId (%s)', (_label, err) => {
    const { body } = toErrorResponse(err, 'rid-unique-123', 1, fakeLogger() as unknown as Logger);
    expect(body.requestId).toBe('rid-unique-123');
  });
});

describe(AllExceptionsFilter.name, () => {
  it('sends the mapped status, headers and body with the request id and configured Retry-After', () => {
    const config = loadConfig({ NODE_ENV: 'test', REDIS_RETRY_AFTER_S: '4' });
    const filter = new AllExceptionsFilter(config);
    const reply = { status: jest.fn(), headers: jest.fn(), send: jest.fn() };
    reply.status.mockReturnValue(reply);
    reply.headers.mockReturnValue(reply);
    const host = {
      switchToHttp: () => ({ getRequest: () => ({ id: 'req-99' }), getResponse: () => reply }),
    } as unknown as ArgumentsHost;

    filter.catch(new Error('Connection is closed.'), host);

    expect(reply.status).toHaveBeenCalledWith(503);
    expect(reply.headers).toHaveBeenCalledWith({ 'retry-after': '4' });
    expect(reply.send).toHaveBeenCalledWith({
      statusCode: 503,
      error: 'REDIS_UNAVAILABLE',
      message: 'A backing store is unavailable; retry later',
      requestId: 'req-99',
    });
  });
});
