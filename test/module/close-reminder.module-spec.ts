import { DelayQueueService } from '../../src/engines/delay-queue/delay-queue.service';
import { CloseReminderModule } from '../../src/features/close-reminder';
import { CloseReminderStatus } from '../../src/features/close-reminder/close-reminder.status';
import { ReminderSettingsNotFoundError } from '../../src/features/close-reminder/close-reminder.errors';
import { EVENTS_GROUP, payLink, REMINDER_BIZ_TYPE, REMINDER_QUEUE } from '../../src/features/close-reminder/close-reminder.service';
import { MerchantSettings } from '../../src/features/close-reminder/merchant-settings';
import { newOrderId } from '../../src/features/orders';
import { InvalidArgumentError } from '../../src/platform/core/domain.error';
import { buildModule, eventually, FakeMessages, fakeMessagesModule, FakeOrders, fakeOrdersModule, useModuleRedis } from '../support/module-tier';

/**
 * Close reminders built alone against a real redis-server: CloseReminderModule on the platform and engines, with the
 * two feature modules it imports replaced by fakes at their public interface: OrdersModule by FakeOrders
 * (OrdersService's reads) and FakeOrderEvents (the order-events source its @StreamConsumer reads, fed event by
 * event), MessagesModule by FakeMessages (MessagesService's write and withdraw). A reminder is scheduled on
 * order.created, written through the messages when due, cancelled or withdrawn on pay, and a failing orders or
 * messages fake leaves the record and the inbox consistent once the work is delivered again.
 */
const MERCHANT = 'm_remind';
const PAYER = 'payer-1';
const LEAD_S = 30;
const redis = useModuleRedis();

async function setup() {
  const orders = new FakeOrders();
  const messages = new FakeMessages();
  const m = await buildModule(redis, {
    feature: CloseReminderModule,
    env: { CLOSE_REMINDER_MIN_LEFT_SECONDS: '5', CLOSE_REMINDER_VISIBILITY_TIMEOUT_SECONDS: '5' },
    fakes: [fakeOrdersModule(orders), fakeMessagesModule(messages)],
  });
  const settings = m.get(MerchantSettings);
  await settings.save({ merchantId: MERCHANT, enabled: true, leadSeconds: LEAD_S });
  let n = 0;
  /** An unpaid order of PAYER that closes in `closesInMs`. */
  const order = (closesInMs: number, merchantId = MERCHANT) => {
    const merchantOrderNo = `no-${++n}`;
    const now = Date.now();
    return orders.put({
      orderId: newOrderId(merchantId, merchantOrderNo),
      merchantId,
      merchantOrderNo,
      amount: 12800,
      currency: 'CNY',
      subject: 'Coffee beans',
      status: 'CREATED',
      version: 1,
      createdAt: now,
      expiresAt: now + closesInMs,
      accountId: PAYER,
      payerAccountId: PAYER,
    }).orderId;
  };
  const deliver = (type: 'order.created' | 'order.paid' | 'order.closed', orderId: string) =>
    orders.events.deliver(EVENTS_GROUP, orders.eventOf(type, orderId));
  const paid = (orderId: string) => orders.events.deliver(EVENTS_GROUP, orders.pay(orderId));
  const status = m.get(CloseReminderStatus);
  const stateOf = async (orderId: string) => (await status.of(orderId)).state;
  /** order.created handled, then the reminder's send (due at once) awaited. */
  const sentOnCreated = async (orderId: string, timeoutMs = 5000) => {
    await deliver('order.created', orderId);
    await eventually('the reminder sent', async () => (await stateOf(orderId)) === 'sent', timeoutMs);
  };
  return { m, orders, messages, settings, order, deliver, paid, sentOnCreated, status, stateOf, queue: m.get(DelayQueueService) };
}

/** An order closing in 20 s with a 30 s lead: its reminder is due at once. */
const DUE_NOW_MS = 20_000;
/** An order closing in 10 minutes: its reminder waits. */
const LATER_MS = 10 * 60_000;

