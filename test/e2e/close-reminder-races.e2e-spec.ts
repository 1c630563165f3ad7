import type Redis from 'ioredis';
import { EVENTS_GROUP } from '../../src/features/close-reminder/close-reminder.service';
import { rawConnection, waitUntil } from '../harness/redis-process';
import { RedisServerHandle, startRedisServer } from '../harness/redis-server';
import { reminderKit, ReminderKit, sleep } from '../support/close-reminder';
import { startTestApp, TestApp } from '../support/test-app';

/**
 * Paying an order races its reminder's send: 200 orders whose reminders fall
 * due one second after creation (a one-minute order, a 59 s lead), three in
 * four paid at a random moment from 400 ms before to 400 ms after the due
 * time. Once every event is handled: a paid order's payer sees no reminder
 * (pulled or counted), no order has two, and each unpaid order has exactly one.
 */

const ORDERS = 200;
const LEAD_S = 59;

describe('close reminders: 200 payments racing their reminder’s send', () => {
  let redis: RedisServerHandle;
  let raw: Redis;
  let t: TestApp;
  let k: ReminderKit;

  beforeAll(async () => {
    redis = await startRedisServer();
    raw = rawConnection(redis);
    t = await startTestApp(redis.url, { RATE_LIMIT_ENABLED: 'false', CHANNEL_LATENCY_MS: '2', CLOSE_REMINDER_MIN_LEFT_SECONDS: '10' });
    k = reminderKit(t);
  });

  afterAll(async () => {
    await t?.close();
    raw?.disconnect();
    await redis?.destroy();
  });

  /** True once the close-reminder group has read and acked every event of every shard. */
  const eventsHandled = async (): Promise<boolean | string> => {
    for (const stream of k.events.streams()) {
      const groups = (await raw.xinfo('GROUPS', stream)) as unknown[][];
      const group = groups.map((g) => Object.fromEntries(chunk(g))).find((g) => g.name === EVENTS_GROUP);
      if (!group) return `no group on ${stream}`;
      if (Number(group.lag) !== 0 || Number(group.pending) !== 0) return `${stream}: lag ${group.lag}, pending ${group.pending}`;
    }
    return true;
  };

  it('a paid order never shows a reminder; an unpaid one shows exactly one', async () => {
    await k.put('m_race', true, LEAD_S);
    const payer = (i: number) => `p_race${i}`;
    const ids: string[] = new Array(ORDERS);
    const paid = new Map<string, string>();
    let next = 0;
    // 20 at a time: create, wait until `offset` from the due time, pay (three in four).
    await Promise.all(
      Array.from({ length: 20 }, async () => {
        while (next < ORDERS) {
          const i = next++;
          ids[i] = await k.create('m_race', payer(i));
          if (i % 4 === 3) continue;
          const order = (await k.orders.findById(ids[i]))!;
          const dueAt = order.expiresAt - LEAD_S * 1000;
          await sleep(Math.max(0, dueAt + Math.round((Math.random() - 0.5) * 800) - Date.now()));
          paid.set(ids[i], await k.pay(payer(i), ids[i]));
        }
      }),
    );
    expect([...paid.values()].every((s) => s === 'PAID')).toBe(true);
    expect(paid.size).toBe(150);

    const records = await k.settled(
      ids,
      30_000,
      (r) => !!r && (r.state === 'sent' || r.state === 'cancelled' || r.state === 'withdrawn' || r.state === 'skipped'),
    );
    await waitUntil('the close-reminder group to handle every event', eventsHandled, 15_000);
    // Settled records of paid orders move on once their paid event is handled (sent → withdrawn): read them again.
    const final = await k.settled(ids, 15_000, (r) => !!r && r.state !== 'withdrawing' && r.state !== 'scheduled');

    const outcomes: Record<string, number> = {};
    for (const [i, id] of ids.entries()) {
      const r = final.get(id)!;
      const reminders = await k.inbox(payer(i));
      const unread = await k.messages.unreadCount(payer(i));
      if (paid.has(id)) {
        const outcome = r.state === 'skipped' ? `skipped:${r.reason}` : `${r.state}:${r.cause}`;
        outcomes[outcome] = (outcomes[outcome] ?? 0) + 1;
        expect({ id, outcome, reminders, unread }).toEqual({
          id,
          outcome: expect.stringMatching(/^(cancelled:paid|withdrawn:paid|skipped:(paid|paying))$/),
          reminders: [],
          unread: 0,
        });
      } else {
        expect({ id, state: r.state, reminders: reminders.map((m) => m.outerBizId), unread }).toEqual({ id, state: 'sent', reminders: [id], unread: 1 });
      }
    }
    // The payments spanned the due time: some came before the send, some after it.
    expect(outcomes['cancelled:paid']).toBeGreaterThan(0);
    expect(outcomes['withdrawn:paid']).toBeGreaterThan(0);
    expect(records.size).toBe(ORDERS);
  }, 60_000);
});

/** [k1, v1, k2, v2, ...] as pairs. */
function chunk(flat: unknown[]): Array<[string, unknown]> {
  const out: Array<[string, unknown]> = [];
  for (let i = 0; i + 1 < flat.length; i += 2) out.push([String(flat[i]), flat[i + 1]]);
  return out;
}
