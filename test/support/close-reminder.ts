import request from 'supertest';
import { CloseReminderService, REMINDER_BIZ_TYPE, REMINDER_QUEUE } from '../../src/features/close-reminder/close-reminder.service';
import { CloseReminderStore, type ReminderRecord, type ReminderState } from '../../src/features/close-reminder/close-reminder.store';
import { MerchantSettings } from '../../src/features/close-reminder/merchant-settings';
import { DelayQueueService } from '../../src/engines/delay-queue/delay-queue.service';
import { MessagesService } from '../../src/features/messages/messages.service';
import { OrderEventsService } from '../../src/features/orders/order-events.service';
import { OrdersService } from '../../src/features/orders/orders.service';
import { PaymentPlansService } from '../../src/features/orders/payment-plans.service';
import { PaymentRunner } from '../../src/features/orders/payment-runner.service';
import { waitUntil } from '../harness/redis-process';
import { CREDS, type TestApp } from './test-app';

/** The amount of every order these helpers create. */
export const AMOUNT = 12800;

/** States a reminder record does not leave by itself. */
export const FINAL_STATES: ReadonlySet<string> = new Set<ReminderState>(['sent', 'cancelled', 'withdrawn', 'skipped']);

let seq = 0;
const orderNo = () => `cr-${process.pid}-${Date.now().toString(36)}-${++seq}`;

/** The close-reminder module and its neighbours in one running app, with the steps the close-reminder suites repeat. */
export function reminderKit(t: TestApp) {
  const get = t.app.get.bind(t.app);
  const orders = get(OrdersService);
  const plans = get(PaymentPlansService);
  const runner = get(PaymentRunner);
  const messages = get(MessagesService);
  const store = get(CloseReminderStore);
  const kit = {
    t,
    orders,
    plans,
    runner,
    messages,
    store,
    service: get(CloseReminderService),
    settings: get(MerchantSettings),
    events: get(OrderEventsService),
    queue: get(DelayQueueService),

    /** Opts `merchantId` in (or out) with `leadSeconds`. */
    put: (merchantId: string, enabled: boolean, leadSeconds: number) =>
      kit.settings.save({ merchantId, enabled, leadSeconds, title: 'Pay {subject}', content: '{subject} ({amount}) closes in {minutes} minutes' }),

    /** A new unpaid order of `merchantId` for `payer` (created in process, as other modules do). */
    async create(merchantId: string, payer: string, expireMinutes = 1): Promise<string> {
      const { order } = await orders.createForBuyer({
        merchantId,
        merchantOrderNo: orderNo(),
        amount: AMOUNT,
        currency: 'CNY',
        subject: 'Coffee beans',
        expireMinutes,
        payerAccountId: payer,
      });
      return order.orderId;
    },

    /** `payer` pays `orderId` in full; resolves with the plan's final status. */
    async pay(payer: string, orderId: string): Promise<string> {
      const { plan } = await plans.create({ accountId: payer, orderId, instructions: [{ method: 'quickpay', amount: AMOUNT }] });
      return (await runner.pay({ accountId: payer, planId: plan.planId })).status;
    },

    /** The CLOSE_REMINDER messages `accountId` pulls now (what the app shows). */
    async inbox(accountId: string) {
      const { messages: pulled } = await messages.pull(accountId, undefined, 100);
      return pulled.filter((m) => m.bizType === REMINDER_BIZ_TYPE);
    },

    record: (orderId: string): Promise<ReminderRecord | null> => store.record(orderId),

    /** Waits until every order's record is in a final state (or `done` says so); returns the records. */
    async settled(orderIds: readonly string[], timeoutMs: number, done: (r: ReminderRecord | null) => boolean = (r) => !!r && FINAL_STATES.has(r.state)) {
      const records = new Map<string, ReminderRecord | null>();
      await waitUntil(
        `${orderIds.length} reminder records to settle`,
        async () => {
          const open = orderIds.filter((id) => !records.has(id) || !done(records.get(id)!));
          const read = await Promise.all(open.map((id) => store.record(id)));
          open.forEach((id, i) => records.set(id, read[i]));
          const left = orderIds.filter((id) => !done(records.get(id)!));
          return left.length === 0 || `${left.length} left, e.g. ${left[0]}: ${JSON.stringify(records.get(left[0]))}`;
        },
        timeoutMs,
        100,
      );
      return records;
    },

    /** The reminders' delay queue as it stands. */
    queueStats: () => kit.queue.stats(REMINDER_QUEUE),

    /** The close_reminder(s)_* samples of this instance's /metrics, by series (`name{labels}`). */
    async metrics(): Promise<Record<string, number>> {
      const res = await request(t.server).get('/metrics').set('x-admin-key', CREDS.adminKey);
      return parseMetrics(res.text);
    },
  };
  return kit;
}

export type ReminderKit = ReturnType<typeof reminderKit>;

/** The close_reminder(s)_* counters (and the histogram's count) of a Prometheus text exposition, by `name{labels}`. */
export function parseMetrics(text: string): Record<string, number> {
  const out: Record<string, number> = {};
  for (const line of text.split('\n')) {
    const m = /^(close_reminders?_[a-z_]+(?:\{[^}]*\})?) (\S+)$/.exec(line);
    if (m && !/_(bucket|sum)\b/.test(m[1])) out[m[1]] = Number(m[2]);
  }
  return out;
}

/** How much each series moved between two readings of parseMetrics (series absent before count from 0). */
export function metricsDelta(before: Record<string, number>, after: Record<string, number>): Record<string, number> {
  const out: Record<string, number> = {};
  for (const [k, v] of Object.entries(after)) if (v !== (before[k] ?? 0)) out[k] = v - (before[k] ?? 0);
  return out;
}

/** A promise of `ms` milliseconds. */
export const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));
