import { ApiProperty, ApiPropertyOptional } from '@nestjs/swagger';
import { IsInt, Max, Min } from 'class-validator';
import { ACCOUNT_ID_RE } from '../../core/ids';
import { IsIdString } from '../../http/id-string';
import { IsOptionalField } from '../../http/optional-field';

/** Longest life of a development token: 30 days. */
export const MAX_DEV_TOKEN_TTL_S = 30 * 86_400;

export class DevTokenRequestDto {
  /** The app user the token is for (its `sub`); `acc_1001` is the user of the examples */
  @ApiProperty({ example: 'acc_1001', maxLength: 64 })
  @IsIdString(64, ACCOUNT_ID_RE, 'accountId must be 1-64 characters of A-Z a-z 0-9 _ . : -, not "." or ".."')
  accountId!: string;

  /** How long the token is valid, in seconds */
  @ApiPropertyOptional({ type: 'integer', default: 86_400, minimum: 1, maximum: MAX_DEV_TOKEN_TTL_S })
  @IsOptionalField()
  @IsInt()
  @Min(1)
  @Max(MAX_DEV_TOKEN_TTL_S)
  ttlSeconds?: number;
}

export class DevTokenDto {
  @ApiProperty({ example: 'acc_1001' }) accountId!: string;
  /** Paste it, without "Bearer ", into AppUserJwt under "Authorize" */
  @ApiProperty({ example: 'eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiJhY2NfMTAwMSJ9.c2lnbmF0dXJl' }) token!: string;
  @ApiProperty({ example: '2026-11-30T10:00:00.000Z' }) expiresAt!: string;
}
