import { Body, Controller, Get, Param, Post, Res } from '@nestjs/common';
import { ApiAcceptedResponse, ApiConflictResponse, ApiCreatedResponse, ApiNotFoundResponse, ApiOkResponse, ApiOperation, ApiTags } from '@nestjs/swagger';
import type { FastifyReply } from 'fastify';
import { Auth, CurrentCaller } from '../auth/auth.decorators';
import type { Caller } from '../auth/caller';
import { ErrorBodyDto } from '../http/error-body.dto';
import { CheckoutOrderDto } from './dto/order.dto';
import { OrderIdParamDto, PlanIdParamDto } from './dto/params.dto';
import { CreatePlanDto, PlanDto } from './dto/payment-plan.dto';
import { planView } from './order-views';
import { OrdersErrorResponses } from './orders-api.decorators';
import { OrdersService } from './orders.service';
import { PaymentPlansService } from './payment-plans.service';
import { PaymentRunner } from './payment-runner.service';

/**
 * Paying, for app users. The account comes from the token. The first plan
 * binds the order to its account: from then on the order and its plans are
 * 404 for every other account.
 */
@ApiTags('payments (app)')
@Auth('user')
@OrdersErrorResponses('Invalid id or body')
@ApiNotFoundResponse({ type: ErrorBodyDto, description: 'No such order or plan for this account' })
@Controller()
export class PaymentsController {
  constructor(
    private readonly orders: OrdersService,
    private readonly plans: PaymentPlansService,
    private readonly runner: PaymentRunner,
  ) {}

  @Get('orders/:orderId')
  @ApiOperation({ summary: 'The order at checkout' })
  @ApiOkResponse({ type: CheckoutOrderDto })
  checkout(@CurrentCaller() caller: Caller, @Param() p: OrderIdParamDto): Promise<CheckoutOrderDto> {
    return this.orders.checkout(caller.id, p.orderId);
  }

  @Post('orders/:orderId/payment-plans')
  @ApiOperation({ summary: 'Create the order’s payment plan under the order lock (the same instructions again return it)' })
  @ApiCreatedResponse({ type: PlanDto, description: 'New plan (a PENDING plan with other instructions is superseded)' })
  @ApiOkResponse({ type: PlanDto, description: 'The order’s PENDING plan with these instructions' })
  @ApiConflictResponse({ type: ErrorBodyDto, description: 'ORDER_PAID, ORDER_CLOSED, ORDER_PAYING, ORDER_EXPIRED, LOCK_CONTENDED (another request holds the order), ORDER_CHANGED, STALE_LOCK_HOLDER' })
  async createPlan(@CurrentCaller() caller: Caller, @Param() p: OrderIdParamDto, @Body() dto: CreatePlanDto, @Res({ passthrough: true }) reply: FastifyReply): Promise<PlanDto> {
    const { plan, created } = await this.plans.create(caller.id, p.orderId, dto.instructions);
    void reply.status(created ? 201 : 200);
    return planView(plan);
  }

  @Get('payment-plans/:planId')
  @ApiOperation({ summary: 'One of the account’s plans' })
  @ApiOkResponse({ type: PlanDto })
  async getPlan(@CurrentCaller() caller: Caller, @Param() p: PlanIdParamDto): Promise<PlanDto> {
    return planView(await this.plans.get(caller.id, p.planId));
  }

  @Post('payment-plans/:planId/pay')
  @ApiOperation({ summary: 'Run the plan’s instructions in order, under the plan lock' })
  @ApiOkResponse({ type: PlanDto, description: 'Finished: PAID, or FAILED (what was paid is reversed; the order is payable with a new plan)' })
  @ApiAcceptedResponse({ type: PlanDto, description: 'PAYING: a channel gave an unknown outcome; it is queried in the background' })
  @ApiConflictResponse({ type: ErrorBodyDto, description: 'LOCK_CONTENDED (another pay of this plan is running), PLAN_NOT_PAYABLE, ORDER_CLOSED, ORDER_PAID, ORDER_EXPIRED; ORDER_CHANGED, STALE_LOCK_HOLDER, LOCK_LOST (this request lost its lock or raced another writer: read the plan again and retry)' })
  async pay(@CurrentCaller() caller: Caller, @Param() p: PlanIdParamDto, @Res({ passthrough: true }) reply: FastifyReply): Promise<PlanDto> {
    const plan = await this.runner.pay(caller.id, p.planId);
    void reply.status(plan.status === 'PAYING' ? 202 : 200);
    return planView(plan);
  }
}
