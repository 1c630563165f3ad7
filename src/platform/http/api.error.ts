import { HttpException } from '@nestjs/common';
import { stackless, stackRestored } from '../core/stackless';

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

/**
 * A field path in the one notation every 400 uses: array indexes in brackets (`products[1].productId`, never
 * `products.1.productId`), as validation names them.
 */
export const bracketIndexes = (field: string): string => field.replace(/\.(\d+)(?=[.[]|$)/g, '[$1]');

/** A field name as the caller sent it, cut short: an unknown field's name is input, and errors never echo unbounded input. */
const MAX_FIELD_NAME = 64;
export const boundedName = (name: string): string => (name.length > MAX_FIELD_NAME ? `${name.slice(0, MAX_FIELD_NAME)}…` : name);

/** Longest message of a 400 that lists failures: it lists them while they fit, then says how many more there are. */
export const MAX_LISTED_MESSAGE = 500;
/** Most failing fields one 400 names in `details` (the message counts the rest): the error never grows with the input. */
export const MAX_ERROR_DETAILS = 50;

/** `a; b; c`, cut after the last part that fits in `max` characters, then `; … and N more`. */
export function listedMessage(parts: string[], max = MAX_LISTED_MESSAGE): string {
  const all = parts.join('; ');
  if (all.length <= max) return all;
  let out = '';
  for (let i = 0; i < parts.length; i++) {
    const next = out ? `${out}; ${parts[i]}` : parts[i];
    const rest = parts.length - i - 1;
    const more = rest > 0 ? `; … and ${rest} more` : '';
    if (next.length + more.length > max) {
      // Nothing listed yet: the first part, cut (parts are short; this only bounds a pathological one).
      if (!out) return `${parts[i].slice(0, Math.max(0, max - more.length - 1))}…${more}`;
      return `${out}; … and ${rest + 1} more`;
    }
    out = next;
  }
  return out;
}
