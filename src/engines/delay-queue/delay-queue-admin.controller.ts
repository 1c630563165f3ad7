import { Controller, Delete, Get, HttpCode, Param, Post, Query } from '@nestjs/common';
import { ApiOkResponse, ApiOperation, ApiTags } from '@nestjs/swagger';
import { Auth } from '../../platform/auth/auth.decorators';
import { ApiError } from '../../platform/http/api.error';
import { ApiErrors } from '../../platform/http/error-responses';
import { ScriptNotFoundError } from '../../platform/scripts/script.errors';
import { DelayQueueService } from './delay-queue.service';
import {
  CancelResultDto,
  DeadLetterPageDto,
  DeadPageQueryDto,
  ItemParamDto,
  QueueListDto,
  QueueParamDto,
  QueueStatsDto,
  RetryResultDto,
} from './dto/delay-queue-admin.dto';

/** A route that names a queue (and an item) can answer 400. */
const badInput = 'A bad queue name, id or paging parameter';
/** What a per-queue route answers for the documented examples' queue, which nobody has scheduled on. */
const unknownQueue = (queue: string) => new ApiError(404, 'NOT_FOUND', `no delay queue ${queue}: nothing was ever scheduled on it and no processor runs it`);
const noSuchQueue = unknownQueue('close-reminder');
const noDeadLetter = (queue: string, id: string) =>
  new ApiError(404, 'NOT_FOUND', `no dead letter ${id} in queue ${queue} (never dead, already retried, or cancelled)`);

/**
 * Ops view of the delay queues (admin key). A queue is known once any instance
 * has scheduled on it or registered a processor for it (the shared registry
 * `listQueues` reads); every per-queue route answers 404 for any other name,
 * instead of reporting an empty queue that does not exist (a typo).
 */
@ApiTags('ops: delay queues')
@ApiErrors({ 503: 'Redis unreachable; see Retry-After' })
@Auth('admin')
@Controller('admin/delay-queues')
export class DelayQueueAdminController {
  constructor(private readonly queues: DelayQueueService) {}

  @Get()
  @ApiOperation({ summary: 'Every known queue with its counts' })
  @ApiOkResponse({ type: QueueListDto })
  async list(): Promise<QueueListDto> {
    const names = await this.queues.listQueues();
    return { queues: await Promise.all(names.map((q) => this.queues.stats(q))) };
  }

  @Get(':queue')
  @ApiOperation({ summary: "One queue's pending, ready, in-flight and dead counts, and how overdue its oldest item is" })
  @ApiOkResponse({ type: QueueStatsDto })
  @ApiErrors({ 400: badInput, 404: { description: 'No queue with this name', errors: [noSuchQueue] } })
  async stats(@Param() p: QueueParamDto): Promise<QueueStatsDto> {
    await this.mustExist(p.queue);
    return this.queues.stats(p.queue);
  }

  @Get(':queue/dead')
  @ApiOperation({ summary: 'Dead letters, newest first, paged' })
  @ApiOkResponse({ type: DeadLetterPageDto })
  @ApiErrors({ 400: badInput, 404: { description: 'No queue with this name', errors: [noSuchQueue] } })
  async dead(@Param() p: QueueParamDto, @Query() q: DeadPageQueryDto): Promise<DeadLetterPageDto> {
    await this.mustExist(p.queue);
    return this.queues.deadLetters(p.queue, q.offset ?? 0, q.limit ?? 20);
  }

  @Post(':queue/dead/:id/retry')
  @HttpCode(200)
  @ApiOperation({ summary: 'Make one dead letter due now, with its delivery count reset' })
  @ApiOkResponse({ type: RetryResultDto })
  @ApiErrors({
    400: badInput,
    404: {
      description: 'No queue with this name, or no dead letter with this id',
      errors: [noSuchQueue, noDeadLetter('close-reminder', 'order-1001')],
    },
  })
  async retry(@Param() p: ItemParamDto): Promise<RetryResultDto> {
    await this.mustExist(p.queue);
    try {
      return { dueAt: await this.queues.retryDead(p.queue, p.id) };
    } catch (err) {
      // The script's bare "Not found" would not say what was looked for (and a retry that raced another finds none).
      if (err instanceof ScriptNotFoundError) throw noDeadLetter(p.queue, p.id);
      throw err;
    }
  }

  @Delete(':queue/items/:id')
  @ApiOperation({ summary: 'Cancel one item, wherever it is (pending, ready, in flight or dead)' })
  @ApiOkResponse({ type: CancelResultDto })
  @ApiErrors({
    400: badInput,
    404: {
      description: 'No queue with this name, or no item with this id',
      errors: [noSuchQueue, new ApiError(404, 'NOT_FOUND', 'no item order-1001 in queue close-reminder')],
    },
  })
  async cancel(@Param() p: ItemParamDto): Promise<CancelResultDto> {
    await this.mustExist(p.queue);
    const r = await this.queues.cancel(p.queue, p.id);
    if (r.state === 'absent') throw new ApiError(404, 'NOT_FOUND', `no item ${p.id} in queue ${p.queue}`);
    return r;
  }

  /** 404 unless some instance has scheduled on `queue` or processes it (the shared registry). */
  private async mustExist(queue: string): Promise<void> {
    if (!(await this.queues.isKnown(queue))) throw unknownQueue(queue);
  }
}