describe('close-reminder module', () => {
  it('order.created of an opted-in merchant schedules one reminder, at the close minus the lead; another merchant’s schedules none', async () => {
    const { order, deliver, status, queue, messages, orders } = await setup();
    expect(orders.events.groups).toEqual([EVENTS_GROUP]);
    const orderId = order(LATER_MS);
    await deliver('order.created', orderId);
    await deliver('order.created', orderId);
    const expiresAt = (await orders.findById(orderId))!.expiresAt;
    expect(await status.of(orderId)).toMatchObject({ state: 'scheduled', dueAt: new Date(expiresAt - LEAD_S * 1000).toISOString() });
    expect((await queue.get(REMINDER_QUEUE, orderId))?.at).toBe(expiresAt - LEAD_S * 1000);

    const other = order(LATER_MS, 'm_not_opted_in');
    await deliver('order.created', other);
    expect(await status.of(other)).toEqual({ orderId: other, state: 'none' });
    expect(await queue.get(REMINDER_QUEUE, other)).toBeNull();
    expect(messages.calls).toEqual([]);
  });

  it('a due reminder is written once through the messages, to the payer, expiring at the close', async () => {
    const { order, deliver, sentOnCreated, messages, orders } = await setup();
    const orderId = order(DUE_NOW_MS);
    await sentOnCreated(orderId);
    await deliver('order.created', orderId);
    expect(messages.inbox(PAYER).map((x) => x.cmd)).toEqual([
      expect.objectContaining({
        accountId: PAYER,
        bizType: REMINDER_BIZ_TYPE,
        outerBizId: orderId,
        url: payLink(orderId),
        expiresAt: (await orders.findById(orderId))!.expiresAt,
      }),
    ]);
    expect(messages.calls.filter((c) => c.op === 'write')).toHaveLength(1);
  });

  it('order.paid before the reminder is due cancels it: the queue entry goes, nothing is written', async () => {
    const { order, deliver, paid, status, queue, messages } = await setup();
    const orderId = order(LATER_MS);
    await deliver('order.created', orderId);
    await paid(orderId);
    expect(await status.of(orderId)).toMatchObject({ state: 'cancelled', cause: 'paid' });
    expect(await queue.get(REMINDER_QUEUE, orderId)).toBeNull();
    // A late order.created finds the record decided.
    await deliver('order.created', orderId);
    expect(await queue.get(REMINDER_QUEUE, orderId)).toBeNull();
    expect(messages.calls).toEqual([]);
  });

  it('order.paid after the reminder was sent withdraws it from the payer’s inbox', async () => {
    const { order, paid, sentOnCreated, stateOf, messages } = await setup();
    const orderId = order(DUE_NOW_MS);
    await sentOnCreated(orderId);
    await paid(orderId);
    expect(await stateOf(orderId)).toBe('withdrawn');
    expect(messages.inbox(PAYER)).toEqual([]);
  });

  it('an order paid when its reminder comes due (its event not yet handled) is skipped: nothing is written', async () => {
    const { order, deliver, orders, status, queue, messages } = await setup();
    const orderId = order(LATER_MS);
    await deliver('order.created', orderId);
    orders.pay(orderId);
    await queue.reschedule(REMINDER_QUEUE, orderId, { delayMs: 0 });
    await eventually('the reminder decided', async () => (await status.of(orderId)).state !== 'scheduled', 5000);
    expect(await status.of(orderId)).toMatchObject({ state: 'skipped', reason: 'paid' });
    expect(messages.calls).toEqual([]);
  });

  it('the messages failing: a write that throws is delivered again and sends once; a withdraw that throws leaves the record to withdraw, done on redelivery', async () => {
    const { order, deliver, paid, sentOnCreated, stateOf, messages } = await setup();
    const orderId = order(DUE_NOW_MS);
    messages.failures.fail('write');
    await sentOnCreated(orderId, 8000);
    expect(messages.failures.thrown('write')).toBe(1);
    expect(messages.inbox(PAYER)).toHaveLength(1);

    messages.failures.fail('withdraw');
    await expect(paid(orderId)).rejects.toThrow('withdraw failed');
    expect(await stateOf(orderId)).toBe('withdrawing');
    expect(messages.inbox(PAYER)).toHaveLength(1);
    // The stream hands the event over again.
    await deliver('order.paid', orderId);
    expect(await stateOf(orderId)).toBe('withdrawn');
    expect(messages.inbox(PAYER)).toEqual([]);
  });

  it('the orders failing: an order.created whose order read throws records nothing, and its redelivery schedules the reminder', async () => {
    const { order, deliver, orders, status, queue } = await setup();
    const orderId = order(LATER_MS);
    orders.failures.fail('findById');
    await expect(deliver('order.created', orderId)).rejects.toThrow('findById failed');
    expect(await status.of(orderId)).toEqual({ orderId, state: 'none' });
    expect(await queue.get(REMINDER_QUEUE, orderId)).toBeNull();
    await deliver('order.created', orderId);
    expect(await status.of(orderId)).toMatchObject({ state: 'scheduled' });
    expect(await queue.get(REMINDER_QUEUE, orderId)).not.toBeNull();
  });

  it('settings: typed refusals, nothing stored', async () => {
    const { settings } = await setup();
    await expect(settings.mustRead('m_none')).rejects.toBeInstanceOf(ReminderSettingsNotFoundError);
    await expect(settings.save({ merchantId: 'm_short', enabled: true, leadSeconds: 5 })).rejects.toBeInstanceOf(InvalidArgumentError);
    await expect(settings.mustRead('m_short')).rejects.toBeInstanceOf(ReminderSettingsNotFoundError);
  });
});
