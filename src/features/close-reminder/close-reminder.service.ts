import { Injectable, Logger } from '@nestjs/common';
import { crashPoint } from '../../platform/core/crash-points';
import { DelayQueueService } from '../../engines/delay-queue/delay-queue.service';
import type { Delivery } from '../../engines/delay-queue/delay-queue.types';
import { MessagesService, CLOSE_REMINDER_BIZ_TYPE } from '../messages';
import { type OrderEvent, ORDER_EVENTS, OrderEventsService, OrdersService, type OrderSummary } from '../orders';
import { CloseReminderConfig } from './close-reminder.config';
import { CloseReminderMetrics, type SkipReason } from './close-reminder.metrics';
import { CloseReminderStore } from './close-reminder.store';
import { MerchantSettings } from './merchant-settings';
import { renderReminder } from './reminder-template';
import { configured, DelayQueueHandler, StreamConsumer } from '../../engines/workers/worker-declarations';

/** The delay queue of the reminders; one entry per order, id = the order id. */
export const REMINDER_QUEUE = 'close-reminders';
/** The consumer group of the order events. */
export const EVENTS_GROUP = 'close-reminder';
/** The message center's bizType of a reminder; its outerBizId is the order id. */
/** The reminders' bizType: one of the messages' system bizTypes, which no business system may write or withdraw. */
export const REMINDER_BIZ_TYPE = CLOSE_REMINDER_BIZ_TYPE;

/** The app's deep link to pay an order. */
export const payLink = (orderId: string) => `redispay://orders/${orderId}/pay`;

/** Why an order that is read when its reminder comes due gets none. */
function refusalOf(order: OrderSummary | undefined, now: number): SkipReason | undefined {
  if (!order) return 'order-missing';
  if (order.status === 'PAID') return 'paid';
  if (order.status === 'CLOSED') return 'closed';
  if (order.status === 'PAYING') return 'paying';
  if (now >= order.expiresAt) return 'expired';
  if (!order.accountId) return 'no-payer';
  return undefined;
}

/**
 * Close reminders: for merchants that opted in, the payer of an unpaid order
 * gets one app message `lead` before the order closes, and never one for an
 * order already paid or closed.
 *
 * - order.created → the reminder is decided once (schedule-1.lua: due, due
 *   now, or too late) and put on the `close-reminders` delay queue;
 * - it comes due → the order is read, and only an unpaid order that is not
 *   being paid, with a payer, gets the message (idempotent on
 *   (CLOSE_REMINDER, orderId), expiring at the close); then the record moves
 *   scheduled → sent, and a send that finds it settled meanwhile takes its
 *   message back;
 * - order.paid / order.closed → settle-1.lua: cancelled if not sent (and the
 *   queue entry cancelled; when a delivery was under way or ran before, its
 *   message withdrawn), else withdrawn from the inbox. The message center's
 *   withdraw also stops a write that has not landed yet.
 *
 * Every step decides from the record and the order's state, never from the
 * order in which events arrive, so late, repeated and reordered events are safe.
 */
@Injectable()
export class CloseReminderService {
  private readonly logger = new Logger(CloseReminderService.name);

  constructor(
    private readonly store: CloseReminderStore,
    private readonly settings: MerchantSettings,
    private readonly orders: OrdersService,
    private readonly events: OrderEventsService,
    private readonly messages: MessagesService,
    private readonly queue: DelayQueueService,
    private readonly metrics: CloseReminderMetrics,
    private readonly config: CloseReminderConfig,
  ) {}

  /** One order event. Throws only when Redis fails (the event is then delivered again). */
  @StreamConsumer({
    stream: ORDER_EVENTS,
    group: EVENTS_GROUP,
    retry: { visibilityMs: configured('CLOSE_REMINDER_EVENT_TAKEOVER_SECONDS', (get) => get(CloseReminderConfig).eventTakeoverMs) },
    options: (get) => ({ concurrency: get(CloseReminderConfig).eventConcurrency, batchSize: 100 }),
    metric: 'close_reminders_scheduled_total, close_reminders_cancelled_total',
  })
  async onEvent(e: OrderEvent): Promise<void> {
    if (e.type === 'order.created') return this.onCreated(e);
    if (e.type === 'order.paid' || e.type === 'order.closed') return this.onSettled(e, e.type === 'order.paid' ? 'paid' : 'closed');
  }

  private async onCreated(e: OrderEvent): Promise<void> {
    const settings = await this.settings.get(e.merchantId);
    if (!settings?.enabled) return;
    // The order as it is now, not as the event saw it: a late event must not schedule for a settled order.
    const order = await this.orders.findById(e.orderId);
    if (!order || order.status === 'PAID' || order.status === 'CLOSED') {
      this.skipped(!order ? 'order-missing' : order.status === 'PAID' ? 'already-paid' : 'already-closed');
      return;
    }
    const d = await this.store.schedule(order.orderId, order.merchantId, order.expiresAt, settings.leadSeconds * 1000, order.version);
    if (d.case === 'too-late') this.skipped('too-late');
    if (d.case !== 'scheduled' && d.case !== 'already-scheduled') return;
    if (d.case === 'scheduled') this.metrics.scheduled.inc();
    crashPoint('close-reminder.schedule.after-record');
    // Also when already scheduled: a handler that died between the two steps left the queue without it.
    await this.queue.schedule(REMINDER_QUEUE, order.orderId, { dueAt: d.dueAt }, { orderId: order.orderId }, { ifExists: 'keep' });
    crashPoint('close-reminder.schedule.after-queue');
  }

