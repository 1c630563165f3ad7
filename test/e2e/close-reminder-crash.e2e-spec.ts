import { REMINDER_QUEUE } from '../../src/features/close-reminder/close-reminder.service';
import { rawConnection, waitUntil } from '../harness/redis-process';
import { randomPrefix, RedisServerHandle, startRedisServer } from '../harness/redis-server';
import { expectInvariants } from '../support/invariants';
import { diedAtCrashPoint, ServiceProcess, startServiceProcess } from '../support/service-process';
import { CREDS, merchantHeaders, userToken } from '../support/test-app';

/**
 * Close-reminder scheduling killed at every step boundary (src/platform/core/crash-points.ts): the built service
 * (dist/main.js) dies there with SIGKILL, a fresh instance starts on the same Redis, and the order's reminder
 * converges: sent exactly once and before the close, or cancelled / withdrawn when the order was paid, within
 * the stated bound. The sequences (docs/durability.md, "Multi-step writes"):
 *
 * - order.created → record `scheduled` (schedule-1) → queue entry → event acked;
 * - due → claimed → message written → record `sent` → queue entry acked (the delay queue's own claim → handle → ack:
 *   a crash after the claim or before the ack redelivers the item after its visibility timeout, handled once more);
 * - order.paid → record `cancelled` or `withdrawing` (settle-1) → queue entry cancelled / message withdrawn → record final.
 *
 * With the settings below a lost step is taken over within 2 s (visibility timeout) or 3 s (event takeover), so
 * every reminder here is final within BOUND_MS of its due time, and a sent one is sent before its order closes.
 */

const ADMIN = { 'x-admin-key': CREDS.adminKey };
/** Short takeovers, so the whole convergence fits a test; the shortest lead is then 12 s. */
const ENV = {
  CHANNEL_LATENCY_MS: '2',
  CLOSE_REMINDER_MIN_LEFT_SECONDS: '10',
  CLOSE_REMINDER_VISIBILITY_TIMEOUT_SECONDS: '2',
  CLOSE_REMINDER_EVENT_TAKEOVER_SECONDS: '2',
};
/** One-minute orders, reminded 5 s after they are created. */
const LEAD_S = 55;
/** A reminder is final within this long after its due time, whatever boundary its first instance died at. */
const BOUND_MS = 15_000;

interface Status {
  state: string;
  reason?: string;
  msgId?: string;
  dueAt?: string;
  sentAt?: string;
  closesAt?: string;
}

async function json<T>(svc: ServiceProcess, path: string, headers: Record<string, string> = ADMIN): Promise<T> {
  const res = await svc.call(path, { headers });
  if (res.status !== 200) throw new Error(`GET ${path}: ${res.status} ${await res.text()}`);
  return (await res.json()) as T;
}

async function post(svc: ServiceProcess, path: string, headers: Record<string, string>, body: unknown, method = 'POST') {
  const text = JSON.stringify(body);
  const res = await svc.call(path, { method, headers: { ...headers, 'content-type': 'application/json' }, body: text });
  return { status: res.status, body: (await res.json().catch(() => ({}))) as Record<string, unknown> };
}

async function createOrder(svc: ServiceProcess, payer: string): Promise<string> {
  const body = JSON.stringify({
    merchantOrderNo: `crash-${randomPrefix()}`,
    amount: 12800,
    currency: 'CNY',
    subject: 'Tea',
    expireMinutes: 1,
    payerAccountId: payer,
  });
  const res = await svc.call('/merchant/orders', { method: 'POST', headers: merchantHeaders('POST', '/merchant/orders', body), body });
  if (res.status !== 201) throw new Error(`create: ${res.status} ${await res.text()}`);
  return ((await res.json()) as { orderId: string }).orderId;
}

async function pay(svc: ServiceProcess, payer: string, orderId: string): Promise<void> {
  const user = { authorization: `Bearer ${userToken(payer)}` };
  const plan = await post(svc, `/orders/${orderId}/payment-plans`, user, { instructions: [{ method: 'quickpay', amount: 12800 }] });
  expect(plan.status).toBe(201);
  // The instance may die at the boundary before it answers: its order.paid is handled as the payment completes.
  const paid = await post(svc, `/payment-plans/${String(plan.body.planId)}/pay`, user, {}).catch(() => undefined);
  if (paid) expect(paid.body.status).toBe('PAID');
}

const reminderOf = (svc: ServiceProcess, orderId: string) => json<Status>(svc, `/admin/close-reminder/orders/${orderId}`);

/** The close reminders in the payer's inbox, as (order id, message id). */
async function inbox(svc: ServiceProcess, payer: string): Promise<Array<[string, string]>> {
  const r = await json<{ messages: Array<{ bizType: string; outerBizId: string; msgId: string }> }>(svc, '/messages?limit=100', {
    authorization: `Bearer ${userToken(payer)}`,
  });
  return r.messages.filter((m) => m.bizType === 'CLOSE_REMINDER').map((m) => [m.outerBizId, m.msgId]);
}

/** The delay queue's counters for the reminders' queue on one instance. */
async function queueCounters(svc: ServiceProcess): Promise<{ fired: number; acked: number }> {
  const text = await (await svc.call('/metrics', { headers: ADMIN })).text();
  const read = (name: string) => Number(new RegExp(`^delay_queue_${name}_total\\{queue="${REMINDER_QUEUE}"\\} (\\S+)$`, 'm').exec(text)?.[1] ?? 0);
  return { fired: read('fired'), acked: read('acked') };
}

