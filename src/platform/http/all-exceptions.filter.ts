import { ArgumentsHost, Catch, ExceptionFilter, HttpException, HttpStatus, Logger } from '@nestjs/common';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { AppConfig } from '../config/app-config';
import { DomainError } from '../core/domain.error';
import { isRedisUnavailable } from '../redis/redis-unavailable.error';
import { ApiError, bracketIndexes } from './api.error';
import { ErrorBodyDto } from './error-body.dto';
import { retryAfterSeconds, STATUS_BY_KIND } from './status-by-kind';

const CODE_BY_STATUS: Record<number, string> = {
  400: 'BAD_REQUEST',
  401: 'UNAUTHORIZED',
  403: 'FORBIDDEN',
  404: 'NOT_FOUND',
  405: 'METHOD_NOT_ALLOWED',
  406: 'NOT_ACCEPTABLE',
  409: 'CONFLICT',
  413: 'PAYLOAD_TOO_LARGE',
  415: 'UNSUPPORTED_MEDIA_TYPE',
  422: 'UNPROCESSABLE_ENTITY',
  429: 'RATE_LIMITED',
  503: 'SERVICE_UNAVAILABLE',
};

/**
 * The router's errors (`frameworkErrors` in create-app.ts), whose own
 * messages quote the whole URL: each gets a fixed message instead.
 */
const FASTIFY_ERRORS: Record<string, { error: string; message: string }> = {
  FST_ERR_BAD_URL: { error: 'BAD_URL', message: 'The URL path is not valid: a percent-encoding is malformed' },
  FST_ERR_MAX_PARAM_LENGTH: { error: 'URI_TOO_LONG', message: 'A path parameter is longer than 512 characters' },
};

/** Longest message taken from an error the service did not word itself; such messages can quote the request. */
const MAX_FOREIGN_MESSAGE = 200;
const boundedMessage = (message: string): string => (message.length > MAX_FOREIGN_MESSAGE ? `${message.slice(0, MAX_FOREIGN_MESSAGE - 1)}…` : message);

function httpExceptionMessage(err: HttpException): string {
  const res = err.getResponse();
  if (typeof res === 'string') return res;
  const message = (res as { message?: unknown }).message;
  return Array.isArray(message) ? message.join('; ') : String(message ?? err.message);
}

/**
 * Details that name fields, each in the bracket notation (a module's own check may have spelled one
 * `products.1.productId`), with the message's mentions of the path spelled the same way.
 */
function inOneNotation(message: string, details: unknown): { message: string; details: unknown } {
  if (!Array.isArray(details)) return { message, details };
  let text = message;
  const named = details.map((d: unknown) => {
    const field = (d as { field?: unknown })?.field;
    if (typeof field !== 'string') return d;
    const bracketed = bracketIndexes(field);
    if (bracketed === field) return d;
    text = text.split(field).join(bracketed);
    return { ...(d as object), field: bracketed };
  });
  return { message: text, details: named };
}

export interface ErrorResponse {
  status: number;
  body: ErrorBodyDto;
  headers: Record<string, string>;
}

/**
 * Turns any thrown value into `{statusCode, error, message, details?, requestId}`.
 * Redis outages become 503 + Retry-After. Unknown errors become a bare 500 and
 * are logged with their stack; a stack never reaches the caller.
 */
export function toErrorResponse(err: unknown, requestId: string, retryAfterS: number, logger: Logger): ErrorResponse {
  const body = (status: number, error: string, rawMessage: string, rawDetails?: unknown): ErrorBodyDto => {
    const { message, details } = inOneNotation(rawMessage, rawDetails);
    return { statusCode: status, error, message, ...(details === undefined ? {} : { details }), requestId };
  };
  if (err instanceof ApiError) {
    return { status: err.getStatus(), body: body(err.getStatus(), err.code, err.message, err.details), headers: err.headers };
  }
  if (err instanceof DomainError) {
    const status = STATUS_BY_KIND[err.kind];
    const headers: Record<string, string> = err.retryAfterMs === undefined ? {} : { 'retry-after': retryAfterSeconds(err.retryAfterMs) };
    return { status, body: body(status, err.code, err.message, err.details), headers };
  }
  if (isRedisUnavailable(err)) {
    return {
      status: 503,
      body: body(503, 'REDIS_UNAVAILABLE', 'A backing store is unavailable; retry later'),
      headers: { 'retry-after': String(retryAfterS) },
    };
  }
  if (err instanceof HttpException) {
    const status = err.getStatus();
    return { status, body: body(status, CODE_BY_STATUS[status] ?? `HTTP_${status}`, boundedMessage(httpExceptionMessage(err))), headers: {} };
  }
  // Fastify's own errors (body too large, bad JSON, bad content type, bad URL) carry a 4xx statusCode.
  const fst = err as { statusCode?: number; code?: string; message?: string };
  if (typeof fst?.statusCode === 'number' && fst.statusCode >= 400 && fst.statusCode < 500) {
    const s = fst.statusCode;
    const known = FASTIFY_ERRORS[fst.code ?? ''];
    const message =
      known?.message ??
      (s === 413
        ? 'Request body is too large'
        : /JSON/.test(fst.message ?? '')
          ? 'Request body is not valid JSON'
          : boundedMessage(fst.message ?? 'Bad request'));
    return { status: s, body: body(s, known?.error ?? CODE_BY_STATUS[s] ?? `HTTP_${s}`, message), headers: {} };
  }
  logger.error({ err: err instanceof Error ? { message: err.message, stack: err.stack, name: err.name } : err, requestId }, 'unhandled error');
  return { status: 500, body: body(500, 'INTERNAL', 'Internal server error'), headers: {} };
}

@Catch()
export class AllExceptionsFilter implements ExceptionFilter {
  private readonly logger = new Logger('HttpError');

  constructor(private readonly config: AppConfig) {}

  catch(err: unknown, host: ArgumentsHost): void {
    const http = host.switchToHttp();
    const req = http.getRequest<FastifyRequest>();
    const reply = http.getResponse<FastifyReply>();
    const { status, body, headers } = toErrorResponse(err, String(req.id), this.config.redis.retryAfterS, this.logger);
    if (status >= HttpStatus.INTERNAL_SERVER_ERROR && status !== 503) this.logger.warn({ status, requestId: req.id }, 'request failed');
    void reply.status(status).headers(headers).send(body);
  }
}
