import { ApiProperty, ApiPropertyOptional, OmitType } from '@nestjs/swagger';
import { IsInt, IsString, Matches, Max, MaxLength, Min, MinLength, ValidateBy } from 'class-validator';
import { IsOptionalField } from '../../../platform/http/optional-field';
import { IsIdString } from '../../../platform/http/id-string';
import { ACCOUNT_ID_RE, MERCHANT_ORDER_NO_RE, ORDER_COMMAND_MERCHANT_ID_RE, SYSTEM_ORDER_NO_RE } from '../../../platform/core/ids';
import { MAX_AMOUNT } from '../../../platform/core/money';
import { IsCurrencyCode } from '../../../platform/http/currency';
import { DEFAULT_EXPIRE_MINUTES, MAX_EXPIRE_MINUTES, MAX_SUBJECT_LENGTH } from '../order.commands';
import { IsDisplayText, NOT_BLANK_RE } from '../../../platform/http/display-text';

export { MAX_AMOUNT } from '../../../platform/core/money';

const IsOrderNo = () => IsIdString(64, MERCHANT_ORDER_NO_RE, 'merchantOrderNo must be 1-64 characters of A-Z a-z 0-9 _ . : -, not "." or ".."');

export class CreateOrderDto {
  /** The merchant's own order number; with the merchant, the idempotency key. `sk_` and 24 hex digits is the service's own (its flash-sale orders) and is refused */
  @ApiProperty({ example: 'M20261122-0001', maxLength: 64 })
  @IsOrderNo()
  @ValidateBy({
    name: 'isMerchantsOwnOrderNo',
    validator: {
      validate: (v: unknown) => typeof v !== 'string' || !SYSTEM_ORDER_NO_RE.test(v),
      defaultMessage: () => 'merchantOrderNo must not be sk_ and 24 hex digits: the service numbers its flash-sale orders so',
    },
  })
  merchantOrderNo!: string;

  /** Amount in minor units (cents) */
  @ApiProperty({ example: 12800 })
  @IsInt()
  @Min(1)
  @Max(MAX_AMOUNT)
  amount!: number;

  /** ISO 4217 currency code */
  @IsCurrencyCode()
  currency!: string;

  /** What is being bought, shown to the payer */
  @ApiProperty({ example: 'Coffee beans 1 kg' })
  @IsString()
  @MinLength(1)
  @MaxLength(MAX_SUBJECT_LENGTH)
  @Matches(NOT_BLANK_RE, { message: 'subject must not be blank' })
  @IsDisplayText('subject')
  subject!: string;

  /** Minutes until an unpaid order closes by itself */
  @ApiPropertyOptional({ default: DEFAULT_EXPIRE_MINUTES })
  @IsOptionalField()
  @IsInt()
  @Min(1)
  @Max(MAX_EXPIRE_MINUTES)
  expireMinutes?: number;

  /** The only app account that may pay the order (bound from the start); absent: the first account to create a plan */
  @ApiPropertyOptional({ example: 'acc_1001', maxLength: 64 })
  @IsOptionalField()
  @IsIdString(64, ACCOUNT_ID_RE, 'payerAccountId must be 1-64 characters of A-Z a-z 0-9 _ . : -, not "." or ".."')
  payerAccountId?: string;
}

/**
 * An order command of an in-process caller (OrdersService.create and createForBuyer), checked by
 * `validateCommand`: the HTTP create's rules, for the merchant it names, and any order number (the
 * service's own flash-sale numbers included).
 */
export class OrderCommandDto extends OmitType(CreateOrderDto, ['merchantOrderNo'] as const) {
  @IsString()
  @MaxLength(64)
  @Matches(ORDER_COMMAND_MERCHANT_ID_RE, { message: 'merchantId must be 1-64 characters of A-Z a-z 0-9 _ . : -' })
  merchantId!: string;

  @IsOrderNo()
  merchantOrderNo!: string;
}
