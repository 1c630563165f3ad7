import { ApiProperty, ApiPropertyOptional, OmitType, PickType } from '@nestjs/swagger';
import {
  ArrayMaxSize,
  ArrayMinSize,
  IsArray,
  IsBoolean,
  IsISO8601,
  IsInt,
  IsString,
  Matches,
  Max,
  MaxLength,
  Min,
  MinLength,
  ValidateBy,
} from 'class-validator';
import { DATE_TIME_RE } from '../../../platform/http/date-time';
import { IsOptionalField } from '../../../platform/http/optional-field';
import { MAX_MESSAGE_EXPIRES_AT, MAX_MESSAGE_TTL_MS } from '../message.commands';
import { IsAccountId } from './account-id';
import { IsDisplayText, NOT_BLANK_RE } from '../../../platform/http/display-text';

/** Both appear in URLs (pending actions), so neither may be `.` or `..`, which a URL cannot carry as a segment. */
export const BIZ_TYPE_RE = /^(?!\.\.?$)[A-Za-z0-9_.-]{1,32}$/;
/**
 * The bizType of broadcasts, which the service writes itself (a message of this type is shown as one, with
 * `broadcastId`, and a list broadcast's requestId is its outerBizId): never a business system's to write or withdraw.
 */
export const BROADCAST_BIZ_TYPE = 'BROADCAST';
/** The bizType of the reminders before an unpaid order closes (outerBizId: the order id), which the service writes. */
export const CLOSE_REMINDER_BIZ_TYPE = 'CLOSE_REMINDER';
/**
 * The bizTypes only the service writes: a business system writing (bizType, outerBizId) under one of them would take
 * the service's own message's place (its write then finds "already written") or withdraw it, and could pass its text
 * off as the service's.
 */
export const SYSTEM_BIZ_TYPES = [BROADCAST_BIZ_TYPE, CLOSE_REMINDER_BIZ_TYPE] as const;
/** A bizType a business system may use: BIZ_TYPE_RE, and none of SYSTEM_BIZ_TYPES. */
export const WRITABLE_BIZ_TYPE_RE = new RegExp(`^(?!\\.\\.?$)${SYSTEM_BIZ_TYPES.map((t) => `(?!${t}$)`).join('')}[A-Za-z0-9_.-]{1,32}$`);
export const OUTER_BIZ_ID_RE = /^(?!\.\.?$)[\x21-\x7e]{1,64}$/;
/**
 * Links the app opens: https, or the app's own deep links. Nothing else (no javascript:, file:, http:), and only the
 * characters RFC 3986 lets a URI hold (others percent-encoded): no control characters, bidirectional overrides,
 * quotes or angle brackets.
 */
