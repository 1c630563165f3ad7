import { Controller, Delete, Get, HttpCode, Param, Post, Query } from '@nestjs/common';
import { ApiOkResponse, ApiOperation, ApiTags } from '@nestjs/swagger';
import { Auth, CurrentCaller } from '../../platform/auth/auth.decorators';
import type { Caller } from '../../platform/http/caller';
import { ApiErrors, type ErrorsThrown } from '../../platform/http/error-responses';
import { ScriptCode, scriptErrorFor } from '../../platform/scripts/script.errors';
import { MarkAllReadResultDto, MarkReadResultDto, MessageDto, MsgIdParamDto, PullQueryDto, PullResultDto, UnreadCountDto } from './dto/pull.dto';
import { MessagesService } from './messages.service';

/** The scripts answer NOT_FOUND for a msgId the account does not have. */
const noMessage: ErrorsThrown = { description: 'No such message in this account', errors: [scriptErrorFor('messages/get', ScriptCode.NOT_FOUND)] };
const badMsgId = 'A bad msgId';

/** The app's side of the message center. The account always comes from the token. */
@ApiTags('messages (app)')
@Auth('user')
@ApiErrors({ 429: 'Rate limited; see Retry-After', 503: 'Redis unreachable; see Retry-After' })
@Controller('messages')
export class MessagesController {
  constructor(private readonly messages: MessagesService) {}

  @Get()
  @ApiOperation({ summary: 'Messages stored after `after` (oldest first), or the newest page without it' })
  @ApiOkResponse({ type: PullResultDto })
  @ApiErrors({ 400: 'A bad cursor or limit' })
  pull(@CurrentCaller() caller: Caller, @Query() q: PullQueryDto): Promise<PullResultDto> {
    return this.messages.pull(caller.id, q.after, q.limit ?? 20);
  }

  @Get('unread-count')
  @ApiOperation({ summary: 'How many messages are unread' })
  @ApiOkResponse({ type: UnreadCountDto })
  async unread(@CurrentCaller() caller: Caller): Promise<UnreadCountDto> {
    return { unread: await this.messages.unreadCount(caller.id) };
  }

  @Post('read-all')
  @HttpCode(200)
  @ApiOperation({ summary: 'Mark every message read' })
  @ApiOkResponse({ type: MarkAllReadResultDto })
  markAll(@CurrentCaller() caller: Caller): Promise<MarkAllReadResultDto> {
    return this.messages.markAllRead(caller.id);
  }

  @Get(':msgId')
  @ApiOperation({ summary: 'One message' })
  @ApiOkResponse({ type: MessageDto })
  @ApiErrors({ 400: badMsgId, 404: noMessage })
  get(@CurrentCaller() caller: Caller, @Param() p: MsgIdParamDto): Promise<MessageDto> {
    return this.messages.get(caller.id, p.msgId);
  }

  @Post(':msgId/read')
  @HttpCode(200)
  @ApiOperation({ summary: 'Mark one message read' })
  @ApiOkResponse({ type: MarkReadResultDto })
  @ApiErrors({ 400: badMsgId, 404: noMessage })
  markRead(@CurrentCaller() caller: Caller, @Param() p: MsgIdParamDto): Promise<MarkReadResultDto> {
    return this.messages.markRead(caller.id, p.msgId);
  }

  @Delete(':msgId')
  @ApiOperation({ summary: 'Delete one message' })
  @ApiOkResponse({ type: UnreadCountDto })
  @ApiErrors({ 400: badMsgId, 404: noMessage })
  async remove(@CurrentCaller() caller: Caller, @Param() p: MsgIdParamDto): Promise<UnreadCountDto> {
    return { unread: await this.messages.remove(caller.id, p.msgId) };
  }
}
