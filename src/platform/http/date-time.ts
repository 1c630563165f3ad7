import { IsISO8601, Matches } from 'class-validator';

/**
 * A calendar date and time with a zone: IsISO8601 strict also allows a bare date, and week and ordinal dates
 * (2026-W48-3, 2026-332), which Date.parse cannot read.
 */
export const DATE_TIME_RE = /^\d{4}-\d\d-\d\dT\d\d:\d\d(:\d\d(\.\d{1,9})?)?(Z|[+-]\d\d:\d\d)$/;

/** A body field holding an ISO 8601 date and time with a time zone; the 400 names `field`. */
export const IsDateTime =
  (field: string) =>
  (target: object, key: string): void => {
    IsISO8601({ strict: true })(target, key);
    Matches(DATE_TIME_RE, { message: `${field} must be a date and time with a time zone, e.g. 2026-11-25T10:00:00+08:00` })(target, key);
  };
