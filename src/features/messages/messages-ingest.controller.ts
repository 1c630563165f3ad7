import { Body, Controller, Delete, HttpCode, Param, Post, Res } from '@nestjs/common';
import { ApiCreatedResponse, ApiOkResponse, ApiOperation, ApiTags } from '@nestjs/swagger';
import type { FastifyReply } from 'fastify';
import { Auth } from '../../platform/auth/auth.decorators';
import { ApiErrors } from '../../platform/http/error-responses';
import { FinishResultDto, PendingActionParamDto, PendingActionResultDto, StartPendingActionDto } from './dto/pending-action.dto';
import { batchItemCommand, toWriteCommand } from './dto/write.command';
import { BatchResultDto, WithdrawMessageDto, WithdrawResultDto, WriteBatchDto, WriteMessageDto, WriteResultDto } from './dto/write-message.dto';
import { MessagesService } from './messages.service';
import { PendingActionsService } from './pending-actions.service';

/** Business systems write messages and report unfinished actions (service token). */
@ApiTags('messages (business systems)')
@Auth('service')
@ApiErrors({ 400: 'Invalid body or path; the fields are named and nothing is stored', 503: 'Redis unreachable; see Retry-After' })
@Controller()
export class MessagesIngestController {
  constructor(
    private readonly messages: MessagesService,
    private readonly pending: PendingActionsService,
  ) {}

  @Post('messages')
  @ApiOperation({ summary: 'Write one message, idempotent on (bizType, outerBizId) per account; optionally with its own expiry' })
  @ApiCreatedResponse({ type: WriteResultDto, description: 'New message' })
  @ApiOkResponse({ type: WriteResultDto, description: 'Duplicate: the original msgId; or withdrawn, or expiresAt already past (expired): nothing stored' })
  async write(@Body() dto: WriteMessageDto, @Res({ passthrough: true }) reply: FastifyReply): Promise<WriteResultDto> {
    const r = await this.messages.write(toWriteCommand(dto));
    void reply.status(r.duplicate || r.expired ? 200 : 201);
    return r;
  }

  @Post('messages/withdraw')
  @HttpCode(200)
  @ApiOperation({ summary: 'Take back the message with (bizType, outerBizId) from an account; idempotent, and later writes of it store nothing' })
  @ApiOkResponse({ type: WithdrawResultDto })
  withdraw(@Body() dto: WithdrawMessageDto): Promise<WithdrawResultDto> {
    return this.messages.withdraw({ accountId: dto.accountId, bizType: dto.bizType, outerBizId: dto.outerBizId });
  }

  @Post('messages/batch')
  @ApiOperation({ summary: 'Write up to 500 messages, each with its own outcome' })
  @ApiOkResponse({ type: BatchResultDto })
  async batch(@Body() dto: WriteBatchDto, @Res({ passthrough: true }) reply: FastifyReply): Promise<BatchResultDto> {
    void reply.status(200);
    return this.messages.writeBatch(await Promise.all(dto.messages.map(batchItemCommand)));
  }

  @Post('pending-actions')
  @ApiOperation({ summary: 'A user started an action; remind them after its delay unless it is finished first' })
  @ApiCreatedResponse({ type: PendingActionResultDto })
  start(@Body() dto: StartPendingActionDto): Promise<PendingActionResultDto> {
    return this.pending.start({ accountId: dto.accountId, bizType: dto.bizType, context: dto.context });
  }

  @Delete('pending-actions/:bizType/:accountId')
  @ApiOperation({ summary: 'The user finished the action: no reminder' })
  @ApiOkResponse({ type: FinishResultDto })
  async finish(@Param() p: PendingActionParamDto): Promise<FinishResultDto> {
    return { wasPending: await this.pending.finish({ accountId: p.accountId, bizType: p.bizType }) };
  }
}
