import { ApiError } from '../http/api-error';
import { RedisUnavailableError } from '../redis/redis-unavailable.error';

/** Someone else holds the lock and the wait ran out (409, with the time left on their lease). */
export class LockContendedError extends ApiError {
  constructor(
    readonly lockName: string,
    readonly remainingTtlMs: number,
  ) {
    super(409, 'LOCK_CONTENDED', `Lock ${lockName} is held by another owner (${remainingTtlMs} ms left on its lease)`, { remainingTtlMs }, {
      'retry-after': String(Math.max(1, Math.ceil(remainingTtlMs / 1000))),
    });
  }
}

/** The caller does not hold the lock (any more): its lease ran out, or it never held it (409). */
export class LockLostError extends ApiError {
  constructor(
    readonly lockName: string,
    readonly owner: string,
  ) {
    super(409, 'LOCK_LOST', `Lock ${lockName} is not held by this owner (its lease may have expired)`);
  }
}

/** Redis could not answer: the lock fails closed (503, like any Redis outage). */
export class LockUnavailableError extends RedisUnavailableError {
  constructor(
    readonly lockName: string,
    cause?: unknown,
  ) {
    super(cause);
    this.name = 'LockUnavailableError';
  }
}
