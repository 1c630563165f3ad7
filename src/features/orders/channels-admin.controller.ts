import { Body, Controller, Get, Param, Put } from '@nestjs/common';
import { ApiOkResponse, ApiOperation, ApiTags } from '@nestjs/swagger';
import { Auth } from '../../platform/auth/auth.decorators';
import { ApiErrors } from '../../platform/http/error-responses';
import { ChannelGateway } from './channels/channel-gateway';
import type { SimulatedChannel } from './channels/simulated-channel';
import { ChannelDto, ChannelSettingsDto } from './dto/channel-settings.dto';
import { MethodParamDto } from './dto/params.dto';

const view = (c: SimulatedChannel): ChannelDto => ({ method: c.method, ...c.current, calls: c.calls });

/** Ops: the simulated payment channels of this instance (latency and outcomes), to force every payment path. */
@ApiTags('ops: payment channels')
@Auth('admin')
@Controller('admin/channels')
export class ChannelsAdminController {
  constructor(private readonly channels: ChannelGateway) {}

  @Get()
  @ApiOperation({ summary: 'Every channel’s settings and call counts (this instance)' })
  @ApiOkResponse({ type: [ChannelDto] })
  list(): ChannelDto[] {
    return this.channels.all().map(view);
  }

  @Put(':method')
  @ApiOperation({ summary: 'Change a channel’s latency and outcomes (this instance; fields left out keep their value)' })
  @ApiOkResponse({ type: ChannelDto })
  @ApiErrors({ 400: 'An unknown method, outcome or a latency out of range; the fields are named' })
  configure(@Param() p: MethodParamDto, @Body() dto: ChannelSettingsDto): ChannelDto {
    this.channels.configure(p.method, dto);
    return view(this.channels.channel(p.method));
  }
}