  private async onSettled(e: OrderEvent, cause: 'paid' | 'closed'): Promise<void> {
    // Opted-in merchants (enabled or not) get a record even before order.created is handled, so that it schedules nothing.
    const known = (await this.settings.get(e.merchantId)) !== null;
    const s = await this.store.settle(
      e.orderId,
      { cause, orderVersion: e.version, merchantId: e.merchantId, expiresAt: e.expiresAt, payer: e.accountId ?? '' },
      known,
    );
    crashPoint('close-reminder.settle.after-record');
    let withdraw = s.case === 'withdraw';
    if (s.case === 'cancelled' && s.previous === 'scheduled') {
      this.metrics.cancelled.inc();
      const c = await this.queue.cancel(REMINDER_QUEUE, e.orderId);
      // Not provably unsent: a send is under way (its delivery is now revoked), or one ran before (a retry waits, or it
      // finished after this record was cancelled). Whatever it wrote, the withdraw takes back or keeps out.
      withdraw = !(c.wasPending && c.attempts === 0);
    }
    if (!withdraw) return;
    const removed = s.payer ? await this.withdraw(e.orderId, s.payer) : false;
    if (removed || s.case !== 'withdraw') return;
    const t = await this.store.transition(e.orderId, ['withdrawing'], 'cancelled', 'cancelledAt');
    if (t.moved) this.metrics.cancelled.inc();
  }

  /**
   * Takes (CLOSE_REMINDER, orderId) out of the payer's inbox and keeps it out. When a message the app could see
   * was removed, the record says `withdrawn` (from `withdrawing`, or from `cancelled` when a send raced the settle).
   */
  private async withdraw(orderId: string, payer: string): Promise<boolean> {
    const { withdrawn } = await this.messages.withdraw({ accountId: payer, bizType: REMINDER_BIZ_TYPE, outerBizId: orderId });
    if (withdrawn && (await this.store.transition(orderId, ['withdrawing', 'cancelled'], 'withdrawn', 'withdrawnAt')).moved) this.metrics.withdrawn.inc();
    return withdrawn;
  }

  /** A reminder came due. Sends only while the record is `scheduled`: the order's settle may have come first. */
  @DelayQueueHandler({
    queue: REMINDER_QUEUE,
    retry: {
      attempts: 10,
      backoff: { initialMs: 1000, maxMs: 30_000 },
      visibilityMs: configured('CLOSE_REMINDER_VISIBILITY_TIMEOUT_SECONDS', (get) => get(CloseReminderConfig).visibilityTimeoutMs),
    },
    options: (get) => {
      const c = get(CloseReminderConfig);
      return { concurrency: c.sendConcurrency, claimBatch: c.claimBatch, promoteBatch: c.promoteBatch };
    },
    metric: 'close_reminders_sent_total, close_reminders_skipped_total{reason}',
  })
  private async send(d: Delivery<{ orderId: string }>): Promise<void> {
    const { orderId } = d.payload;
    // The order read is the check a completed payment fails. One HMGET of the fields used here; the Redis clock
    // comes from the claim (whether the order has closed is decided again by the message write, on the Redis clock).
    const order = await this.orders.findSummaryById(orderId);
    const now = d.serverNow();
    const settings = order ? await this.settings.get(order.merchantId) : null;
    const refusal = !order ? 'order-missing' : !settings?.enabled ? 'merchant-disabled' : refusalOf(order, now);
    if (refusal || !order || !settings) return this.skip(orderId, refusal ?? 'order-missing');
    const payer = order.accountId!;
    const text = renderReminder(settings, { subject: order.subject, amount: order.amount, currency: order.currency, closeAt: order.expiresAt, now });
    const w = await this.messages.write({
      accountId: payer,
      bizType: REMINDER_BIZ_TYPE,
      outerBizId: orderId,
      title: text.title,
      content: text.content,
      url: payLink(orderId),
      needPush: true,
      expiresAt: order.expiresAt,
    });
    if (w.withdrawn) return; // the order was settled meanwhile, and its withdraw came first
    if (w.expired) return this.skip(orderId, 'expired');
    crashPoint('close-reminder.send.after-message');
    const sent = await this.store.transition(orderId, ['scheduled'], 'sent', 'sentAt', { msgId: w.msgId, payer });
    if (!sent.moved) {
      // Settled (or sent by an earlier delivery) meanwhile. Settled: take back what this delivery wrote; the settle
      // withdraws too, since it found the delivery in flight. Sent already: the write above was that message again.
      if (sent.state !== 'sent') await this.withdraw(orderId, payer);
      return;
    }
    crashPoint('close-reminder.send.after-record');
    this.metrics.sent.inc();
    this.metrics.lateness.observe(Math.max(0, sent.now - d.dueAt) / 1000);
  }

  private async skip(orderId: string, reason: SkipReason): Promise<void> {
    const t = await this.store.transition(orderId, ['scheduled'], 'skipped', 'skippedAt', { reason });
    if (t.moved) this.skipped(reason);
  }

  private skipped(reason: SkipReason): void {
    this.metrics.skipped.inc({ reason });
    this.logger.debug({ reason }, 'close reminder skipped');
  }
}
