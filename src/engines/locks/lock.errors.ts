import { DomainError } from '../../platform/core/domain.error';
import { RedisUnavailableError } from '../../platform/redis/redis-unavailable.error';

/** Someone else holds the lock and the wait ran out (409, with the time left on their lease). */
export class LockContendedError extends DomainError {
  readonly kind = 'conflict';

  constructor(
    readonly lockName: string,
    readonly remainingTtlMs: number,
  ) {
    super('LOCK_CONTENDED', `Lock ${lockName} is held by another owner (${remainingTtlMs} ms left on its lease)`, { remainingTtlMs }, remainingTtlMs);
  }
}

/** The caller does not hold the lock (any more): its lease ran out, or it never held it (409). */
export class LockLostError extends DomainError {
  readonly kind = 'conflict';

  constructor(
    readonly lockName: string,
    readonly owner: string,
  ) {
    super('LOCK_LOST', `Lock ${lockName} is not held by this owner (its lease may have expired)`);
  }
}

/** A reader asked to become the writer while it holds a read lock (409): it must release first. */
export class LockUpgradeRefusedError extends DomainError {
  readonly kind = 'conflict';

  constructor(readonly lockName: string) {
    super('LOCK_UPGRADE_REFUSED', `Lock ${lockName}: a reader cannot become the writer while it holds a read lock (release it first)`);
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
