import { Body, Controller, Get, HttpCode, Param, Post, Res } from '@nestjs/common';
import { ApiAcceptedResponse, ApiOkResponse, ApiOperation, ApiTags } from '@nestjs/swagger';
import type { FastifyReply } from 'fastify';
import { Auth } from '../../platform/auth/auth.decorators';
import { ApiErrors, type ErrorsThrown } from '../../platform/http/error-responses';
import { InsufficientFundsError, ReferenceReusedError } from '../wallet';
import { RedEnvelopeActivities } from './red-envelope-activities.service';
import { toCreateCommand } from './red-envelope-activity.command';
import {
  CreateRedEnvelopeActivityDto,
  DistributionDto,
  ReconciliationDto,
  RedEnvelopeActivityIdParamDto,
  RedEnvelopeActivityViewDto,
  RedriveDto,
} from './dto/red-envelope-activity.dto';
import { RedEnvelopeConfig } from './red-envelope.config';
import { RedEnvelopeConflictError, RedEnvelopeNotFoundError } from './red-envelope.errors';
import type { ActivityRecord } from './red-envelope.types';

const noActivity: ErrorsThrown = { description: 'No such activity', errors: [new RedEnvelopeNotFoundError()] };

/** Ops: red-envelope rains, funded by a sponsor's wallet and preloaded as pre-split envelopes. */
@ApiTags('ops: red envelopes')
@Auth('admin')
@ApiErrors({ 400: 'Invalid path or body; the fields are named and nothing is stored', 503: 'Redis unreachable; see Retry-After. Retrying is safe.' })
@Controller('admin/red-envelopes/activities')
export class RedEnvelopeAdminController {
  constructor(
    private readonly activities: RedEnvelopeActivities,
    private readonly config: RedEnvelopeConfig,
  ) {}

  @Post()
  @HttpCode(202)
  @ApiOperation({ summary: 'Create a rain: the sponsor’s wallet is debited the total, then the envelopes are split and preloaded in the background' })
  @ApiAcceptedResponse({ type: RedEnvelopeActivityViewDto, description: 'Created and funded; loading (see GET for the progress)' })
  @ApiOkResponse({
    type: RedEnvelopeActivityViewDto,
    description: 'The same create again (the same body, also after the window): nothing new was accepted, nothing debited; the rain as it is now',
  })
  @ApiErrors({
    409: {
      description:
        'INSUFFICIENT_FUNDS (the sponsor cannot fund it), REFERENCE_REUSED (the sponsor’s wallet holds a funding of this rain’s reference with other terms): nothing is created; ACTIVITY_EXISTS (another configuration, or the id was used by an earlier rain)',
      errors: [
        new InsufficientFundsError(),
        new ReferenceReusedError(),
        new RedEnvelopeConflictError('ACTIVITY_EXISTS', 'Activity nye-quiz exists with another configuration'),
      ],
    },
  })
  async create(@Body() dto: CreateRedEnvelopeActivityDto, @Res({ passthrough: true }) reply: FastifyReply): Promise<RedEnvelopeActivityViewDto> {
    const { activity, created } = await this.activities.create(toCreateCommand(dto, this.config));
    if (!created) void reply.status(200);
    return this.view(activity);
  }

  @Get(':activityId')
  @ApiOperation({ summary: 'The rain’s state (FUNDING, LOADING, READY, OPEN, ENDED, SETTLED), the preload’s progress, and the step it is stalled at, if any' })
  @ApiOkResponse({ type: RedEnvelopeActivityViewDto })
  @ApiErrors({ 404: noActivity })
  async get(@Param() p: RedEnvelopeActivityIdParamDto): Promise<RedEnvelopeActivityViewDto> {
    return this.view(await this.activities.mustRead(p.activityId));
  }

  @Get(':activityId/distribution')
  @ApiOperation({ summary: 'The split’s amounts: min, max, mean, percentiles and a histogram' })
  @ApiOkResponse({ type: DistributionDto })
  @ApiErrors({ 404: noActivity })
  async distribution(@Param() p: RedEnvelopeActivityIdParamDto): Promise<DistributionDto> {
    return this.activities.distributionOf(await this.activities.mustRead(p.activityId)) as DistributionDto;
  }

  @Get(':activityId/reconciliation')
  @ApiOperation({ summary: 'Where every cent is: grabbed, credited, pending, dead-lettered, left and refunded, and whether it balances' })
  @ApiOkResponse({ type: ReconciliationDto })
  @ApiErrors({ 404: noActivity })
  reconciliation(@Param() p: RedEnvelopeActivityIdParamDto): Promise<ReconciliationDto> {
    return this.activities.reconciliation(p.activityId);
  }

  @Post(':activityId/dead-letters/redrive')
  @HttpCode(200)
  @ApiOperation({
    summary: 'Re-drive: the dead-lettered grabs go back on their credit streams, and an unfinished load or end runs again now (the way out of a stall)',
  })
  @ApiOkResponse({ type: RedriveDto })
  @ApiErrors({ 404: noActivity })
  async redrive(@Param() p: RedEnvelopeActivityIdParamDto): Promise<RedriveDto> {
    return { redriven: await this.activities.redrive(p.activityId) };
  }

  private async view(a: ActivityRecord): Promise<RedEnvelopeActivityViewDto> {
    const stalls = (await this.activities.stallsOf(a)).map((x) => ({ step: x.step, reason: x.reason, since: new Date(x.since).toISOString() }));
    return {
      activityId: a.activityId,
      sponsorMerchantId: a.sponsorMerchantId,
      title: a.title,
      currency: a.currency,
      totalAmount: a.totalAmount,
      count: a.count,
      minAmount: a.minAmount,
      perUserLimit: a.perUserLimit,
      subPools: a.subPools,
      startsAt: new Date(a.startsAt).toISOString(),
      endsAt: new Date(a.endsAt).toISOString(),
      state: this.activities.stateOf(a),
      progress: { loaded: a.state === 'FUNDING' ? 0 : a.state === 'LOADING' ? a.loaded : a.count, total: a.count },
      seed: a.seed,
      ...(a.refundedAmount !== undefined ? { refundedAmount: a.refundedAmount } : {}),
      ...(stalls.length ? { stalled: stalls[0], stalls } : {}),
    };
  }
}
