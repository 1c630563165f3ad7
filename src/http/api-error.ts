import { HttpException } from '@nestjs/common';
import { stackless, stackRestored } from '../errors/stackless';

/** An HTTP error with a stable machine-readable code and optional details; no stack (see errors/stackless.ts). */
export class ApiError extends HttpException {
  constructor(
    status: number,
    readonly code: string,
    message: string,
    readonly details?: unknown,
    /** Extra response headers, e.g. Retry-After. */
    readonly headers: Record<string, string> = {},
  ) {
    super(stackless(message), status);
    stackRestored();
  }
}

/** A 400 about one field, shaped as the class-validator failures are. */
export const fieldError = (field: string, message: string) => new ApiError(400, 'VALIDATION_FAILED', message, [{ field, errors: [message] }]);

/** A field name as the caller sent it, cut short: an unknown field's name is input, and errors never echo unbounded input. */
const MAX_FIELD_NAME = 64;
export const boundedName = (name: string): string => (name.length > MAX_FIELD_NAME ? `${name.slice(0, MAX_FIELD_NAME)}…` : name);

export const unauthorized = (message: string) => new ApiError(401, 'UNAUTHORIZED', message);
export const forbidden = (message: string) => new ApiError(403, 'FORBIDDEN', message);

/** 429 with Retry-After: whole seconds until `resetMs` has passed (at least 1). */
export const rateLimited = (message: string, resetMs: number) =>
  new ApiError(429, 'RATE_LIMITED', message, undefined, { 'retry-after': String(Math.max(1, Math.ceil(resetMs / 1000))) });
