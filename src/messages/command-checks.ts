import { InvalidArgumentError } from '../errors/domain-error';
import { BIZ_TYPE_RE, OUTER_BIZ_ID_RE } from './dto/write-message.dto';
import { MAX_MESSAGE_EXPIRES_AT, MAX_MESSAGE_TTL_MS } from './message-commands';
import { ACCOUNT_ID_RE } from '../kernel/ids';

/** The 400 an in-process caller gets for a bad command field: the same shape as an HTTP body's. */
export function commandFieldError(field: string, message: string): InvalidArgumentError {
  return new InvalidArgumentError(message, field);
}

/**
 * In-process callers skip the HTTP validation, so the fields that name keys and idempotency records
 * are checked again here, by the HTTP rules (an account id cannot reach another account's keys, a
 * bizType holds no '|', so (bizType, outerBizId) has one idempotency field), and so are ttlMs and
 * expiresAt. Whether expiresAt has passed is the write script's decision, on the Redis clock.
 */
export function checkMessageCommand(cmd: { accountId: string; bizType: string; outerBizId: string; ttlMs?: number; expiresAt?: number }): void {
  checkAccountId(cmd.accountId);
  if (typeof cmd.bizType !== 'string' || !BIZ_TYPE_RE.test(cmd.bizType))
    throw commandFieldError('bizType', 'bizType must be 1-32 characters of A-Z a-z 0-9 _ . -');
  if (typeof cmd.outerBizId !== 'string' || !OUTER_BIZ_ID_RE.test(cmd.outerBizId)) {
    throw commandFieldError('outerBizId', 'outerBizId must be 1-64 printable ASCII characters without spaces');
  }
  if (cmd.ttlMs !== undefined && !(Number.isInteger(cmd.ttlMs) && cmd.ttlMs >= 1 && cmd.ttlMs <= MAX_MESSAGE_TTL_MS)) {
    throw commandFieldError('ttlMs', `ttlMs must be an integer from 1 to ${MAX_MESSAGE_TTL_MS} (90 days)`);
  }
  if (cmd.expiresAt !== undefined && !(Number.isInteger(cmd.expiresAt) && cmd.expiresAt >= 1 && cmd.expiresAt <= MAX_MESSAGE_EXPIRES_AT)) {
    throw commandFieldError(
      'expiresAt',
      `expiresAt must be a time from 1970-01-01T00:00:00.001Z to 9999-12-31T23:59:59.999Z (in process: epoch ms, an integer from 1 to ${MAX_MESSAGE_EXPIRES_AT})`,
    );
  }
}

export function checkAccountId(accountId: string): void {
  if (typeof accountId !== 'string' || !ACCOUNT_ID_RE.test(accountId))
    throw commandFieldError('accountId', 'accountId must be 1-64 characters of A-Z a-z 0-9 _ . : -');
}
