import { applyDecorators } from '@nestjs/common';
import { ApiProperty } from '@nestjs/swagger';
import { IsIn, IsString } from 'class-validator';
import { CURRENCIES, CURRENCY_RE, currencyMessage } from '../core/money';

/**
 * A body field holding an ISO 4217 code the runtime knows, documented with its pattern and codes. One rule (the list
 * holds only codes of that pattern), so a wrong value gets one message: a shape rule beside it said the same thing
 * twice in other words.
 */
export const IsCurrencyCode = (field = 'currency') =>
  applyDecorators(
    ApiProperty({ example: 'CNY', minLength: 3, maxLength: 3, pattern: CURRENCY_RE.source, enum: [...CURRENCIES] }),
    IsString(),
    IsIn(CURRENCIES, { message: currencyMessage(field) }),
  );
