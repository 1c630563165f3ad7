import { ApiProperty, ApiPropertyOptional } from '@nestjs/swagger';
import { IsString, Matches, MaxLength, MinLength, ValidateBy } from 'class-validator';
import { IsOptionalField } from '../../../platform/http/optional-field';
import { ACCOUNT_ID_RE } from '../../../platform/core/ids';
import { LINK_RE } from './write-message.dto';
import { IsDisplayText, NOT_BLANK_RE } from '../../../platform/http/display-text';

/**
 * A caller's idempotency key; never `.` or `..`: a listed broadcast's requestId is its outerBizId in each inbox, and
 * its broadcastId. Never digits only: those are the ids the service gives broadcasts to everyone (their sequence), so
 * a listed broadcast could otherwise show under the id of another.
 */
const REQUEST_ID_RE = /^(?!\.\.?$)(?![0-9]+$)[A-Za-z0-9_.:-]{1,64}$/;

/** Most accounts one listed broadcast may name. */
export const MAX_AUDIENCE = 10_000;

export class BroadcastDto {
  @ApiProperty({ example: 'Double 11: 20% back on every payment' })
  @IsString()
  @MinLength(1)
  @MaxLength(100)
  @Matches(NOT_BLANK_RE, { message: 'title must not be blank' })
  @IsDisplayText('title')
  title!: string;

  @ApiProperty({ example: 'Pay with your balance today and get 20% back, up to ¥50.' })
  @IsString()
  @MinLength(1)
  @MaxLength(2000)
  @Matches(NOT_BLANK_RE, { message: 'content must not be blank' })
  @IsDisplayText('content')
  content!: string;

  @ApiPropertyOptional({ example: 'redispay://promotions/double-11' })
  @IsOptionalField()
  @IsString()
  @MaxLength(2048)
  @Matches(LINK_RE, { message: 'url must be an https:// link or a redispay:// deep link' })
  url?: string;

  @ApiProperty({
    description: '"all" (one write; every account sees it on its next pull) or a list of up to 10,000 account ids (written into each inbox)',
    oneOf: [
      { type: 'string', enum: ['all'] },
      { type: 'array', items: { type: 'string' }, maxItems: 10_000 },
    ],
    example: 'all',
  })
  @ValidateBy({
    name: 'isAudience',
    validator: {
      validate: (v: unknown) =>
        v === 'all' || (Array.isArray(v) && v.length >= 1 && v.length <= MAX_AUDIENCE && v.every((a) => typeof a === 'string' && ACCOUNT_ID_RE.test(a))),
      defaultMessage: () => `audience must be "all" or 1-${MAX_AUDIENCE} account ids (1-64 characters of A-Z a-z 0-9 _ . : -)`,
    },
  })
  audience!: 'all' | string[];

  @ApiPropertyOptional({
    description:
      'Your idempotency key for this broadcast: the same requestId again (a retry after a timeout or a 503) makes no second broadcast and answers the first one (duplicate: true), while the broadcast is kept',
    example: 'double-11-2026',
    maxLength: 64,
  })
  @IsOptionalField()
  @IsString()
  @MaxLength(64)
  @Matches(REQUEST_ID_RE, {
    message: 'requestId must be 1-64 characters of A-Z a-z 0-9 _ . : -, not "." or "..", and not digits only (the ids of broadcasts to everyone)',
  })
  requestId?: string;
}

export class BroadcastResultDto {
  @ApiProperty({ example: '1795302000000000' }) broadcastId!: string;
  @ApiProperty({ enum: ['all', 'accounts'] }) audience!: string;
  @ApiProperty({ description: 'Inboxes written (0 for "all": accounts take it in on their next pull)', example: 0 }) written!: number;
  @ApiProperty({ description: 'Accounts that already had it', example: 0 }) duplicates!: number;
  @ApiProperty({ description: 'True when the requestId was broadcast before: nothing new was written', example: false }) duplicate!: boolean;
}
