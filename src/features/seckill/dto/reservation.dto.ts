import { ApiProperty, ApiPropertyOptional } from '@nestjs/swagger';
import { ActivityIdField } from '../../../engines/sharded-pool/activity-fields';
import { IsInt, IsString, Matches, Max, MaxLength, Min } from 'class-validator';
import { IsOptionalField } from '../../../platform/http/optional-field';
import { IsIdString } from '../../../platform/http/id-string';
import { ACTIVITY_ID_RE, REQUEST_ID_RE } from '../../../platform/core/ids';
import { PRODUCT_ID_RE, RESERVATION_ID_RE } from '../seckill.keys';
import { MAX_PER_USER_LIMIT } from './seckill-activity.dto';

export class ReserveDto {
  @ApiProperty({ example: 1, minimum: 1, maximum: MAX_PER_USER_LIMIT })
  @IsInt()
  @Min(1)
  @Max(MAX_PER_USER_LIMIT)
  quantity!: number;

  /** The app's id for this tap: the same requestId again answers the same reservation */
  @ApiProperty({ example: 'tap-7f3a9c', maxLength: 64 })
  @IsIdString(64, REQUEST_ID_RE, 'requestId must be 1-64 characters of A-Z a-z 0-9 _ . : -, not "." or ".."')
  requestId!: string;
}

export class ProductParamsDto {
  /** The `activityId` your sale was created with */
  @ActivityIdField('w48-data') activityId!: string;

  /** A `productId` of that sale, as its product listing names them */
  @ApiProperty({ example: 'data-10g', maxLength: 64 })
  @IsIdString(64, PRODUCT_ID_RE, 'productId must be 1-64 characters of A-Z a-z 0-9 _ -')
  productId!: string;
}

export class ReservationIdParamDto {
  /** The `reservationId` the reserve answered, or one of `GET /seckill/reservations` (`sk_` and 24 hex digits) */
  @ApiProperty({ example: 'sk_5d41402abc4b2a76b9719d91', maxLength: 27 })
  @IsIdString(27, RESERVATION_ID_RE, 'reservationId must be sk_ and 24 hex digits')
  reservationId!: string;
}

export class ReservationsQueryDto {
  @ApiPropertyOptional({ example: 'w48-data', maxLength: 32 })
  @IsOptionalField()
  @IsIdString(32, ACTIVITY_ID_RE, 'activityId must be 1-32 characters of A-Z a-z 0-9 _ -')
  activityId?: string;
}

/** 1..10000 and 1..50 as plain decimal digits: checked as strings, so the listing's query takes the pipe's fast path. */
const PAGE_RE = /^(?:[1-9]\d{0,3}|10000)$/;
const SIZE_RE = /^(?:[1-9]|[1-4]\d|50)$/;

export class ProductPageQueryDto {
  @ApiPropertyOptional({ type: 'integer', default: 1, minimum: 1, maximum: 10_000 })
  @IsOptionalField()
  @IsString()
  @MaxLength(5)
  @Matches(PAGE_RE, { message: 'page must be an integer from 1 to 10000' })
  page?: string;

  @ApiPropertyOptional({ type: 'integer', default: 8, minimum: 1, maximum: 50 })
  @IsOptionalField()
  @IsString()
  @MaxLength(2)
  @Matches(SIZE_RE, { message: 'size must be an integer from 1 to 50' })
  size?: string;
}

export class ReservationDto {
  @ApiProperty({ example: 'sk_5d41402abc4b2a76b9719d91' }) reservationId!: string;
  @ApiProperty({ example: 'w48-data' }) activityId!: string;
  @ApiProperty({ example: 'data-10g' }) productId!: string;
  @ApiProperty({ example: 1 }) quantity!: number;
  @ApiProperty({ example: 990, description: 'Minor units: price × quantity' }) amount!: number;
  @ApiProperty({ example: 'CNY' }) currency!: string;
  @ApiProperty({
    example: 'ord_3f9a0c1b2d4e5f60718293a4',
    description: 'Its order: open it (GET /orders/{orderId}) or pay it with the payment-plan endpoints at once',
  })
  orderId!: string;
  @ApiProperty({ enum: ['RESERVED', 'SOLD', 'RELEASED'], example: 'RESERVED' }) state!: string;
  @ApiProperty({ example: '2026-11-25T02:15:00.000Z', description: 'Unpaid by then, the reservation is released' }) expiresAt!: string;
  @ApiProperty({ example: '2026-11-25T02:00:00.000Z' }) createdAt!: string;
}

export class ReservationListDto {
  @ApiProperty({ type: [ReservationDto] }) items!: ReservationDto[];
}

export class ListedProductDto {
  @ApiProperty({ example: 'data-10g' }) productId!: string;
  @ApiProperty({ example: '10 GB data pack' }) title!: string;
  @ApiProperty({ example: 990 }) price!: number;
  @ApiProperty({ example: 'CNY' }) currency!: string;
  @ApiProperty({ example: 700, description: 'Units left; up to the cache window (2 s) old' }) available!: number;
  @ApiProperty({ example: false }) soldOut!: boolean;
}

export class ProductPageDto {
  @ApiProperty({ example: 'w48-data' }) activityId!: string;
  @ApiProperty({ enum: ['UPCOMING', 'OPEN', 'ENDED'], example: 'OPEN' }) state!: string;
  @ApiProperty({ example: 1 }) page!: number;
  @ApiProperty({ example: 8 }) size!: number;
  @ApiProperty({ example: 24, description: 'Products in the activity' }) total!: number;
  @ApiProperty({ type: [ListedProductDto] }) items!: ListedProductDto[];
  @ApiProperty({ example: '2026-11-25T02:00:01.000Z', description: 'When the page was built (it is cached for 2 s)' }) builtAt!: string;
}

export class ActivitySummaryDto {
  @ApiProperty({ example: 'w48-data' }) activityId!: string;
  @ApiProperty({ example: 'Wednesday 10:00 data sale' }) title!: string;
  @ApiProperty({ example: '2026-11-25T02:00:00.000Z' }) startsAt!: string;
  @ApiProperty({ example: '2026-11-29T15:59:59.000Z' }) endsAt!: string;
  @ApiProperty({ enum: ['UPCOMING', 'OPEN', 'ENDED'], example: 'UPCOMING' }) state!: string;
  @ApiProperty({ example: 24 }) products!: number;
}

export class ActivityListDto {
  @ApiProperty({ type: [ActivitySummaryDto] }) items!: ActivitySummaryDto[];
}
