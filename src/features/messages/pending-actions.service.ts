import { Injectable, Logger } from '@nestjs/common';
import { randomUUID } from 'node:crypto';
import { crashPoint } from '../../platform/core/crash-points';
import { DelayQueueService } from '../../engines/delay-queue/delay-queue.service';
import type { Delivery } from '../../engines/delay-queue/delay-queue.types';
import { InvalidArgumentError } from '../../platform/core/domain.error';
import { DelayQueueHandler } from '../../engines/workers/worker-declarations';
import type { FinishPendingActionCommand, StartPendingActionCommand, StartPendingActionResult } from './message.commands';
import { validateCommand } from '../../platform/http/validation';
import { PendingActionParamDto, StartPendingActionDto } from './dto/pending-action.dto';
import { MessagesConfig } from './messages.config';
import { MessagesMetrics } from './messages.metrics';
import { SYSTEM_IDEM_PREFIX } from './message.keys';
import { MessagesStore } from './messages.store';
import { PENDING_ACTION_TYPES } from './pending-action.types';

export const REMINDER_QUEUE = 'message-reminders';
const MAX_CONTEXT_BYTES = 1024;

interface ReminderPayload {
  accountId: string;
  bizType: string;
  actionId: string;
  context?: Record<string, unknown>;
}

/**
 * Reminders for actions a user started and never finished,
 * on the delay-queue engine. The pending record lives in the account's meta
 * hash, so the reminder's message write checks and ends it atomically: a
 * finish that lands first means no message, whatever the timing, and any
 * number of instances send at most one message per started action.
 */
@Injectable()
export class PendingActionsService {
  private readonly logger = new Logger(PendingActionsService.name);

  constructor(
    private readonly queue: DelayQueueService,
    private readonly store: MessagesStore,
    private readonly metrics: MessagesMetrics,
    private readonly config: MessagesConfig,
  ) {}

  @DelayQueueHandler({ queue: REMINDER_QUEUE, retry: { attempts: 10 }, options: () => ({ concurrency: 20 }) })
  onReminderDue(d: Delivery<ReminderPayload>): Promise<void> {
    return this.remind(d);
  }

  delayOf(bizType: string): number {
    return this.config.pendingActionDelays.get(bizType) ?? PENDING_ACTION_TYPES[bizType].delayMs;
  }

  /** Records the start (again: one record, the timer restarts) and schedules its reminder. */
  async start({ accountId, bizType, context }: StartPendingActionCommand): Promise<StartPendingActionResult> {
    await validateCommand(StartPendingActionDto, { accountId, bizType, ...(context === undefined ? {} : { context }) });
    if (context !== undefined && Buffer.byteLength(JSON.stringify(context)) > MAX_CONTEXT_BYTES) {
      throw new InvalidArgumentError(`context must be at most ${MAX_CONTEXT_BYTES} bytes as JSON`, 'context', 'too large');
    }
    const actionId = randomUUID();
    await this.store.startPendingAction(accountId, bizType, actionId);
    crashPoint('messages.pending-start.after-record');
    const payload: ReminderPayload = { accountId, bizType, actionId, ...(context ? { context } : {}) };
    const { dueAt } = await this.queue.schedule(REMINDER_QUEUE, reminderId(bizType, accountId), { delayMs: this.delayOf(bizType) }, payload);
    crashPoint('messages.pending-start.after-schedule');
    return { actionId, remindAt: dueAt };
  }

  /** The user finished: no reminder. True when the action was still pending. */
  async finish({ accountId, bizType }: FinishPendingActionCommand): Promise<boolean> {
    await validateCommand(PendingActionParamDto, { accountId, bizType });
    const wasPending = await this.store.finishPendingAction(accountId, bizType);
    crashPoint('messages.pending-finish.after-record');
    await this.queue.cancel(REMINDER_QUEUE, reminderId(bizType, accountId));
    return wasPending;
  }

  private async remind(d: Delivery<ReminderPayload>): Promise<void> {
    const { accountId, bizType, actionId } = d.payload;
    const type = PENDING_ACTION_TYPES[bizType];
    if (!type) {
      this.logger.warn({ bizType }, 'reminder for an unknown action type dropped');
      return;
    }
    crashPoint('messages.reminder.before-write');
    const { outcome } = await this.store.write(
      accountId,
      {
        k: reminderIdemField(bizType, actionId),
        bizType: `REMINDER_${bizType}`,
        outerBizId: actionId,
        title: type.title,
        content: type.content,
        url: type.url,
        needPush: true,
        createdAt: new Date().toISOString(),
      },
      // Any recorded start will do: the queue holds one reminder per (bizType, account), so two starts racing
      // on two instances may leave the record and the reminder naming different starts; one message either way.
      { pendingBizType: bizType },
    );
    // Past here, a crash leaves the delivery unacknowledged: redelivered after the queue's visibility timeout, its
    // write finds the start ended (or its own record) and writes nothing.
    crashPoint('messages.reminder.after-write');
    if (outcome === 1) {
      this.metrics.remindersSent.inc({ bizType });
      this.metrics.written.inc({ source: 'reminder' });
    }
  }
}

/**
 * A reminder's idempotency field, where no caller's (bizType, outerBizId) can spell it: the actionId is handed to the
 * business system, and a message it wrote or withdrew as (REMINDER_<type>, actionId) took the reminder's place.
 */
export function reminderIdemField(bizType: string, actionId: string): string {
  return `${SYSTEM_IDEM_PREFIX}reminder|${bizType}|${actionId}`;
}

function reminderId(bizType: string, accountId: string): string {
  return `${bizType}:${accountId}`;
}
