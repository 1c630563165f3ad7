import { Body, Controller, Get, HttpCode, Param, Post, Put, Res } from '@nestjs/common';
import { ApiCreatedResponse, ApiOkResponse, ApiOperation, ApiTags } from '@nestjs/swagger';
import type { FastifyReply } from 'fastify';
import { Auth } from '../../platform/auth/auth.decorators';
import { ApiErrors, type ErrorsThrown } from '../../platform/http/error-responses';
import { LockContendedError } from '../../engines/locks/lock.errors';
import { ActivitiesService } from './seckill-activities.service';
import { ActivityDto, ActivityIdParamDto, ActivityViewDto, CheckDto, ResultsDto } from './dto';
import { toActivityCommand } from './seckill-activity.command';
import { activityView } from './seckill.views';
import { seckillConflict, SeckillNotFoundError } from './seckill.errors';

const noActivity: ErrorsThrown = { description: 'No such activity', errors: [new SeckillNotFoundError('activity')] };
const started = seckillConflict('ACTIVITY_STARTED', 'The activity has started; it can only be ended');
const busy = new LockContendedError('seckill-activity:w48-data', 4200);
const leftovers = seckillConflict('LEFTOVER_KEYS', 'Products of an earlier activity with these ids still hold reservations or sales', {
  problems: ['product data-10g shard 0: 3 reserved and 12 sold by an earlier activity'],
});

/**
 * Ops: the week's flash sales. Activities are loaded (every product's stock on its shards), checked before the
 * sale, edited until they start, ended early, and their results read after the end.
 */
@ApiTags('ops: flash sales')
@Auth('admin')
@ApiErrors({ 400: 'Invalid path or body; the fields are named and nothing is stored', 503: 'Redis unreachable; see Retry-After. Retrying is safe.' })
@Controller('admin/seckill/activities')
export class SeckillAdminController {
  constructor(private readonly activities: ActivitiesService) {}

  @Post()
  @ApiOperation({ summary: 'Create an activity and load its stock (the same body again returns it)' })
  @ApiCreatedResponse({ type: ActivityViewDto, description: 'Created and loaded' })
  @ApiOkResponse({ type: ActivityViewDto, description: 'It existed with this configuration' })
  @ApiErrors({
    409: {
      description: 'ACTIVITY_EXISTS (another configuration: edit it with PUT), LEFTOVER_KEYS, LOCK_CONTENDED (another request is changing it)',
      errors: [seckillConflict('ACTIVITY_EXISTS', 'Activity w48-data exists with another configuration; edit it with PUT before it starts'), leftovers, busy],
    },
  })
  async create(@Body() dto: ActivityDto, @Res({ passthrough: true }) reply: FastifyReply): Promise<ActivityViewDto> {
    const { activity, created } = await this.activities.create(toActivityCommand(dto, this.activities.limits));
    void reply.status(created ? 201 : 200);
    return activityView(activity, await this.activities.stockOf(activity));
  }

  @Put(':activityId')
  @ApiOperation({ summary: 'Replace an activity’s configuration and reload its stock; only before it starts' })
  @ApiOkResponse({ type: ActivityViewDto })
  @ApiErrors({ 404: noActivity, 409: { description: 'ACTIVITY_STARTED, LEFTOVER_KEYS, LOCK_CONTENDED', errors: [started, leftovers, busy] } })
  async edit(@Param() p: ActivityIdParamDto, @Body() dto: ActivityDto): Promise<ActivityViewDto> {
    const activity = await this.activities.edit(toActivityCommand(dto, this.activities.limits, p.activityId));
    return activityView(activity, await this.activities.stockOf(activity));
  }

  @Get(':activityId')
  @ApiOperation({ summary: 'An activity’s configuration and each product’s live available / reserved / sold' })
  @ApiOkResponse({ type: ActivityViewDto })
  @ApiErrors({ 404: noActivity })
  async get(@Param() p: ActivityIdParamDto): Promise<ActivityViewDto> {
    const a = await this.activities.mustRead(p.activityId);
    return activityView(a, await this.activities.stockOf(a));
  }

  @Get(':activityId/check')
  @ApiOperation({ summary: 'The check before the sale: every product loaded with its stock, nothing left over, the stock invariant' })
  @ApiOkResponse({ type: CheckDto })
  @ApiErrors({ 404: noActivity })
  async check(@Param() p: ActivityIdParamDto): Promise<CheckDto> {
    const c = await this.activities.check(p.activityId);
    return { ...c, checkedAt: new Date(c.checkedAt).toISOString() };
  }

  @Post(':activityId/end')
  @HttpCode(200)
  @ApiOperation({ summary: 'End the sale now (reservations already made stay, and are paid or released as usual)' })
  @ApiOkResponse({ type: ActivityViewDto })
  @ApiErrors({ 404: noActivity, 409: { description: 'LOCK_CONTENDED (another request is changing it)', errors: [busy] } })
  async end(@Param() p: ActivityIdParamDto): Promise<ActivityViewDto> {
    const a = await this.activities.end(p.activityId);
    return activityView(a, await this.activities.stockOf(a));
  }

  @Get(':activityId/results')
  @ApiOperation({ summary: 'After the end: sold, returned and buyers per product, and revenue (kept 90 days)' })
  @ApiOkResponse({ type: ResultsDto })
  @ApiErrors({
    404: noActivity,
    409: { description: 'ACTIVITY_NOT_ENDED', errors: [seckillConflict('ACTIVITY_NOT_ENDED', 'The activity has not ended; its results come after the end')] },
  })
  results(@Param() p: ActivityIdParamDto): Promise<ResultsDto> {
    return this.activities.results(p.activityId);
  }
}
