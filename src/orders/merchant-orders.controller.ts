import { Body, Controller, Get, HttpCode, Param, Post, Res } from '@nestjs/common';
import { ApiConflictResponse, ApiCreatedResponse, ApiNotFoundResponse, ApiOkResponse, ApiOperation, ApiTags } from '@nestjs/swagger';
import type { FastifyReply } from 'fastify';
import { Auth, CurrentCaller } from '../auth/auth.decorators';
import type { Caller } from '../auth/caller';
import { ErrorBodyDto } from '../http/error-body.dto';
import { CreateOrderDto } from './dto/create-order.dto';
import { OrderDto } from './dto/order.dto';
import { MerchantOrderNoParamDto } from './dto/params.dto';
import { OrdersErrorResponses } from './orders-api.decorators';
import { OrdersService } from './orders.service';

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
  @ApiConflictResponse({ type: ErrorBodyDto, description: 'ORDER_NO_REUSED: the merchantOrderNo is used by an order with another payload' })
  async create(@CurrentCaller() caller: Caller, @Body() dto: CreateOrderDto, @Res({ passthrough: true }) reply: FastifyReply): Promise<OrderDto> {
    const { order, created } = await this.orders.create(caller.id, dto);
    void reply.status(created ? 201 : 200);
    return order;
  }

  @Get(':merchantOrderNo')
  @ApiOperation({ summary: 'One of the merchant’s orders' })
  @ApiOkResponse({ type: OrderDto })
  @ApiNotFoundResponse({ type: ErrorBodyDto, description: 'No such order for this merchant' })
  get(@CurrentCaller() caller: Caller, @Param() p: MerchantOrderNoParamDto): Promise<OrderDto> {
    return this.orders.get(caller.id, p.merchantOrderNo);
  }

  @Post(':merchantOrderNo/close')
  @HttpCode(200)
  @ApiOperation({ summary: 'Close an unpaid order (a closed one is returned as it is)' })
  @ApiOkResponse({ type: OrderDto })
  @ApiNotFoundResponse({ type: ErrorBodyDto, description: 'No such order for this merchant' })
  @ApiConflictResponse({ type: ErrorBodyDto, description: 'ORDER_PAID, ORDER_PAYING (a payment is under way), LOCK_CONTENDED, ORDER_CHANGED, STALE_LOCK_HOLDER' })
  close(@CurrentCaller() caller: Caller, @Param() p: MerchantOrderNoParamDto): Promise<OrderDto> {
    return this.orders.close(caller.id, p.merchantOrderNo);
  }
}
