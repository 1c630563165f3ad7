import { InvalidArgumentError } from '../../platform/core/domain.error';

/** A delay-queue call with a bad argument: a 400 that names the argument. Nothing was stored. */
export class DelayQueueArgumentError extends InvalidArgumentError {
  constructor(
    readonly field: string,
    problem: string,
  ) {
    super(`${field} ${problem}`, field, `${field} ${problem}`, 'INVALID_ARGUMENT');
  }
}
