import { DomainError } from '../../platform/core/domain.error';

/** An activity, product or reservation that does not exist, or is not the caller's (404). */
export class SeckillNotFoundError extends DomainError {
  readonly kind = 'not-found';

  constructor(what: 'activity' | 'product' | 'reservation' | 'results') {
    super('NOT_FOUND', what === 'results' ? 'The activity has no results' : `No such ${what}`);
  }
}

/** Why a reservation is refused, and the other states that stop an operation (409). */
export type SeckillConflictCode =
  | 'SOLD_OUT'
  | 'LIMIT_EXCEEDED'
  | 'NOT_STARTED'
  | 'ENDED'
  | 'NOT_ELIGIBLE'
  | 'ACTIVITY_EXISTS'
  | 'ACTIVITY_STARTED'
  | 'ACTIVITY_NOT_ENDED'
  | 'LEFTOVER_KEYS'
  | 'RESERVATION_PAID'
  | 'RESERVATION_PAYING'
  | 'RESERVATION_RELEASED'
  | 'REQUEST_REUSED';

export class SeckillConflictError extends DomainError {
  readonly kind = 'conflict';
  declare readonly code: SeckillConflictCode;

  constructor(code: SeckillConflictCode, message: string, details?: unknown) {
    super(code, message, details);
  }
}

/** Others are taking the product over several shards and this request could not get its turn in time (503, Retry-After). */
export class SeckillTryAgainError extends DomainError {
  readonly kind = 'unavailable';

  constructor(retryAfterMs: number) {
    super('TRY_AGAIN', 'Others are reserving this product over several shards; the same request again takes its turn', undefined, retryAfterMs);
  }
}

export const seckillConflict = (code: SeckillConflictCode, message: string, details?: unknown) => new SeckillConflictError(code, message, details);

/** The reservation refusals, as the services throw them (also the documented examples). */
export const REFUSALS = {
  soldOut: (available: number) => seckillConflict('SOLD_OUT', available > 0 ? `Only ${available} left` : 'Sold out', { available }),
  limit: (held: number, limit: number) =>
    seckillConflict('LIMIT_EXCEEDED', `The account holds ${held} of this product; the limit is ${limit}`, { held, limit }),
  notStarted: () => seckillConflict('NOT_STARTED', 'The sale has not started'),
  ended: () => seckillConflict('ENDED', 'The sale has ended'),
  notEligible: () => seckillConflict('NOT_ELIGIBLE', 'This account may not buy in this sale'),
  requestReused: (quantity: number) =>
    seckillConflict('REQUEST_REUSED', `This requestId reserved ${quantity} before; a new reservation needs a new requestId`, { quantity }),
  /** Taking over several shards could not get its turn or fell short while the quantity is still there: retry the same request. */
  tryAgain: (retryAfterMs: number) => new SeckillTryAgainError(retryAfterMs),
};
