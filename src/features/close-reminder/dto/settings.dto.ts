import { ApiProperty, ApiPropertyOptional } from '@nestjs/swagger';
import { IsBoolean, IsInt, IsString, Matches, Max, MaxLength, Min, MinLength, ValidateBy, type ValidationOptions } from 'class-validator';
import { IsOptionalField } from '../../../platform/http/optional-field';
import { QueryInt } from '../../../platform/http/validation';
import { IsIdString } from '../../../platform/http/id-string';
import { MERCHANT_ID_RE } from '../../../platform/core/ids';
import { DEFAULT_CONTENT, DEFAULT_TITLE, MAX_CONTENT_TEMPLATE, MAX_TITLE_TEMPLATE, PLACEHOLDERS, unknownPlaceholders } from '../reminder-template';
import { IsDisplayText, NOT_BLANK_RE } from '../../../platform/http/display-text';

const PLACEHOLDER_LIST = PLACEHOLDERS.map((p) => `{${p}}`).join(' ');

/** A template whose `{…}` are all known placeholders. */
const IsTemplate = (options?: ValidationOptions) =>
  ValidateBy(
    {
      name: 'isTemplate',
      validator: {
        validate: (v: unknown) => typeof v === 'string' && unknownPlaceholders(v).length === 0,
        defaultMessage: (a) =>
          `${a?.property} uses unknown placeholders ${
            typeof a?.value === 'string'
              ? unknownPlaceholders(a.value)
                  .map((p) => `{${p}}`)
                  .join(', ')
              : ''
          }; known: ${PLACEHOLDER_LIST}`,
      },
    },
    options,
  );

const ID_MESSAGE = 'merchantId must be 1-64 characters of A-Z a-z 0-9 _ . : -, not "." or ".."';

export class MerchantIdParamDto {
  /** The merchant whose settings these are (`m_demo` in development) */
  @ApiProperty({ example: 'm_coffee', maxLength: 64 })
  @IsIdString(64, MERCHANT_ID_RE, ID_MESSAGE)
  merchantId!: string;
}

export class ReminderSettingsDto {
  /** Whether the merchant's payers are reminded */
  @ApiProperty({ example: true })
  @IsBoolean()
  enabled!: boolean;

  /**
   * How long before the order closes the reminder is sent, in seconds. At least
   * CLOSE_REMINDER_MIN_LEFT_SECONDS + CLOSE_REMINDER_VISIBILITY_TIMEOUT_SECONDS (90 with the defaults), else a 400
   */
  @ApiPropertyOptional({ default: 1200, minimum: 30, maximum: 86_400 })
  @IsOptionalField()
  @IsInt()
  @Min(30, {
    message: 'leadSeconds must be at least 30, and at least CLOSE_REMINDER_MIN_LEFT_SECONDS + CLOSE_REMINDER_VISIBILITY_TIMEOUT_SECONDS (90 with the defaults)',
  })
  @Max(86_400)
  leadSeconds?: number;

  /** The message title; placeholders {subject} {amount} {currency} {closeAt} {minutes} */
  @ApiPropertyOptional({ default: DEFAULT_TITLE, maxLength: MAX_TITLE_TEMPLATE })
  @IsOptionalField()
  @IsString()
  @MinLength(1)
  @MaxLength(MAX_TITLE_TEMPLATE)
  @Matches(NOT_BLANK_RE, { message: 'title must not be blank' })
  @IsDisplayText('title')
  @IsTemplate()
  title?: string;

  /** The message text; the same placeholders */
  @ApiPropertyOptional({ default: DEFAULT_CONTENT, maxLength: MAX_CONTENT_TEMPLATE })
  @IsOptionalField()
  @IsString()
  @MinLength(1)
  @MaxLength(MAX_CONTENT_TEMPLATE)
  @Matches(NOT_BLANK_RE, { message: 'content must not be blank' })
  @IsDisplayText('content')
  @IsTemplate()
  content?: string;
}

export class ReminderSettingsViewDto {
  @ApiProperty({ example: 'm_coffee' }) merchantId!: string;
  @ApiProperty({ example: true }) enabled!: boolean;
  @ApiProperty({ example: 1200 }) leadSeconds!: number;
  @ApiProperty({ example: DEFAULT_TITLE }) title!: string;
  @ApiProperty({ example: DEFAULT_CONTENT }) content!: string;
  @ApiProperty({ example: '2026-11-24T09:30:00.000Z' }) updatedAt!: string;
}

export class SettingsPageQueryDto {
  /** Start after this merchant id (the previous page's `next`) */
  @ApiPropertyOptional({ example: 'm_coffee', maxLength: 64 })
  @IsOptionalField()
  @IsString()
  @MaxLength(64)
  @Matches(MERCHANT_ID_RE, { message: 'after must be a merchant id' })
  after?: string;

  @ApiPropertyOptional({ type: 'integer', default: 50, minimum: 1, maximum: 500 })
  @IsOptionalField()
  @QueryInt()
  @IsInt()
  @Min(1)
  @Max(500)
  limit?: number;
}

export class SettingsPageDto {
  @ApiProperty({ type: [ReminderSettingsViewDto] }) items!: ReminderSettingsViewDto[];
  /** Pass as `after` for the next page; absent on the last page */
  @ApiPropertyOptional({ example: 'm_coffee' }) next?: string;
}

export class ReminderStatusDto {
  @ApiProperty({ example: 'ord_3f9a0c1b2d4e5f60718293a4' }) orderId!: string;
  /** none: the order's merchant had no reminders enabled when it was created (or the record has expired); withdrawing: being taken back */
  @ApiProperty({ enum: ['none', 'scheduled', 'sent', 'cancelled', 'withdrawing', 'withdrawn', 'skipped'], example: 'sent' })
  state!: string;
  @ApiPropertyOptional({ example: 'm_coffee' }) merchantId?: string;
  @ApiPropertyOptional({ description: 'When the reminder is (was) due', example: '2026-11-24T09:10:00.000Z' }) dueAt?: string;
  @ApiPropertyOptional({ description: 'When the order closes', example: '2026-11-24T09:30:00.000Z' }) closesAt?: string;
  @ApiPropertyOptional({ example: '2026-11-24T09:00:00.120Z' }) scheduledAt?: string;
  @ApiPropertyOptional({ example: 'acc_1001' }) payerAccountId?: string;
  @ApiPropertyOptional({ description: 'The message id in the payer’s inbox', example: '42' }) msgId?: string;
  @ApiPropertyOptional({ example: '2026-11-24T09:10:00.180Z' }) sentAt?: string;
  @ApiPropertyOptional({ description: 'What cancelled or withdrew it: paid or closed', example: 'paid' }) cause?: string;
  @ApiPropertyOptional({ example: '2026-11-24T09:12:00.000Z' }) cancelledAt?: string;
  @ApiPropertyOptional({ example: '2026-11-24T09:12:00.000Z' }) withdrawnAt?: string;
  @ApiPropertyOptional({
    description: 'Why it was skipped: too-late, paid, closed, paying, expired, no-payer, merchant-disabled, order-missing',
    example: 'no-payer',
  })
  reason?: string;
  @ApiPropertyOptional({ example: '2026-11-24T09:10:00.100Z' }) skippedAt?: string;
}
