import { Body, Controller, HttpCode, Post } from '@nestjs/common';
import { ApiOkResponse, ApiOperation, ApiTags } from '@nestjs/swagger';
import { Auth } from '../../platform/auth/auth.decorators';
import { ApiErrors } from '../../platform/http/error-responses';
import { BroadcastDto, BroadcastResultDto } from './dto/broadcast.dto';
import { MessagesService } from './messages.service';

/** Ops promotions (admin key). */
@ApiTags('ops: messages')
@Auth('admin')
@ApiErrors({ 400: 'Invalid body; the fields are named and nothing is sent', 503: 'Redis unreachable; see Retry-After' })
@Controller('admin/messages')
export class MessagesAdminController {
  constructor(private readonly messages: MessagesService) {}

  @Post('broadcast')
  @HttpCode(200)
  @ApiOperation({ summary: 'Send a message to every account ("all": one write) or to a list of up to 10,000 accounts' })
  @ApiOkResponse({ type: BroadcastResultDto })
  broadcast(@Body() dto: BroadcastDto): Promise<BroadcastResultDto> {
    return this.messages.broadcast({ title: dto.title, content: dto.content, url: dto.url, audience: dto.audience, requestId: dto.requestId });
  }
}
