import { DomainError } from '../../platform/core/domain.error';

/** A merchant without close-reminder settings (404). */
export class ReminderSettingsNotFoundError extends DomainError {
  readonly kind = 'not-found';

  constructor() {
    super('NOT_FOUND', 'The merchant has no close-reminder settings');
  }
}
