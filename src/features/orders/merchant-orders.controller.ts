import { Body, Controller, Get, HttpCode, Param, Post, Res } from '@nestjs/common';
import { ApiCreatedResponse, ApiOkResponse, ApiOperation, ApiTags } from '@nestjs/swagger';
import type { FastifyReply } from 'fastify';
import { Auth, CurrentCaller } from '../../platform/auth/auth.decorators';
import type { Caller } from '../../platform/http/caller';
import { ApiErrors, type ErrorsThrown } from '../../platform/http/error-responses';
import { LockContendedError } from '../../engines/locks/lock.errors';
import { CreateOrderDto } from './dto/create-order.dto';
import { OrderDto } from './dto/order.dto';
import { MerchantOrderNoParamDto } from './dto/params.dto';
import { orderConflict, orderNotFound } from './order.errors';
import { EXAMPLE_ORDER_ID, ORDER_CONFLICTS, OrdersErrorResponses } from './orders-api.decorators';
import type { CreateOrderCommand } from './order.commands';
import { orderLockName } from './order-locks';
import { OrdersService } from './orders.service';

const noOrder: ErrorsThrown = { description: 'No such order for this merchant', errors: [orderNotFound()] };

/** Master orders for merchants (HMAC-signed). A merchant only ever sees its own orders. */
@ApiTags('orders (merchants)')
@Auth('merchant')
@OrdersErrorResponses('Invalid body or merchantOrderNo')
@Controller('merchant/orders')
export class MerchantOrdersController {
  constructor(private readonly orders: OrdersService) {}

  @Post()
  @ApiOperation({ summary: 'Create a master order, idempotent on merchantOrderNo' })
  @ApiCreatedResponse({ type: OrderDto, description: 'New order' })
  @ApiOkResponse({ type: OrderDto, description: 'The same request again: the existing order, as it is now' })
  @ApiErrors({
    409: {
      description:
        'ORDER_NO_REUSED: the merchantOrderNo is used by an order with another payload (payerAccountId included); ORDER_CHANGED: the order changed while this request ran (retry)',
      errors: [
        orderConflict('ORDER_NO_REUSED', 'merchantOrderNo M20261122-0001 is already used by an order with another amount, currency, subject, expiry or payer'),
        orderConflict('ORDER_CHANGED', 'The order changed while this request ran; retry'),
      ],
    },
  })
  async create(@CurrentCaller() caller: Caller, @Body() dto: CreateOrderDto, @Res({ passthrough: true }) reply: FastifyReply): Promise<OrderDto> {
    const command: CreateOrderCommand = {
      merchantId: caller.id,
      merchantOrderNo: dto.merchantOrderNo,
      amount: dto.amount,
      currency: dto.currency,
      subject: dto.subject,
      ...(dto.expireMinutes === undefined ? {} : { expireMinutes: dto.expireMinutes }),
      ...(dto.payerAccountId === undefined ? {} : { payerAccountId: dto.payerAccountId }),
    };
    const { order, created } = await this.orders.create(command);
    void reply.status(created ? 201 : 200);
    return order;
  }

  @Get(':merchantOrderNo')
  @ApiOperation({ summary: 'One of the merchant’s orders' })
  @ApiOkResponse({ type: OrderDto })
  @ApiErrors({ 404: noOrder })
  get(@CurrentCaller() caller: Caller, @Param() p: MerchantOrderNoParamDto): Promise<OrderDto> {
    return this.orders.get(caller.id, p.merchantOrderNo);
  }

  @Post(':merchantOrderNo/close')
  @HttpCode(200)
  @ApiOperation({ summary: 'Close an unpaid order (a closed one is returned as it is)' })
  @ApiOkResponse({ type: OrderDto })
  @ApiErrors({
    404: noOrder,
    409: {
      description: 'ORDER_PAID, ORDER_PAYING (a payment is under way), LOCK_CONTENDED, ORDER_CHANGED, STALE_LOCK_HOLDER',
      errors: [
        orderConflict('ORDER_PAID', 'The order is paid; it cannot be closed'),
        orderConflict('ORDER_PAYING', 'A payment of this order is under way; it cannot be closed now'),
        new LockContendedError(orderLockName(EXAMPLE_ORDER_ID), 2400),
        ORDER_CONFLICTS.changed,
        ORDER_CONFLICTS.staleHolder,
      ],
    },
  })
  close(@CurrentCaller() caller: Caller, @Param() p: MerchantOrderNoParamDto): Promise<OrderDto> {
    return this.orders.close(caller.id, p.merchantOrderNo);
  }
}
