import { ApiProperty, ApiPropertyOptional } from '@nestjs/swagger';
import { ActivityIdField, CurrencyField, MerchantIdField, PositiveIntField, TitleField, WindowEndField } from '../../../engines/sharded-pool/activity-fields';
import { Type } from 'class-transformer';
import { ArrayMaxSize, ArrayMinSize, IsArray, IsInt, Max, Min, ValidateBy, ValidateNested } from 'class-validator';
import { EachIsObject } from '../../../platform/http/each-object';
import { IsOptionalField } from '../../../platform/http/optional-field';
import { IsIdString } from '../../../platform/http/id-string';
import { ACCOUNT_ID_RE } from '../../../platform/core/ids';
import { MAX_AMOUNT } from '../../../platform/core/money';
import { PRODUCT_ID_RE } from '../seckill.keys';
import { MAX_SHARDS } from '../seckill.config';

/** Most accounts on one activity's eligibility list. */
export const MAX_ELIGIBLE = 50_000;
/** Most products one activity request may carry (the configured maximum may be lower). */
export const MAX_PRODUCTS_IN_BODY = 10_000;
export const MAX_STOCK = 10_000_000;
export const MAX_PER_USER_LIMIT = 1000;
const HOUR_MS = 3_600_000;
const isAccountId = (a: unknown) => typeof a === 'string' && ACCOUNT_ID_RE.test(a);

export class ProductDto {
  @ApiProperty({ example: 'data-10g', maxLength: 64 })
  @IsIdString(64, PRODUCT_ID_RE, 'productId must be 1-64 characters of A-Z a-z 0-9 _ -')
  productId!: string;

  @TitleField(128, '10 GB data pack') title!: string;

  /** Minor units */
  @PositiveIntField(MAX_AMOUNT, 990) price!: number;

  @CurrencyField() currency!: string;

  @PositiveIntField(MAX_STOCK, 1000) stock!: number;

  /** Overrides the activity's limit for this product */
  @ApiPropertyOptional({ example: 2, maximum: MAX_PER_USER_LIMIT })
  @IsOptionalField()
  @IsInt()
  @Min(1)
  @Max(MAX_PER_USER_LIMIT)
  perUserLimit?: number;

  /** Sub-stocks on different hash slots, for a hot product (at most the stock, and SECKILL_MAX_SHARDS) */
  @ApiPropertyOptional({ example: 1, default: 1, minimum: 1, maximum: MAX_SHARDS })
  @IsOptionalField()
  @IsInt()
  @Min(1)
  @Max(MAX_SHARDS)
  shards?: number;
}

export class ActivityDto {
  @ActivityIdField('w48-data') activityId!: string;
  /** The merchant whose orders the buyers pay */
  @MerchantIdField('merchantId', 'm_demo') merchantId!: string;
  @TitleField(128, 'Wednesday 10:00 data sale') title!: string;
  @WindowEndField('startsAt', 0) startsAt!: string;
  @WindowEndField('endsAt', 2 * HOUR_MS) endsAt!: string;

  /** How long a buyer has to pay a reservation */
  @ApiPropertyOptional({ example: 15, default: 15, minimum: 1, maximum: 1440 })
  @IsOptionalField()
  @IsInt()
  @Min(1)
  @Max(1440)
  payWindowMinutes?: number;

  /** Units one account may hold of each product, reserved or bought */
  @ApiPropertyOptional({ example: 1, default: 1, minimum: 1, maximum: MAX_PER_USER_LIMIT })
  @IsOptionalField()
  @IsInt()
  @Min(1)
  @Max(MAX_PER_USER_LIMIT)
  perUserLimit?: number;

  /** Only these accounts may buy (at least one); absent: any account */
  @ApiPropertyOptional({ type: [String], minItems: 1, maxItems: MAX_ELIGIBLE, example: ['acc_1001', 'acc_1002'] })
  @IsOptionalField()
  @IsArray()
  @ArrayMinSize(1, { message: 'eligibleAccounts must name at least one account (leave it out to let every account buy)' })
  @ArrayMaxSize(MAX_ELIGIBLE)
  @ValidateBy({
    name: 'isAccountIdList',
    validator: {
      validate: (v: unknown) => Array.isArray(v) && v.every(isAccountId),
      defaultMessage: (args) => {
        const i = Array.isArray(args?.value) ? (args.value as unknown[]).findIndex((a) => !isAccountId(a)) : 0;
        return `eligibleAccounts[${i}] must be an account id (1-64 characters of A-Z a-z 0-9 _ . : -)`;
      },
    },
  })
  eligibleAccounts?: string[];

