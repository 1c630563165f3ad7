import { Body, Controller, Get, Param, Post, Res } from '@nestjs/common';
import { ApiAcceptedResponse, ApiCreatedResponse, ApiOkResponse, ApiOperation, ApiTags } from '@nestjs/swagger';
import type { FastifyReply } from 'fastify';
import { Auth, CurrentCaller } from '../../platform/auth/auth.decorators';
import type { Caller } from '../../platform/http/caller';
import { ApiErrors, type ErrorsThrown } from '../../platform/http/error-responses';
import { LockContendedError, LockLostError } from '../../engines/locks/lock.errors';
import { CheckoutOrderDto } from './dto/order.dto';
import { OrderIdParamDto, PlanIdParamDto } from './dto/params.dto';
import { CreatePlanDto, PlanDto } from './dto/payment-plan.dto';
import { planView } from './order.views';
import { orderConflict, orderNotFound, planNotFound } from './order.errors';
import { EXAMPLE_ORDER_ID, ORDER_CONFLICTS, OrdersErrorResponses } from './orders-api.decorators';
import { orderLockName, planLockName } from './order-locks';
import { OrdersService } from './orders.service';
import { PaymentPlansService, planLimitReached } from './payment-plans.service';
import { PaymentRunner } from './payment-runner.service';

const EXAMPLE_PLAN_ID = `${EXAMPLE_ORDER_ID}_p1`;
const noOrder: ErrorsThrown = { description: 'No such order for this account', errors: [orderNotFound()] };
const noPlan: ErrorsThrown = { description: 'No such plan for this account', errors: [planNotFound()] };

/**
 * Paying, for app users. The account comes from the token. The first plan
 * binds the order to its account (an order created with a payerAccountId is
 * bound to that account from the start): from then on the order and its plans
 * are 404 for every other account.
 */
@ApiTags('payments (app)')
@Auth('user')
@OrdersErrorResponses('Invalid id or body')
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
  @ApiErrors({ 404: noOrder })
  checkout(@CurrentCaller() caller: Caller, @Param() p: OrderIdParamDto): Promise<CheckoutOrderDto> {
    return this.orders.checkout(caller.id, p.orderId);
  }

  @Post('orders/:orderId/payment-plans')
  @ApiOperation({ summary: 'Create the order’s payment plan under the order lock (the same instructions again return it)' })
  @ApiCreatedResponse({ type: PlanDto, description: 'New plan (a PENDING plan with other instructions is superseded)' })
  @ApiOkResponse({ type: PlanDto, description: 'The order’s PENDING plan with these instructions' })
  @ApiErrors({
    404: noOrder,
    409: {
      description:
        'ORDER_PAID, ORDER_CLOSED, ORDER_PAYING, ORDER_EXPIRED, PLAN_LIMIT (the order has had 100 plans), LOCK_CONTENDED (another request holds the order), ORDER_CHANGED, STALE_LOCK_HOLDER',
      errors: [
        ORDER_CONFLICTS.alreadyPaid,
        ORDER_CONFLICTS.closed,
        orderConflict('ORDER_PAYING', 'A plan of this order is being paid', { planId: EXAMPLE_PLAN_ID }),
        ORDER_CONFLICTS.expired,
        planLimitReached(),
        new LockContendedError(orderLockName(EXAMPLE_ORDER_ID), 2400),
        ORDER_CONFLICTS.changed,
        ORDER_CONFLICTS.staleHolder,
      ],
    },
  })
  async createPlan(
    @CurrentCaller() caller: Caller,
    @Param() p: OrderIdParamDto,
    @Body() dto: CreatePlanDto,
    @Res({ passthrough: true }) reply: FastifyReply,
  ): Promise<PlanDto> {
    const instructions = dto.instructions.map((i) => ({ method: i.method, amount: i.amount }));
    const { plan, created } = await this.plans.create({ accountId: caller.id, orderId: p.orderId, instructions });
    void reply.status(created ? 201 : 200);
    return planView(plan);
  }

  @Get('payment-plans/:planId')
  @ApiOperation({ summary: 'One of the account’s plans' })
  @ApiOkResponse({ type: PlanDto })
  @ApiErrors({ 404: noPlan })
  async getPlan(@CurrentCaller() caller: Caller, @Param() p: PlanIdParamDto): Promise<PlanDto> {
    return planView(await this.plans.get(caller.id, p.planId));
  }

  @Post('payment-plans/:planId/pay')
  @ApiOperation({ summary: 'Run the plan’s instructions in order, under the plan lock' })
  @ApiOkResponse({ type: PlanDto, description: 'Finished: PAID, or FAILED (what was paid is reversed; the order is payable with a new plan)' })
  @ApiAcceptedResponse({ type: PlanDto, description: 'PAYING: a channel gave an unknown outcome; it is queried in the background' })
  @ApiErrors({
    404: noPlan,
    409: {
      description:
        'LOCK_CONTENDED (another pay of this plan is running), PLAN_NOT_PAYABLE, ORDER_CLOSED, ORDER_PAID, ORDER_EXPIRED; ORDER_CHANGED, STALE_LOCK_HOLDER, LOCK_LOST (this request lost its lock or raced another writer: read the plan again and retry)',
      errors: [
        new LockContendedError(planLockName(EXAMPLE_PLAN_ID), 2400),
        orderConflict('PLAN_NOT_PAYABLE', 'The plan is superseded; create a new one'),
        orderConflict('PLAN_NOT_PAYABLE', 'This is not the order’s current plan'),
        ORDER_CONFLICTS.closed,
        ORDER_CONFLICTS.alreadyPaid,
        ORDER_CONFLICTS.expired,
        ORDER_CONFLICTS.changed,
        ORDER_CONFLICTS.staleHolder,
        new LockLostError(planLockName(EXAMPLE_PLAN_ID), '0c6f2a9e-4b1d-4f3a-9e7c-5d2b8a1f6e30'),
      ],
    },
  })
  async pay(@CurrentCaller() caller: Caller, @Param() p: PlanIdParamDto, @Res({ passthrough: true }) reply: FastifyReply): Promise<PlanDto> {
    const plan = await this.runner.pay({ accountId: caller.id, planId: p.planId });
    void reply.status(plan.status === 'PAYING' ? 202 : 200);
    return planView(plan);
  }
}
