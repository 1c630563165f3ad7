import type Redis from 'ioredis';
import request from 'supertest';
import { CloseReminderService, REMINDER_QUEUE } from '../../src/features/close-reminder/close-reminder.service';
import { toOrderEvent, type OrderEvent } from '../../src/features/orders/order.events';
import { rawConnection, waitUntil } from '../harness/redis-process';
import { RedisServerHandle, startRedisServer } from '../harness/redis-server';
import { metricsDelta, reminderKit, ReminderKit, sleep } from '../support/close-reminder';
import { CREDS, startTestApp, TestApp } from '../support/test-app';

/**
 * Close reminders driven by order events that come out of order, twice, late
 * or in a backlog. The app's own consumer skips the events of the `m_held*`
 * merchants, so that the tests hand those (read from the real shard streams
 * with XRANGE) to CloseReminderService.onEvent in whatever order they choose.
 * Every other merchant's events flow through the app's consumer as usual.
 */

const HELD = /^m_held/;
const original = CloseReminderService.prototype.onEvent;

describe('close reminders: out-of-order, duplicate, late and backlogged events', () => {
  let redis: RedisServerHandle;
  let raw: Redis;
  let t: TestApp;
  let k: ReminderKit;
  /** The module's handler itself, bypassing the consumer's filter. */
  const handle = (e: OrderEvent) => original.call(k.service, e);

  beforeAll(async () => {
    jest.spyOn(CloseReminderService.prototype, 'onEvent').mockImplementation(function (this: CloseReminderService, e: OrderEvent) {
      return HELD.test(e.merchantId) ? Promise.resolve() : original.call(this, e);
    });
    redis = await startRedisServer();
    raw = rawConnection(redis);
    // A reminder found overdue is still sent while 10 s are left (the default 60 s is the whole life of these orders).
    // Leads down to 15 s (10 + 5): the one-minute orders here are reminded within the test.
    t = await startTestApp(redis.url, {
      RATE_LIMIT_ENABLED: 'false',
      CHANNEL_LATENCY_MS: '2',
      CLOSE_REMINDER_MIN_LEFT_SECONDS: '10',
      CLOSE_REMINDER_VISIBILITY_TIMEOUT_SECONDS: '5',
    });
    k = reminderKit(t);
  });

  afterAll(async () => {
    jest.restoreAllMocks();
    await t?.close();
    raw?.disconnect();
    await redis?.destroy();
  });

  /** Every event in the shard streams of the orders `which` picks, in stream order per shard. */
  const eventsOf = async (which: (e: OrderEvent) => boolean): Promise<OrderEvent[]> => {
    const out: OrderEvent[] = [];
    for (const stream of k.events.streams()) {
      for (const [id, fields] of await raw.xrange(stream, '-', '+')) {
        const e = toOrderEvent(stream, id, fields);
        if (which(e)) out.push(e);
      }
    }
    return out;
  };
  const eventOf = async (orderId: string, type: OrderEvent['type']): Promise<OrderEvent> => {
    const [e] = await eventsOf((x) => x.orderId === orderId && x.type === type);
    expect(e).toBeDefined();
    return e;
  };
  const queued = (orderId: string) => k.queue.get(REMINDER_QUEUE, orderId);

  it('a paid event handled before its created: cancelled, and the created then schedules nothing', async () => {
    await k.put('m_held_a', true, 30);
    const orderId = await k.create('m_held_a', 'p_a');
    expect(await k.pay('p_a', orderId)).toBe('PAID');
    const before = await k.metrics();

    await handle(await eventOf(orderId, 'order.paid'));
    expect(await k.record(orderId)).toMatchObject({ state: 'cancelled', cause: 'paid' });
    await handle(await eventOf(orderId, 'order.created'));

    expect(await k.record(orderId)).toMatchObject({ state: 'cancelled', cause: 'paid' });
    expect(await queued(orderId)).toBeNull();
    expect(metricsDelta(before, await k.metrics())).toEqual({ 'close_reminders_skipped_total{reason="already-paid"}': 1 });
  });

  it('the same created twice (one after the other and at once): one record, one queue item, scheduled counted once', async () => {
    await k.put('m_held_b', true, 30);
    const [one, two] = [await k.create('m_held_b', 'p_b1'), await k.create('m_held_b', 'p_b2')];
    const before = await k.metrics();

    const created = await eventOf(one, 'order.created');
    await handle(created);
    await handle(created);
    const again = await eventOf(two, 'order.created');
    await Promise.all([handle(again), handle(again), handle(again)]);

    for (const orderId of [one, two]) {
      const r = await k.record(orderId);
      expect(r).toMatchObject({ state: 'scheduled', merchantId: 'm_held_b', leadMs: 30_000 });
      expect(r!.dueAt).toBe(r!.expiresAt! - 30_000);
      expect(await queued(orderId)).toMatchObject({ id: orderId, at: r!.dueAt, payload: { orderId } });
    }
    expect(metricsDelta(before, await k.metrics())).toEqual({ close_reminders_scheduled_total: 2 });

    // The paid event cancels it and takes it off the queue; a created repeated after that changes nothing.
    expect(await k.pay('p_b1', one)).toBe('PAID');
    await handle(await eventOf(one, 'order.paid'));
    await handle(created);
    expect(await k.record(one)).toMatchObject({ state: 'cancelled', cause: 'paid' });
    expect(await queued(one)).toBeNull();
  });

  it('a created handled late, after the order was paid: nothing scheduled, and the paid event then leaves it cancelled', async () => {
    await k.put('m_held_c', true, 30);
    const orderId = await k.create('m_held_c', 'p_c');
    expect(await k.pay('p_c', orderId)).toBe('PAID');

    await handle(await eventOf(orderId, 'order.created'));
    expect((await k.record(orderId))?.state).not.toBe('scheduled');
    expect(await queued(orderId)).toBeNull();

    await handle(await eventOf(orderId, 'order.paid'));
    expect(await k.record(orderId)).toMatchObject({ state: 'cancelled', cause: 'paid' });
    expect(await queued(orderId)).toBeNull();
    expect(await k.inbox('p_c')).toEqual([]);
  });

  it('a consumer far behind (a backlog handled overdue, shuffled, 32 at once): one reminder per unpaid order, none for the paid', async () => {
    // Due one second after creation: by the time the backlog is handled, every reminder is overdue (and 50+ s are left).
    await k.put('m_held_backlog', true, 59);
    const ids: string[] = [];
    for (let i = 0; i < 150; i++) ids.push(await k.create('m_held_backlog', `p_bl${i}`));
    const paid = new Set(ids.filter((_, i) => i % 3 === 0));
    await Promise.all([...paid].map(async (id) => expect(await k.pay(`p_bl${ids.indexOf(id)}`, id)).toBe('PAID')));
    await sleep(1200);
    const backlog = await eventsOf((e) => e.merchantId === 'm_held_backlog');
    expect(backlog.filter((e) => e.type === 'order.created')).toHaveLength(150);
    expect(backlog.filter((e) => e.type === 'order.paid')).toHaveLength(50);
    const before = await k.metrics();

    // Shuffled: a paid event may come before its created, and a created after its order was paid.
    const shuffled = backlog.map((e) => ({ e, r: Math.random() })).sort((a, b) => a.r - b.r);
    let next = 0;
    await Promise.all(
      Array.from({ length: 32 }, async () => {
        while (next < shuffled.length) await handle(shuffled[next++].e);
      }),
    );

    const records = await k.settled(ids, 20_000);
    for (const [i, id] of ids.entries()) {
      const reminders = await k.inbox(`p_bl${i}`);
      if (paid.has(id)) {
        expect({ id, state: records.get(id)?.state, reminders }).toEqual({ id, state: 'cancelled', reminders: [] });
      } else {
        expect({ id, state: records.get(id)?.state, reminders: reminders.map((m) => m.outerBizId) }).toEqual({ id, state: 'sent', reminders: [id] });
        expect(reminders[0].msgId).toBe(records.get(id)!.msgId);
      }
    }
    expect(metricsDelta(before, await k.metrics())).toEqual({
      close_reminders_scheduled_total: 100,
      close_reminders_sent_total: 100,
      close_reminder_lateness_seconds_count: 100,
      'close_reminders_skipped_total{reason="already-paid"}': 50,
    });
  }, 40_000);

  it('counters: a reminder paid before it is due is cancelled; one paid after it was sent is withdrawn from the inbox', async () => {
    await k.put('m_count', true, 58);
    const before = await k.metrics();
    const early = await k.create('m_count', 'p_early');
    const late = await k.create('m_count', 'p_late');
    await k.settled([early, late], 5000, (r) => r?.state === 'scheduled');
    expect(await k.pay('p_early', early)).toBe('PAID');
    await k.settled([late], 10_000);
    expect(await k.inbox('p_late')).toHaveLength(1);
    expect(await k.pay('p_late', late)).toBe('PAID');

    const records = await k.settled([early, late], 10_000, (r) => r?.state === 'cancelled' || r?.state === 'withdrawn');
    expect(records.get(early)).toMatchObject({ state: 'cancelled', cause: 'paid' });
    expect(records.get(late)).toMatchObject({ state: 'withdrawn', cause: 'paid' });
    expect(await k.inbox('p_early')).toEqual([]);
    expect(await k.inbox('p_late')).toEqual([]);
    expect(await k.messages.unreadCount('p_late')).toBe(0);
    const delta = metricsDelta(before, await k.metrics());
    expect(delta).toMatchObject({
      close_reminders_scheduled_total: 2,
      close_reminders_cancelled_total: 1,
      close_reminders_sent_total: 1,
      close_reminders_withdrawn_total: 1,
      close_reminder_lateness_seconds_count: 1,
    });
  }, 20_000);

  it('a merchant disabled while reminders are pending: they are skipped (merchant-disabled); once re-enabled, later orders are reminded', async () => {
    await k.put('m_toggle', true, 57);
    const before = await k.metrics();
    const pending: string[] = [];
    for (let i = 0; i < 5; i++) pending.push(await k.create('m_toggle', `p_off${i}`));
    await k.settled(pending, 5000, (r) => r?.state === 'scheduled');
    await k.put('m_toggle', false, 57);

    const skipped = await k.settled(pending, 15_000);
    for (const [i, id] of pending.entries()) {
      expect(skipped.get(id)).toMatchObject({ state: 'skipped', reason: 'merchant-disabled' });
      expect(await k.inbox(`p_off${i}`)).toEqual([]);
    }

    await k.put('m_toggle', true, 57);
    const later: string[] = [];
    for (let i = 0; i < 3; i++) later.push(await k.create('m_toggle', `p_on${i}`));
    const sent = await k.settled(later, 15_000);
    for (const [i, id] of later.entries()) {
      expect(sent.get(id)?.state).toBe('sent');
      expect((await k.inbox(`p_on${i}`)).map((m) => m.outerBizId)).toEqual([id]);
    }
    expect(metricsDelta(before, await k.metrics())).toMatchObject({
      close_reminders_scheduled_total: 8,
      close_reminders_sent_total: 3,
      'close_reminders_skipped_total{reason="merchant-disabled"}': 5,
    });
  }, 40_000);

  it('with Redis not answering or down, the admin endpoints answer 503 with Retry-After within the command timeout, not a hang', async () => {
    const admin = { 'x-admin-key': CREDS.adminKey };
    await k.put('m_down', true, 60);
    const calls = [
      () => request(t.server).put('/admin/close-reminder/merchants/m_down').set(admin).send({ enabled: false }),
      () => request(t.server).get('/admin/close-reminder/merchants/m_down').set(admin),
      () => request(t.server).get('/admin/close-reminder/merchants').set(admin),
      () => request(t.server).delete('/admin/close-reminder/merchants/m_down').set(admin),
      () => request(t.server).get('/admin/close-reminder/orders/ord_0123456789abcdef01234567').set(admin),
    ];
    // The order id must pass validation for the 503 to be Redis's: check its shape on a live Redis first.
    expect((await calls[4]()).status).toBe(200);
    const expectPrompt503s = async () => {
      for (const call of calls) {
        const started = Date.now();
        const res = await call();
        expect({ status: res.status, error: res.body.error, retryAfter: res.headers['retry-after'] }).toEqual({
          status: 503,
          error: 'REDIS_UNAVAILABLE',
          retryAfter: '1',
        });
        expect(Date.now() - started).toBeLessThan(2 * t.config.redis.commandTimeoutMs + 500);
      }
    };
    // The redis-server stops answering (SIGSTOP) but keeps its connections: requests must not wait for it.
    process.kill(redis.pid!, 'SIGSTOP');
    try {
      await expectPrompt503s();
    } finally {
      process.kill(redis.pid!, 'SIGCONT');
    }
    // The redis-server is gone (connections refused).
    await redis.stop();
    try {
      await expectPrompt503s();
    } finally {
      await redis.start();
    }
    await waitUntil(
      'the admin list to answer again',
      async () => (await request(t.server).get('/admin/close-reminder/merchants').set(admin)).status === 200,
      10_000,
      100,
    );
  }, 20_000);
});
