import { DomainError } from '../../platform/core/domain.error';

export class RedEnvelopeNotFoundError extends DomainError {
  readonly kind = 'not-found';

  constructor(what: 'activity' | 'envelope' = 'activity') {
    super('NOT_FOUND', what === 'activity' ? 'No such activity' : 'No envelope of this account in this activity');
  }
}

export type RedEnvelopeConflictCode = 'ACTIVITY_EXISTS' | 'LOADING';

export class RedEnvelopeConflictError extends DomainError {
  readonly kind = 'conflict';
  declare readonly code: RedEnvelopeConflictCode;

  constructor(code: RedEnvelopeConflictCode, message: string) {
    super(code, message);
  }
}
