import { DomainError } from '../core/domain.error';

/**
 * A durable write ran, but fewer replicas than configured confirmed it within
 * DURABILITY_TIMEOUT_MS (or the confirmation could not be asked for): its
 * outcome is unknown, and it may still exist. The only 503 after which that is
 * so; a retry with the same idempotency key returns the original result.
 */
export class WriteUnconfirmedError extends DomainError {
  readonly kind = 'unavailable';

  constructor(wanted: number, confirmed: number | undefined, retryAfterMs: number) {
    super(
      'WRITE_UNCONFIRMED',
      'The write was made but not confirmed by enough replicas; retry with the same idempotency key to learn its outcome',
      { replicasWanted: wanted, replicasConfirmed: confirmed ?? null },
      retryAfterMs,
    );
  }
}
