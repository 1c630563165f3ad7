import { stackless, stackRestored } from './stackless';

/**
 * What went wrong, in the domain's words. Modules declare their own errors as
 * subclasses (with a stable `code`, e.g. `ORDER_PAID`), with no HTTP in them;
 * the HTTP layer is the one place that turns a kind into a status
 * (src/platform/http/status-by-kind.ts).
 */
export type ErrorKind =
  /** The thing asked for does not exist, or is not the caller's (the two are not told apart). */
  | 'not-found'
  /** The current state does not allow the operation. */
  | 'conflict'
  /** An argument is not acceptable. */
  | 'invalid'
  /** Over a limit; `retryAfterMs`, when given, says when to come back. */
  | 'limit'
  /** A dependency cannot answer now; retrying is safe. */
  | 'unavailable'
  /** The caller's credentials are missing or not valid. */
  | 'unauthenticated'
  /** The caller is known but may not do this. */
  | 'forbidden';

/** Carries no stack (see stackless.ts): it is an answer, never logged as a failure. */
export abstract class DomainError extends Error {
  abstract readonly kind: ErrorKind;

  constructor(
    /** Stable, machine-readable: the `error` field of the response body. */
    readonly code: string,
    message: string,
    /** Extra facts for the caller (the `details` field). */
    readonly details?: unknown,
    /** For `limit` and `unavailable`: when a retry may succeed. */
    readonly retryAfterMs?: number,
  ) {
    super(stackless(message));
    stackRestored();
    this.name = new.target.name;
  }
}

/**
 * An argument an in-process caller passed is not acceptable (kind `invalid`):
 * code VALIDATION_FAILED, and with `field`, the details name it in the
 * validation pipe's shape. Nothing was stored.
 */
export class InvalidArgumentError extends DomainError {
  readonly kind = 'invalid';

  /** `field`: the field named, with `fieldError`; or every field named, with its errors (as the validation pipe's details). */
  constructor(message: string, field?: string | readonly { field: string; errors: string[] }[], fieldError = message, code = 'VALIDATION_FAILED') {
    super(code, message, field === undefined ? undefined : typeof field === 'string' ? [{ field, errors: [fieldError] }] : field);
  }
}

/** Credentials are missing, malformed, expired or do not match (kind `unauthenticated`, code UNAUTHORIZED). */
export class UnauthenticatedError extends DomainError {
  readonly kind = 'unauthenticated';

  constructor(message: string) {
    super('UNAUTHORIZED', message);
  }
}

/** A known caller of a kind the operation is not for (kind `forbidden`, code FORBIDDEN). */
export class ForbiddenError extends DomainError {
  readonly kind = 'forbidden';

  constructor(message: string) {
    super('FORBIDDEN', message);
  }
}

/** Too many requests, or failed attempts, in a window (kind `limit`, code RATE_LIMITED); `resetMs`: when the window lets the caller in again. */
export class RateLimitedError extends DomainError {
  readonly kind = 'limit';

  constructor(message: string, resetMs: number) {
    super('RATE_LIMITED', message, undefined, resetMs);
  }
}
