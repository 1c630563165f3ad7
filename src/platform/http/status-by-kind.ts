import type { ErrorKind } from '../core/domain.error';

/**
 * The HTTP status of each kind of domain error: the one place a domain error
 * becomes a status (read by the exception filter; the body's `error` is the
 * error's own `code`). Below HTTP, errors carry a kind, never a status.
 */
export const STATUS_BY_KIND: Readonly<Record<ErrorKind, number>> = {
  invalid: 400,
  unauthenticated: 401,
  forbidden: 403,
  'not-found': 404,
  conflict: 409,
  limit: 429,
  unavailable: 503,
};

/** `Retry-After` for a wait of `ms`: whole seconds, at least 1. */
export const retryAfterSeconds = (ms: number): string => String(Math.max(1, Math.ceil(ms / 1000)));
