import { ApiError } from '../http/api-error';

/** A delay-queue call with a bad argument: a 400 that names the argument. Nothing was stored. */
export class DelayQueueArgumentError extends ApiError {
  constructor(
    readonly field: string,
    problem: string,
  ) {
    super(400, 'INVALID_ARGUMENT', `${field} ${problem}`, [{ field, errors: [`${field} ${problem}`] }]);
    this.name = 'DelayQueueArgumentError';
  }
}