  @ApiProperty({
    type: [ProductDto],
    minItems: 1,
    maxItems: MAX_PRODUCTS_IN_BODY,
    example: [{ productId: 'data-10g', title: '10 GB data pack', price: 990, currency: 'CNY', stock: 1000 }],
  })
  @IsArray()
  @ArrayMinSize(1)
  @ArrayMaxSize(MAX_PRODUCTS_IN_BODY)
  @EachIsObject()
  @ValidateNested({ each: true })
  @Type(() => ProductDto)
  products!: ProductDto[];
}

export class ActivityIdParamDto {
  /** The `activityId` your sale was created with */
  @ActivityIdField('w48-data') activityId!: string;
}

export class ProductLiveDto {
  @ApiProperty({ example: 'data-10g' }) productId!: string;
  @ApiProperty({ example: '10 GB data pack' }) title!: string;
  @ApiProperty({ example: 990 }) price!: number;
  @ApiProperty({ example: 'CNY' }) currency!: string;
  @ApiProperty({ example: 1000 }) stock!: number;
  @ApiPropertyOptional({ example: 2 }) perUserLimit?: number;
  @ApiProperty({ example: 1 }) shards!: number;
  @ApiProperty({ example: 700, description: 'Live: units that can still be reserved' }) available!: number;
  @ApiProperty({ example: 100, description: 'Live: units reserved and not yet paid' }) reserved!: number;
  @ApiProperty({ example: 200, description: 'Live: units paid' }) sold!: number;
  @ApiProperty({ example: 30, description: 'Live: units given back after a reservation was not paid' }) returned!: number;
}

export class ActivityViewDto {
  @ApiProperty({ example: 'w48-data' }) activityId!: string;
  @ApiProperty({ example: 'm_demo' }) merchantId!: string;
  @ApiProperty({ example: 'Wednesday 10:00 data sale' }) title!: string;
  @ApiProperty({ example: '2026-11-25T02:00:00.000Z' }) startsAt!: string;
  @ApiProperty({ example: '2026-11-29T15:59:59.000Z' }) endsAt!: string;
  @ApiPropertyOptional({ example: '2026-11-26T02:00:00.000Z', description: 'When ops ended the sale early' }) endedAt?: string;
  @ApiProperty({ enum: ['UPCOMING', 'OPEN', 'ENDED'], example: 'UPCOMING' }) state!: string;
  @ApiProperty({ example: 15 }) payWindowMinutes!: number;
  @ApiProperty({ example: 1 }) perUserLimit!: number;
  @ApiProperty({ example: false, description: 'Only the accounts of the eligibility list may buy' }) restricted!: boolean;
  @ApiProperty({ example: 0 }) eligibleCount!: number;
  @ApiProperty({ example: '2026-11-23T09:00:00.000Z' }) updatedAt!: string;
  @ApiProperty({ type: [ProductLiveDto] }) products!: ProductLiveDto[];
}

export class CheckDto {
  @ApiProperty({ example: true }) ok!: boolean;
  @ApiProperty({ type: [String], example: [] }) problems!: string[];
  @ApiProperty({ example: '2026-11-25T01:30:00.000Z' }) checkedAt!: string;
}

export class ProductResultDto {
  @ApiProperty({ example: 'data-10g' }) productId!: string;
  @ApiProperty({ example: 1000 }) stock!: number;
  @ApiProperty({ example: 930 }) sold!: number;
  @ApiProperty({ example: 120, description: 'Units given back (reservations not paid)' }) returned!: number;
  @ApiProperty({ example: 0, description: 'Still reserved, waiting for payment' }) reserved!: number;
  @ApiProperty({ example: 930, description: 'Distinct accounts that bought' }) buyers!: number;
  @ApiProperty({ example: 920700, description: 'Minor units' }) revenue!: number;
  @ApiProperty({ example: 'CNY' }) currency!: string;
}

export class ResultsDto {
  @ApiProperty({ example: 'w48-data' }) activityId!: string;
  @ApiProperty({ example: true, description: 'No reservation is still waiting for payment: the figures are final' }) final!: boolean;
  @ApiProperty({ example: '2026-11-30T00:00:00.000Z' }) computedAt!: string;
  @ApiProperty({ type: [ProductResultDto] }) products!: ProductResultDto[];
  @ApiProperty({ example: { CNY: 920700 }, description: 'Per currency, minor units' }) revenue!: Record<string, number>;
}
