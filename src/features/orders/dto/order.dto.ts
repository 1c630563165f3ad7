import { ApiProperty, ApiPropertyOptional } from '@nestjs/swagger';
import { ORDER_STATUSES, type OrderStatus } from '../order.types';

/** A master order as its merchant sees it. */
export class OrderDto {
  @ApiProperty({ description: 'The order id payers use', example: 'ord_3f9a0c1b2d4e5f60718293a4' }) orderId!: string;
  @ApiProperty({ example: 'M20261122-0001' }) merchantOrderNo!: string;
  @ApiProperty({ description: 'Minor units', example: 12800 }) amount!: number;
  @ApiProperty({ example: 'CNY' }) currency!: string;
  @ApiProperty({ example: 'Coffee beans 1 kg' }) subject!: string;
  @ApiProperty({ enum: ORDER_STATUSES, example: 'CREATED' }) status!: OrderStatus;
  @ApiProperty({ description: 'Bumped by every state change (optimistic locking)', example: 1 }) version!: number;
  @ApiProperty({ example: '2026-11-22T08:30:00.000Z' }) createdAt!: string;
  @ApiProperty({ description: 'An unpaid order closes by itself at this time', example: '2026-11-22T09:00:00.000Z' }) expiresAt!: string;
  @ApiPropertyOptional({ description: 'The only app account that may pay the order, when the merchant named one', example: 'acc_1001' })
  payerAccountId?: string;
  @ApiPropertyOptional({ example: '2026-11-22T08:31:02.120Z' }) paidAt?: string;
  @ApiPropertyOptional({ description: 'The plan that paid it', example: 'ord_3f9a0c1b2d4e5f60718293a4_p1' }) paidPlanId?: string;
  @ApiPropertyOptional({ example: '2026-11-22T09:00:00.015Z' }) closedAt?: string;
  @ApiPropertyOptional({ description: 'MERCHANT (closed by the merchant) or EXPIRED', example: 'MERCHANT' }) closeReason?: string;
}

/** A master order as the paying app user sees it (checkout). */
export class CheckoutOrderDto {
  @ApiProperty({ example: 'ord_3f9a0c1b2d4e5f60718293a4' }) orderId!: string;
  @ApiProperty({ example: 'm_demo' }) merchantId!: string;
  @ApiProperty({ example: 'Coffee beans 1 kg' }) subject!: string;
  @ApiProperty({ description: 'Minor units', example: 12800 }) amount!: number;
  @ApiProperty({ example: 'CNY' }) currency!: string;
  @ApiProperty({ enum: ORDER_STATUSES, example: 'CREATED' }) status!: OrderStatus;
  @ApiProperty({ example: '2026-11-22T09:00:00.000Z' }) expiresAt!: string;
  @ApiPropertyOptional({ description: 'The only app account that may pay the order, when the merchant named one', example: 'acc_1001' })
  payerAccountId?: string;
  @ApiPropertyOptional({ description: 'The plan that may run now', example: 'ord_3f9a0c1b2d4e5f60718293a4_p1' }) activePlanId?: string;
}
