import { ApiProperty, ApiPropertyOptional } from '@nestjs/swagger';
import { IsInt, IsString, Matches, Max, MaxLength, Min } from 'class-validator';
import { IsOptionalField } from '../../../platform/http/optional-field';
import { QueryInt } from '../../../platform/http/validation';
import { IsIdString } from '../../../platform/http/id-string';
import { REFERENCE_RE } from '../../../platform/core/ids';
import { MAX_AMOUNT, MIN_AMOUNT } from '../../../platform/core/money';
import { IsCurrencyCode } from '../../../platform/http/currency';
import { OWNER_REF_RE } from '../wallet.keys';
import { MAX_PAGE } from '../wallet.service';
import { MAX_MEMO, WALLET_ENTRY_KINDS } from '../wallet.types';
import { IsDisplayText } from '../../../platform/http/display-text';

export class OwnerIdParamDto {
  /**
   * The wallet's owner: `account:<accountId>` or `merchant:<merchantId>` (ids: 1-64 of A-Z a-z 0-9 _ . : -, not "." or ".."). In development:
   * `account:acc_1001` (the app user), `merchant:m_demo` (the merchant that sponsors the rain example)
   */
  @ApiProperty({ example: 'account:acc_1001', maxLength: 73 })
  @IsIdString(73, OWNER_REF_RE, 'ownerId must be account:<id> or merchant:<id>, the id 1-64 characters of A-Z a-z 0-9 _ . : -, not "." or ".."')
  ownerId!: string;
}

export class EntriesQueryDto {
  /** The previous page's `next`: entries older than that one; omit for the newest */
  @ApiPropertyOptional({ example: '17', maxLength: 16 })
  @IsOptionalField()
  @IsString()
  @MaxLength(16)
  @Matches(/^[1-9][0-9]{0,15}$/, { message: 'cursor must be an entry id (digits)' })
  cursor?: string;

  @ApiPropertyOptional({ type: 'integer', default: 20, minimum: 1, maximum: MAX_PAGE })
  @IsOptionalField()
  @QueryInt()
  @IsInt()
  @Min(1)
  @Max(MAX_PAGE)
  limit?: number;
}

export class TopUpDto {
  /** Minor units (cents for CNY/USD) */
  @ApiProperty({ type: 'integer', example: 50000, minimum: MIN_AMOUNT, maximum: MAX_AMOUNT })
  @IsInt()
  @Min(MIN_AMOUNT)
  @Max(MAX_AMOUNT)
  amount!: number;

  /** ISO 4217 */
  @IsCurrencyCode()
  currency!: string;

  /** Makes the top-up idempotent: the same reference again moves nothing */
  @ApiProperty({ example: 'topup-2026-11-24-0001', maxLength: 128 })
  @IsString()
  @MaxLength(128)
  @Matches(REFERENCE_RE, { message: 'reference must be 1-128 characters of A-Z a-z 0-9 _ . : -' })
  reference!: string;

  @ApiPropertyOptional({ example: 'Prize of the Monday quiz', maxLength: MAX_MEMO })
  @IsOptionalField()
  @IsString()
  @MaxLength(MAX_MEMO)
  @IsDisplayText('memo')
  memo?: string;
}

export class TopUpResultDto {
  /** false: this reference had been applied before, and nothing moved */
  @ApiProperty({ example: true }) applied!: boolean;
  @ApiProperty({ example: '3' }) entryId!: string;
  @ApiProperty({ example: 'CNY' }) currency!: string;
  /** The balance in this currency now, minor units */
  @ApiProperty({ example: 12800 }) balance!: number;
}

export class BalanceDto {
  @ApiProperty({ example: 'CNY' }) currency!: string;
  @ApiProperty({ example: 12800, description: 'Minor units' }) balance!: number;
}

export class EntryDto {
  /** The entry's number in its wallet (newer entries have greater numbers) */
  @ApiProperty({ example: '3' }) entryId!: string;
  @ApiProperty({ enum: WALLET_ENTRY_KINDS, example: 'top-up' }) kind!: string;
  @ApiProperty({ example: 'CNY' }) currency!: string;
  /** Signed minor units: positive a credit, negative a debit */
  @ApiProperty({ example: 10000 }) amount!: number;
  @ApiProperty({ example: 12800 }) balanceAfter!: number;
  @ApiProperty({ example: 'topup-2026-11-24-0001' }) reference!: string;
  @ApiProperty({ example: '' }) memo!: string;
  /** When it was applied (Redis clock) */
  @ApiProperty({ example: '2026-11-24T09:30:00.000Z' }) at!: string;
}

export class WalletDto {
  /** `account:<id>` or `merchant:<id>` */
  @ApiProperty({ example: 'account:acc_1001' }) owner!: string;
  /** Every currency the wallet has held (an empty list for a wallet never used) */
  @ApiProperty({ type: [BalanceDto] }) balances!: BalanceDto[];
  /** Newest first */
  @ApiProperty({ type: [EntryDto] }) entries!: EntryDto[];
  /** Pass as `cursor` for the next page; absent on the last page */
  @ApiPropertyOptional({ example: '1' }) next?: string;
}
