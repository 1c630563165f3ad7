import { stackless, stackRestored } from './stackless';

/**
 * What went wrong, in the domain's words. Modules declare their own errors as
 * subclasses (with a stable `code`, e.g. `ORDER_PAID`), with no HTTP in them;
 * the exception filter is the one place that turns a kind into a status.
 */
export type ErrorKind =
  /** The thing asked for does not exist, or is not the caller's (the two are not told apart). */
  | 'not-found'
  /** The current state does not allow the operation (409). */
  | 'conflict'
  /** An argument is not acceptable (400). */
  | 'invalid'
  /** Over a limit; `retryAfterMs` says when to come back (429). */
  | 'limit'
  /** A dependency cannot answer now; retrying is safe (503). */
  | 'unavailable';

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

/** The HTTP status of each kind: read only by the exception filter. */
export const STATUS_BY_KIND: Record<ErrorKind, number> = {
  'not-found': 404,
  conflict: 409,
  invalid: 400,
  limit: 429,
  unavailable: 503,
};

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