export const LINK_RE = /^(https|redispay):\/\/[A-Za-z0-9\-._~:/?#[\]@!$&'()*+,;=%]+$/;
const LOGO_URL_RE = /^https:\/\/[A-Za-z0-9\-._~:/?#[\]@!$&'()*+,;=%]+$/;
/** Text shown to the user: at least one character that is not white space. */

export class WriteMessageDto {
  /** The account the message is for */
  @ApiProperty({ example: 'acc_1001', maxLength: 64 })
  @IsAccountId()
  accountId!: string;

  /** Business type; with outerBizId the idempotency key */
  @ApiProperty({ example: 'PAYMENT_SUCCESS' })
  @IsString()
  @MaxLength(32)
  @Matches(WRITABLE_BIZ_TYPE_RE, {
    message: `bizType must be 1-32 characters of A-Z a-z 0-9 _ . -, not "." or "..", and none of ${SYSTEM_BIZ_TYPES.join(', ')} (the service's own)`,
  })
  bizType!: string;

  /** The business system's own id for the event (order id, refund id...) */
  @ApiProperty({ example: 'order-20261122-0001' })
  @IsString()
  @MaxLength(64)
  @Matches(OUTER_BIZ_ID_RE, { message: 'outerBizId must be 1-64 printable ASCII characters without spaces, not "." or ".."' })
  outerBizId!: string;

  @ApiProperty({ example: 'Payment successful' })
  @IsString()
  @MinLength(1)
  @MaxLength(100)
  @Matches(NOT_BLANK_RE, { message: 'title must not be blank' })
  @IsDisplayText('title')
  title!: string;

  @ApiProperty({ example: '¥128.00 paid to Coffee Corner' })
  @IsString()
  @MinLength(1)
  @MaxLength(2000)
  @Matches(NOT_BLANK_RE, { message: 'content must not be blank' })
  @IsDisplayText('content')
  content!: string;

  /** Where tapping the message leads (https:// or an app deep link) */
  @ApiPropertyOptional({ example: 'redispay://orders/order-20261122-0001' })
  @IsOptionalField()
  @IsString()
  @MaxLength(2048)
  @Matches(LINK_RE, { message: 'url must be an https:// link or a redispay:// deep link' })
  url?: string;

  @ApiPropertyOptional({ example: 'https://static.example.com/logos/pay.png' })
  @IsOptionalField()
  @IsString()
  @MaxLength(2048)
  @Matches(LOGO_URL_RE, { message: 'logoUrl must be an https:// URL' })
  logoUrl?: string;

  /** Also send a push notification */
  @ApiPropertyOptional({ default: false })
  @IsOptionalField()
  @IsBoolean()
  needPush?: boolean;

  /** When the business event happened (ISO 8601). Only shown; pulls order by the server sequence. */
  @ApiPropertyOptional({ example: '2026-11-22T08:30:00.000Z' })
  @IsOptionalField()
  @IsString()
  @MaxLength(40)
  @IsISO8601({ strict: true })
  @Matches(DATE_TIME_RE, { message: 'createdAt must be a date and time with a time zone, e.g. 2026-11-22T08:30:00Z' })
  createdAt?: string;

  /**
   * How long the message shows, in ms from its write (Redis clock), at most 90 days: after that no pull,
   * unread count or get returns it. A duplicate keeps the original's expiry. Omit to keep the message until
   * retention drops it.
   */
  @ApiPropertyOptional({ type: 'integer', example: 900_000, minimum: 1, maximum: MAX_MESSAGE_TTL_MS })
  @IsOptionalField()
  @IsInt()
  @Min(1)
  @Max(MAX_MESSAGE_TTL_MS)
  ttlMs?: number;

  /**
   * When the message stops showing (ISO 8601 date and time with a zone): from then on (by the Redis clock) no pull,
   * unread count or get returns it. With ttlMs too, the earlier applies. A time already past stores nothing and
   * answers 200 with `expired: true`. A duplicate keeps the original's expiry. A time after the retention time
   * changes nothing: retention removes the message first.
   */
  @ApiPropertyOptional({ format: 'date-time', example: '2099-12-31T16:00:00.000Z', maxLength: 40 })
  @IsOptionalField()
  @IsString()
  @MaxLength(40)
  @IsISO8601({ strict: true })
  @Matches(DATE_TIME_RE, { message: 'expiresAt must be a date and time with a time zone, e.g. 2026-11-22T08:45:00Z' })
  expiresAt?: string;
}

/** Take back one message (service token). The account is named in the body, as for a write. */
export class WithdrawMessageDto extends PickType(WriteMessageDto, ['accountId', 'bizType', 'outerBizId'] as const) {}

/**
 * A write command as MessagesService takes it, from HTTP (after WriteMessageDto) or in process, checked by
 * `validateCommand`: the body's rules, except that any bizType is taken (the service writes its own, such as
 * CLOSE_REMINDER) and expiresAt is epoch ms (an HTTP time before 1970 or after 9999 is refused here, in its words).
 */
export class MessageCommandDto extends OmitType(WriteMessageDto, ['bizType', 'expiresAt'] as const) {
  @IsString()
  @MaxLength(32)
  @Matches(BIZ_TYPE_RE, { message: 'bizType must be 1-32 characters of A-Z a-z 0-9 _ . -, not "." or ".."' })
  bizType!: string;

  @IsOptionalField()
  @ValidateBy({
    name: 'isMessageExpiry',
    validator: {
      validate: (v: unknown) => Number.isSafeInteger(v) && (v as number) >= 1 && (v as number) <= MAX_MESSAGE_EXPIRES_AT,
      defaultMessage: () =>
        `expiresAt must be a time from 1970-01-01T00:00:00.001Z to 9999-12-31T23:59:59.999Z (in process: epoch ms, an integer from 1 to ${MAX_MESSAGE_EXPIRES_AT})`,
    },
  })
  expiresAt?: number;
}

/** A withdraw command as MessagesService takes it (from HTTP or in process): any bizType, the service's own included. */
export class WithdrawCommandDto extends PickType(MessageCommandDto, ['accountId', 'bizType', 'outerBizId'] as const) {}

export class WithdrawResultDto {
  @ApiProperty({
    description:
      'True when a message the app could see was removed; false when there was none (never written, expired, already withdrawn). Either way (bizType, outerBizId) stays withdrawn for the retention time: a write of it stores nothing.',
    example: true,
  })
  withdrawn!: boolean;
}

export class WriteBatchDto {
  /** Up to 500 messages. Each is checked and written on its own: one bad item does not fail the others. */
  @ApiProperty({
    // The field is `unknown[]` (the service checks each item on its own), so the items' schema is named here.
    type: [WriteMessageDto],
  })
  @IsArray()
  @ArrayMinSize(1)
  @ArrayMaxSize(500)
  messages!: unknown[];
}

export class WriteResultDto {
  @ApiProperty({
    description: "The message id (the original one for a duplicate); '' when (bizType, outerBizId) was withdrawn or expiresAt had already passed",
    example: '1795302000000000',
  })
  msgId!: string;
  @ApiProperty({ description: 'True when (bizType, outerBizId) was already written (or withdrawn) for this account: nothing stored', example: false })
  duplicate!: boolean;
  @ApiPropertyOptional({
    description: 'Present (true) only when (bizType, outerBizId) was withdrawn for this account: nothing stored, now or on a retry',
    example: true,
  })
  withdrawn?: boolean;
  @ApiPropertyOptional({ description: 'Present (true) only when expiresAt was already past (Redis clock): nothing stored, duplicate false', example: true })
  expired?: boolean;
}

export class BatchItemResultDto {
  @ApiProperty({ example: 0 }) index!: number;
  @ApiProperty({ description: '201 new, 200 duplicate, withdrawn or already expired, 400 invalid (nothing stored)', enum: [200, 201, 400] }) status!: number;
  @ApiPropertyOptional({ example: '1795302000000000' }) msgId?: string;
  @ApiPropertyOptional({ description: 'Set (true) when (bizType, outerBizId) was withdrawn: status 200, nothing stored', example: true }) withdrawn?: boolean;
  @ApiPropertyOptional({ description: 'Set (true) when expiresAt had already passed: status 200, nothing stored', example: true }) expired?: boolean;
  @ApiPropertyOptional({ example: 'title must be shorter than or equal to 100 characters' }) error?: string;
}

export class BatchResultDto {
  @ApiProperty({ type: [BatchItemResultDto] }) results!: BatchItemResultDto[];
  @ApiProperty({ example: 498 }) created!: number;
  @ApiProperty({ example: 1 }) duplicates!: number;
  @ApiProperty({ description: 'Items whose expiresAt had already passed: nothing stored', example: 0 }) expired!: number;
  @ApiProperty({ example: 1 }) invalid!: number;
}
