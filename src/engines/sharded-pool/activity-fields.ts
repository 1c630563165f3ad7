import { ApiProperty } from '@nestjs/swagger';
import { IsInt, IsString, Matches, Max, MaxLength, Min, MinLength } from 'class-validator';
import { ExampleFromNow, IsDateTime } from '../../platform/http/date-time';
import { IsDisplayText, NOT_BLANK_RE } from '../../platform/http/display-text';
import { IsIdString } from '../../platform/http/id-string';
import { ACTIVITY_ID_RE, MERCHANT_ID_RE } from '../../platform/core/ids';
import { IsCurrencyCode } from '../../platform/http/currency';

/**
 * The request fields every sale on a sharded pool has (a flash sale, a red-envelope rain): its id, the merchant
 * whose money it moves, its title, its window, its currency and its whole numbers. Each is its documented property
 * and its rules as one decorator. The rules register in the order they would if written stacked, top to bottom (so a
 * 400 lists its messages in the same order), and what the Swagger plugin would read from a stacked rule
 * (`@MinLength`, `@Min`, `@Max`, `@IsIn`) is spelled out in the `@ApiProperty`.
 */
type FieldDecorator = (target: object, key: string) => void;

/** Applies `decorators` as if written stacked above a property: the lowest first. */
const stacked = (...decorators: FieldDecorator[]): FieldDecorator => {
  return (target, key) => [...decorators].reverse().forEach((d) => d(target, key));
};

/** The sale's id: 1-32 characters of A-Z a-z 0-9 _ -. */
export const ActivityIdField = (example: string): FieldDecorator =>
  stacked(ApiProperty({ example, maxLength: 32 }), IsIdString(32, ACTIVITY_ID_RE, 'activityId must be 1-32 characters of A-Z a-z 0-9 _ -'));

/** A merchant id named `field` (the 400 names it). */
export const MerchantIdField = (field: string, example: string): FieldDecorator =>
  stacked(ApiProperty({ example, maxLength: 64 }), IsIdString(64, MERCHANT_ID_RE, `${field} must be 1-64 characters of A-Z a-z 0-9 _ . : -, not "." or ".."`));

/** The title shown to buyers: 1 to `maxLength` characters, not blank, no hidden characters. */
export const TitleField = (maxLength: number, example: string): FieldDecorator =>
  stacked(
    ApiProperty({ minLength: 1, maxLength, example }),
    IsString(),
    MinLength(1),
    MaxLength(maxLength),
    Matches(NOT_BLANK_RE, { message: 'title must not be blank' }),
    IsDisplayText('title'),
  );

/** One end of the sale's window (`startsAt`, `endsAt`): a date and time with a time zone, its example `fromNowMs` from now. */
export const WindowEndField = (field: 'startsAt' | 'endsAt', fromNowMs: number): FieldDecorator => stacked(ExampleFromNow(fromNowMs), IsDateTime(field));

/** The currency of the sale's amounts: an ISO 4217 code. */
export const CurrencyField = (): FieldDecorator => IsCurrencyCode();

/** A whole number from 1 to `maximum` (an amount in minor units, a stock, a count of envelopes). */
export const PositiveIntField = (maximum: number, example: number): FieldDecorator =>
  stacked(ApiProperty({ minimum: 1, maximum, example }), IsInt(), Min(1), Max(maximum));