describe('close reminders killed at every step boundary', () => {
  let redis: RedisServerHandle;
  const running: ServiceProcess[] = [];

  beforeAll(async () => {
    redis = await startRedisServer({ appendonly: true });
  });

  afterEach(async () => {
    await Promise.all(running.splice(0).map((s) => s.kill()));
  });

  afterAll(async () => {
    await redis?.destroy();
  });

  /**
   * Starts an instance armed with `boundary`, opts the merchant in and creates one order; `before` runs on it
   * (paying, say) until the instance dies at the boundary; then a fresh instance takes over. Resolves once the
   * reminder is final and the queue has nothing left, with the fresh instance.
   */
  async function crashThenConverge(boundary: string, payer: string, before: (svc: ServiceProcess, orderId: string) => Promise<void> = async () => undefined) {
    const prefix = randomPrefix();
    const doomed = await startServiceProcess(redis.url, prefix, { crashAt: [boundary], env: ENV });
    running.push(doomed);
    expect((await post(doomed, `/admin/close-reminder/merchants/${CREDS.merchantId}`, ADMIN, { enabled: true, leadSeconds: LEAD_S }, 'PUT')).status).toBe(201);
    const orderId = await createOrder(doomed, payer);
    await before(doomed, orderId);
    await diedAtCrashPoint(doomed, boundary, 20_000);
    const fresh = await startServiceProcess(redis.url, prefix, { env: ENV });
    running.push(fresh);
    let status!: Status;
    await waitUntil(
      'the reminder to be final and the queue empty',
      async () => {
        status = await reminderOf(fresh, orderId);
        const q = await json<{ pending: number; ready: number; inFlight: number; dead: number }>(fresh, `/admin/delay-queues/${REMINDER_QUEUE}`);
        return (
          (['sent', 'cancelled', 'withdrawn', 'skipped'].includes(status.state) && q.pending + q.ready + q.inFlight === 0) || JSON.stringify({ status, q })
        );
      },
      BOUND_MS + 10_000,
      100,
    );
    expect(await json(fresh, `/admin/delay-queues/${REMINDER_QUEUE}`)).toMatchObject({ dead: 0 });
    const raw = rawConnection(redis);
    try {
      await expectInvariants({ nodes: raw, prefix, base: fresh.base });
    } finally {
      raw.disconnect();
    }
    return { fresh, orderId, status };
  }

  /** Sent exactly once (one message, the record's), before the close and within the bound of its due time. */
  async function expectSentOnce(fresh: ServiceProcess, payer: string, orderId: string, status: Status) {
    expect(status.state).toBe('sent');
    expect(await inbox(fresh, payer)).toEqual([[orderId, status.msgId]]);
    const [due, sent, closes] = [status.dueAt, status.sentAt, status.closesAt].map((t) => Date.parse(t!));
    expect(sent).toBeLessThan(closes);
    expect(sent - due).toBeLessThan(BOUND_MS);
  }

  it.each([
    // order.created handled: record written, the queue entry not yet (the redelivered event adds it).
    ['close-reminder.schedule.after-record'],
    // Queue entry written, the event not yet acked (redelivered: the record is decided, nothing changes).
    ['close-reminder.schedule.after-queue'],
    // Claimed, no handler ran: redelivered after the visibility timeout.
    [`delay-queue.${REMINDER_QUEUE}.after-claim`],
    // Message written, record still scheduled: the redelivery writes the same message (same key, same id).
    ['close-reminder.send.after-message'],
    // Record sent, the delivery not acked: the redelivery finds it sent and writes nothing new.
    ['close-reminder.send.after-record'],
    // The handler returned, its ack never left.
    [`delay-queue.${REMINDER_QUEUE}.before-ack`],
  ])(
    'killed at %s: the reminder is sent exactly once, before the close',
    async (boundary) => {
      const payer = `p_${boundary.replace(/[^a-z]/g, '').slice(-20)}`;
      const { fresh, orderId, status } = await crashThenConverge(boundary, payer);
      await expectSentOnce(fresh, payer, orderId, status);
      if (boundary.startsWith('delay-queue.')) {
        // The delay queue's claim → handle → ack: the item the dead instance held was handed to the fresh one and acked.
        expect(await queueCounters(fresh)).toEqual({ fired: 1, acked: 1 });
      }
    },
    60_000,
  );

  it('killed at close-reminder.settle.after-record on a payment before the due time: cancelled, no reminder ever', async () => {
    const payer = 'p_settle_early';
    const { fresh, orderId, status } = await crashThenConverge('close-reminder.settle.after-record', payer, (svc, id) => pay(svc, payer, id));
    expect(status.state).toBe('cancelled');
    // The queue entry left behind came due on the fresh instance and found the order paid: nothing was written.
    expect(await inbox(fresh, payer)).toEqual([]);
    expect((await json<{ status: string }>(fresh, `/orders/${orderId}`, { authorization: `Bearer ${userToken(payer)}` })).status).toBe('PAID');
  }, 60_000);

  it('killed at close-reminder.settle.after-record on a payment after the reminder was sent: withdrawn from the inbox', async () => {
    const payer = 'p_settle_late';
    const { fresh, orderId, status } = await crashThenConverge('close-reminder.settle.after-record', payer, async (svc, id) => {
      await waitUntil('the reminder to be sent', async () => (await reminderOf(svc, id)).state === 'sent' || 'not yet', 15_000, 100);
      await pay(svc, payer, id);
    });
    expect(status.state).toBe('withdrawn');
    expect(await inbox(fresh, payer)).toEqual([]);
    expect((await json<{ status: string }>(fresh, `/orders/${orderId}`, { authorization: `Bearer ${userToken(payer)}` })).status).toBe('PAID');
  }, 60_000);
});
