import { ApiProperty } from '@nestjs/swagger';
import { IsIn } from 'class-validator';
import { IsIdString } from '../../../platform/http/id-string';
import { MERCHANT_ORDER_NO_RE, ORDER_ID_RE, PLAN_ID_RE } from '../../../platform/core/ids';
import { PAYMENT_METHODS, type PaymentMethod } from '../order.types';

export class MerchantOrderNoParamDto {
  /** Your own order number: the `merchantOrderNo` you created the order with */
  @ApiProperty({ example: 'M20261122-0001', maxLength: 64 })
  @IsIdString(64, MERCHANT_ORDER_NO_RE, 'merchantOrderNo must be 1-64 characters of A-Z a-z 0-9 _ . : -, not "." or ".."')
  merchantOrderNo!: string;
}

export class OrderIdParamDto {
  /** The `orderId` the order's create answered (`ord_` and 24 hex digits) */
  @ApiProperty({ example: 'ord_3f9a0c1b2d4e5f60718293a4', maxLength: 28 })
  @IsIdString(28, ORDER_ID_RE, 'orderId must be ord_ and 24 hex digits')
  orderId!: string;
}

export class PlanIdParamDto {
  /** The `planId` the payment plan's create answered (the order id, `_p` and a number) */
  @ApiProperty({ example: 'ord_3f9a0c1b2d4e5f60718293a4_p1', maxLength: 36 })
  @IsIdString(36, PLAN_ID_RE, 'planId must be an order id, _p and a number')
  planId!: string;
}

export class MethodParamDto {
  /** The payment channel to configure */
  @ApiProperty({ example: 'quickpay' })
  @IsIn(PAYMENT_METHODS, { message: `method must be one of ${PAYMENT_METHODS.join(', ')}` })
  method!: PaymentMethod;
}
