import { applyDecorators } from '@nestjs/common';
import { IsString, Matches, MaxLength } from 'class-validator';
import { ACCOUNT_ID_RE } from '../../../platform/core/ids';

/** The one rule for an account id in a request body or path. */
export const IsAccountId = () =>
  applyDecorators(IsString(), MaxLength(64), Matches(ACCOUNT_ID_RE, { message: 'accountId must be 1-64 characters of A-Z a-z 0-9 _ . : -, not "." or ".."' }));
