import { Body, Controller, Delete, Get, Param, Post, Query, Res } from '@nestjs/common';
import { ApiCreatedResponse, ApiOkResponse, ApiOperation, ApiTags } from '@nestjs/swagger';
import type { FastifyReply } from 'fastify';
import { Auth, CurrentCaller } from '../../platform/auth/auth.decorators';
import type { Caller } from '../../platform/http/caller';
import { ApiErrors, type ErrorsThrown } from '../../platform/http/error-responses';
import { LockContendedError } from '../../engines/locks/lock.errors';
import { orderLockName, EXAMPLE_ORDER_ID } from '../orders';

const BadInput = () => ApiErrors({ 400: 'Invalid path, query or body; the fields are named and nothing is stored' });
import {
  ActivityIdParamDto,
  ActivityListDto,
  ProductPageDto,
  ProductPageQueryDto,
  ProductParamsDto,
  ReservationDto,
  ReservationIdParamDto,
  ReservationListDto,
  ReservationsQueryDto,
  ReserveDto,
} from './dto';
import { ListingService } from './listing.service';
import { ReservationsService } from './reservations.service';
import { reservationView } from './seckill.views';
import { REFUSALS, seckillConflict, SeckillNotFoundError } from './seckill.errors';

const noActivity: ErrorsThrown = { description: 'No such activity', errors: [new SeckillNotFoundError('activity')] };
const noReservation: ErrorsThrown = { description: 'No such reservation for this account', errors: [new SeckillNotFoundError('reservation')] };

/**
 * Flash sales, for app users: the account comes from the token. Listing pages are cached for 2 s (their
 * `available` may be that old); a reservation is decided by one script on the product's shard, never from the cache.
 */
@ApiTags('flash sales (app)')
@Auth('user')
@ApiErrors({
  429: 'Rate limited; see Retry-After',
  503: 'Redis unreachable; see Retry-After. Retrying is safe.',
})
@Controller('seckill')
export class SeckillController {
  constructor(
    private readonly listing: ListingService,
    private readonly reservations: ReservationsService,
  ) {}

  @Get('activities')
  @ApiOperation({ summary: 'Current and upcoming flash sales' })
  @ApiOkResponse({ type: ActivityListDto })
  async activities(): Promise<ActivityListDto> {
    return { items: await this.listing.activities() };
  }

  @Get('activities/:activityId/products')
  @BadInput()
  @ApiOperation({ summary: 'A page of the activity’s products, in this visitor’s own order (cached 2 s)' })
  @ApiOkResponse({ type: ProductPageDto })
  @ApiErrors({ 404: noActivity })
  async products(
    @CurrentCaller() caller: Caller,
    @Param() p: ActivityIdParamDto,
    @Query() q: ProductPageQueryDto,
    @Res({ passthrough: true }) reply: FastifyReply,
  ): Promise<string> {
    // The cached page is sent as it is: JSON text, never parsed and serialized again.
    const json = await this.listing.productsJson(caller.id, p.activityId, Number(q.page ?? 1), Number(q.size ?? 8));
    void reply.type('application/json; charset=utf-8');
    return json;
  }

  @Post('activities/:activityId/products/:productId/reservations')
  @BadInput()
  @ApiOperation({ summary: 'Reserve units; then pay the returned order (the same requestId again answers the same reservation)' })
  @ApiCreatedResponse({
    type: ReservationDto,
    description: 'Reserved; the order id is answered and the order is stored at its first use (open or pay it at once)',
  })
  @ApiOkResponse({ type: ReservationDto, description: 'This request’s reservation, made before' })
  @ApiErrors({
    404: { description: 'No such activity or product', errors: [new SeckillNotFoundError('activity'), new SeckillNotFoundError('product')] },
    409: {
      description:
        'SOLD_OUT (details.available: what is left), LIMIT_EXCEEDED, NOT_STARTED, ENDED, NOT_ELIGIBLE, REQUEST_REUSED (this requestId reserved another quantity)',
      errors: [
        REFUSALS.soldOut(0),
        REFUSALS.soldOut(1),
        REFUSALS.limit(1, 1),
        REFUSALS.notStarted(),
        REFUSALS.ended(),
        REFUSALS.notEligible(),
        REFUSALS.requestReused(1),
      ],
    },
    503: 'TRY_AGAIN: others are reserving the product over several shards and this request did not get its turn; or Redis unreachable. See Retry-After; the same request again is safe.',
  })
  async reserve(
    @CurrentCaller() caller: Caller,
    @Param() p: ProductParamsDto,
    @Body() dto: ReserveDto,
    @Res({ passthrough: true }) reply: FastifyReply,
  ): Promise<ReservationDto> {
    const { view, created } = await this.reservations.reserve({ accountId: caller.id, ...p, quantity: dto.quantity, requestId: dto.requestId });
    void reply.status(created ? 201 : 200);
    return reservationView(view);
  }

  @Get('reservations')
  @BadInput()
  @ApiOperation({ summary: 'The account’s reservations, newest first (of one activity, or all)' })
  @ApiOkResponse({ type: ReservationListDto })
  async list(@CurrentCaller() caller: Caller, @Query() q: ReservationsQueryDto): Promise<ReservationListDto> {
    return { items: (await this.reservations.list(caller.id, q.activityId)).map(reservationView) };
  }

  @Get('reservations/:reservationId')
  @BadInput()
  @ApiOperation({ summary: 'One of the account’s reservations' })
  @ApiOkResponse({ type: ReservationDto })
  @ApiErrors({ 404: noReservation })
  async get(@CurrentCaller() caller: Caller, @Param() p: ReservationIdParamDto): Promise<ReservationDto> {
    return reservationView(await this.reservations.get(caller.id, p.reservationId));
  }

  @Delete('reservations/:reservationId')
  @BadInput()
  @ApiOperation({ summary: 'Cancel before paying: the order is closed and the units go back (idempotent)' })
  @ApiOkResponse({ type: ReservationDto, description: 'RELEASED' })
  @ApiErrors({
    404: noReservation,
    409: {
      description: 'RESERVATION_PAID, RESERVATION_PAYING, LOCK_CONTENDED (another request held the order for more than 3 s: retry)',
      errors: [
        seckillConflict('RESERVATION_PAID', 'The reservation is paid'),
        seckillConflict('RESERVATION_PAYING', 'The reservation’s order is being paid'),
        new LockContendedError(orderLockName(EXAMPLE_ORDER_ID), 2400),
      ],
    },
  })
  async cancel(@CurrentCaller() caller: Caller, @Param() p: ReservationIdParamDto): Promise<ReservationDto> {
    return reservationView(await this.reservations.cancel(caller.id, p.reservationId));
  }
}
