import { Controller, Get, HttpCode, Param, Post } from '@nestjs/common';
import { ApiOkResponse, ApiOperation, ApiTags } from '@nestjs/swagger';
import { Auth, CurrentCaller } from '../../platform/auth/auth.decorators';
import type { Caller } from '../../platform/http/caller';
import { ApiErrors } from '../../platform/http/error-responses';
import { GrabResultDto, MyEnvelopesDto, RainScreenDto, RedEnvelopeActivityIdParamDto } from './dto/red-envelope-activity.dto';
import { GrabService } from './grab.service';
import { RedEnvelopeNotFoundError } from './red-envelope.errors';

/** The rain, for app users: the account comes from the token. */
@ApiTags('red envelopes (app)')
@Auth('user')
@ApiErrors({
  400: 'Invalid path; the fields are named',
  404: { description: 'No such activity', errors: [new RedEnvelopeNotFoundError()] },
  429: 'Rate limited; see Retry-After',
  503: 'Redis unreachable; see Retry-After. Retrying is safe: a repeated tap returns the same envelope.',
})
@Controller('red-envelopes/activities')
export class RedEnvelopeController {
  constructor(private readonly grabs: GrabService) {}

  @Post(':activityId/grab')
  @HttpCode(200)
  @ApiOperation({ summary: 'Tap: GRABBED, ALREADY_GRABBED (the same envelope again), NONE_LEFT, NOT_STARTED or ENDED' })
  @ApiOkResponse({ type: GrabResultDto })
  grab(@CurrentCaller() caller: Caller, @Param() p: RedEnvelopeActivityIdParamDto): Promise<GrabResultDto> {
    return this.grabs.grab(caller.id, p.activityId);
  }

  @Get(':activityId/mine')
  @ApiOperation({ summary: 'My envelope(s) in this rain and whether each is credited to my wallet yet' })
  @ApiOkResponse({ type: MyEnvelopesDto })
  @ApiErrors({
    404: {
      description: 'No such activity, or no envelope of this account in it',
      errors: [new RedEnvelopeNotFoundError(), new RedEnvelopeNotFoundError('envelope')],
    },
  })
  async mine(@CurrentCaller() caller: Caller, @Param() p: RedEnvelopeActivityIdParamDto): Promise<MyEnvelopesDto> {
    return { items: await this.grabs.mine(caller.id, p.activityId) };
  }

  @Get(':activityId')
  @ApiOperation({ summary: 'What the rain screen needs: state, times, envelopes left (no amounts)' })
  @ApiOkResponse({ type: RainScreenDto })
  screen(@Param() p: RedEnvelopeActivityIdParamDto): Promise<RainScreenDto> {
    return this.grabs.screen(p.activityId);
  }
}
