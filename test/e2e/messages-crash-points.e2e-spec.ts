import { waitUntil } from '../harness/redis-process';
import { randomPrefix, RedisServerHandle, startRedisServer } from '../harness/redis-server';
import { diedAtCrashPoint, startServiceProcess, type ServiceProcess } from '../support/service-process';
import { CREDS, userToken } from '../support/test-app';
import { setTimeout as sleep } from 'node:timers/promises';

/**
 * The message center's multi-step writes, cut by a SIGKILL at each step boundary (src/platform/core/crash-points.ts) of the
 * built service (dist/main.js: `npx nest build` first), then carried on by a fresh instance on the same Redis. Each
 * test proves the sequence converges: an acknowledged message is never lost nor doubled, a retried request writes
 * only what the cut one did not, and a reminder is sent once, within its stated bound (its delay, plus the reminder
 * queue's visibility timeout, 30 s, when the instance died holding it).
 */
const REMINDER_DELAY_MS = 500;
/** The reminder queue's visibility timeout (delay-queue default): a delivery held by a dead instance comes back after it. */
const VISIBILITY_MS = 30_000;
const ENV = { PENDING_ACTION_DELAYS: `PASSWORD_RECOVERY:${REMINDER_DELAY_MS}` };
const SERVICE = { 'x-service-token': CREDS.serviceToken, 'content-type': 'application/json' };
const ADMIN = { 'x-admin-key': CREDS.adminKey, 'content-type': 'application/json' };

interface Msg {
  msgId: string;
  bizType: string;
  outerBizId: string;
  title: string;
  broadcastId?: string;
}

let redis: RedisServerHandle;
const started: ServiceProcess[] = [];
beforeAll(async () => (redis = await startRedisServer()));
afterEach(async () => {
  await Promise.all(started.splice(0).map((s) => s.kill()));
});
afterAll(async () => redis?.destroy());

async function start(prefix: string, crashAt?: string): Promise<ServiceProcess> {
  const svc = await startServiceProcess(redis.url, prefix, { env: ENV, ...(crashAt ? { crashAt: [crashAt] } : {}) });
  started.push(svc);
  return svc;
}
/** A request the instance dies in the middle of: no answer comes back. */
async function cut(svc: ServiceProcess, point: string, path: string, init: RequestInit): Promise<void> {
  const res = await svc.call(path, init).then(
    (r) => r.status,
    () => 'no answer',
  );
  expect(res).toBe('no answer');
  await diedAtCrashPoint(svc, point);
}
const post = (headers: Record<string, string>, body: unknown): RequestInit => ({ method: 'POST', headers, body: JSON.stringify(body) });
async function inbox(svc: ServiceProcess, accountId: string): Promise<Msg[]> {
  const res = await svc.call('/messages?limit=100', { headers: { authorization: `Bearer ${userToken(accountId)}` } });
  expect(res.status).toBe(200);
  return ((await res.json()) as { messages: Msg[] }).messages;
}
const reminders = (messages: Msg[]) => messages.filter((m) => m.bizType === 'REMINDER_PASSWORD_RECOVERY');
async function reminderQueue(svc: ServiceProcess) {
  return (await (await svc.call('/admin/delay-queues/message-reminders', { headers: ADMIN })).json()) as Record<string, number>;
}
const queueIdle = async (svc: ServiceProcess) => {
  const q = await reminderQueue(svc);
  return q.pending === 0 && q.ready === 0 && q.inFlight === 0;
};
async function wasPending(svc: ServiceProcess, accountId: string): Promise<boolean> {
  const res = await svc.call(`/pending-actions/PASSWORD_RECOVERY/${accountId}`, { method: 'DELETE', headers: SERVICE });
  return ((await res.json()) as { wasPending: boolean }).wasPending;
}

/** Waits for the reminder and for the queue to settle; the reminders' action ids (one expected), the action ended. */
async function oneReminderSent(svc: ServiceProcess, acc: string): Promise<string[]> {
  await waitUntil('the reminder', async () => reminders(await inbox(svc, acc)).length > 0, REMINDER_DELAY_MS + 5000, 50);
  await waitUntil('the reminder queue to be idle', () => queueIdle(svc), 5000, 50);
  expect(await wasPending(svc, acc)).toBe(false);
  return reminders(await inbox(svc, acc)).map((m) => m.outerBizId);
}

describe('messages: a batch write cut between items', () => {
  it('keeps every message acknowledged before the cut, and the retried batch writes each message once', async () => {
    const prefix = randomPrefix();
    const acc = 'acc_crash_batch';
    const one = await start(prefix, 'messages.batch.after-item#3');
    const acked = await one.call(
      '/messages',
      post(SERVICE, { accountId: acc, bizType: 'PAYMENT_SUCCESS', outerBizId: 'acked', title: 'Paid', content: 'one' }),
    );
    expect(acked.status).toBe(201);
    const ackedId = ((await acked.json()) as { msgId: string }).msgId;
    const items = Array.from({ length: 10 }, (_, i) => ({
      accountId: acc,
      bizType: 'PAYMENT_SUCCESS',
      outerBizId: `b-${i}`,
      title: `Paid ${i}`,
      content: 'batch',
    }));
    await cut(one, 'messages.batch.after-item', '/messages/batch', post(SERVICE, { messages: items }));

    const two = await start(prefix);
    const retried = await two.call('/messages/batch', post(SERVICE, { messages: items }));
    expect(retried.status).toBe(200);
    const r = (await retried.json()) as { created: number; duplicates: number };
    expect(r.created + r.duplicates).toBe(10);
    expect(r.duplicates).toBeGreaterThanOrEqual(3);
    const messages = await inbox(two, acc);
    expect(messages.map((m) => m.outerBizId).sort()).toEqual(['acked', ...items.map((i) => i.outerBizId)].sort());
    expect(messages.find((m) => m.outerBizId === 'acked')?.msgId).toBe(ackedId);
  });
});

describe('messages: a listed broadcast cut between inboxes', () => {
  it('retried under its requestId, reaches every account exactly once', async () => {
    const prefix = randomPrefix();
    const audience = Array.from({ length: 6 }, (_, i) => `acc_crash_bc_${i}`);
    const body = { title: 'Maintenance tonight', content: '02:00-03:00', audience, requestId: 'bc-crash-1' };
    const one = await start(prefix, 'messages.broadcast.after-inbox#2');
    await cut(one, 'messages.broadcast.after-inbox', '/admin/messages/broadcast', post(ADMIN, body));

    const two = await start(prefix);
    const retried = await two.call('/admin/messages/broadcast', post(ADMIN, body));
    expect(retried.status).toBe(200);
    const r = (await retried.json()) as { written: number; duplicates: number; broadcastId: string };
    expect(r.written + r.duplicates).toBe(6);
    expect(r.duplicates).toBeGreaterThanOrEqual(2);
    for (const acc of audience) expect((await inbox(two, acc)).filter((m) => m.broadcastId === 'bc-crash-1')).toHaveLength(1);
  });
});

describe('messages: starting a pending action', () => {
  /** A start cut at `point`, and the fresh instance after it. */
  async function startCutAt(point: string, acc: string): Promise<ServiceProcess> {
    const prefix = randomPrefix();
    await cut(await start(prefix, point), point, '/pending-actions', post(SERVICE, { accountId: acc, bizType: 'PASSWORD_RECOVERY' }));
    return start(prefix);
  }

  it('cut after the record, before the reminder is scheduled: the retried start sends one reminder', async () => {
    const acc = 'acc_crash_start1';
    const two = await startCutAt('messages.pending-start.after-record', acc);
    const retried = await two.call('/pending-actions', post(SERVICE, { accountId: acc, bizType: 'PASSWORD_RECOVERY' }));
    expect(retried.status).toBe(201);
    const { actionId } = (await retried.json()) as { actionId: string };
    expect(await oneReminderSent(two, acc)).toEqual([actionId]);
  });

  it('cut after the reminder is scheduled, before the answer: one reminder, sent by the next instance', async () => {
    const two = await startCutAt('messages.pending-start.after-schedule', 'acc_crash_start2');
    expect(await oneReminderSent(two, 'acc_crash_start2')).toHaveLength(1);
  });
});

describe('messages: finishing a pending action', () => {
  it('cut after the record is ended, before the reminder is cancelled: no reminder, ever', async () => {
    const prefix = randomPrefix();
    const acc = 'acc_crash_finish';
    const one = await start(prefix, 'messages.pending-finish.after-record');
    expect((await one.call('/pending-actions', post(SERVICE, { accountId: acc, bizType: 'PASSWORD_RECOVERY' }))).status).toBe(201);
    await cut(one, 'messages.pending-finish.after-record', `/pending-actions/PASSWORD_RECOVERY/${acc}`, { method: 'DELETE', headers: SERVICE });

    const two = await start(prefix);
    // The reminder still queued comes due, finds the action finished and writes nothing.
    await waitUntil('the reminder queue to be idle', () => queueIdle(two), REMINDER_DELAY_MS + 5000, 50);
    await sleep(300);
    expect(reminders(await inbox(two, acc))).toEqual([]);
    expect(await wasPending(two, acc)).toBe(false);
  });
});

describe('messages: a reminder firing', () => {
  it.each(['messages.reminder.before-write', 'messages.reminder.after-write'])(
    'cut at %s: the next instance sends exactly one reminder within the delay plus the visibility timeout',
    async (point) => {
      const prefix = randomPrefix();
      const acc = `acc_crash_${point.split('.').at(-1)}`;
      const one = await start(prefix, point);
      const res = await one.call('/pending-actions', post(SERVICE, { accountId: acc, bizType: 'PASSWORD_RECOVERY' }));
      expect(res.status).toBe(201); // acknowledged: its reminder is owed
      const { actionId } = (await res.json()) as { actionId: string };
      await diedAtCrashPoint(one, point, REMINDER_DELAY_MS + 10_000);
      const diedAt = Date.now();

      const two = await start(prefix);
      await waitUntil('the reminder', async () => reminders(await inbox(two, acc)).length > 0, VISIBILITY_MS + 10_000, 200);
      // The delivery the dead instance held comes back once its visibility timeout has passed; whatever it does then
      // writes no second message.
      await waitUntil('the reminder queue to be idle', () => queueIdle(two), VISIBILITY_MS + 10_000, 200);
      expect(Date.now() - diedAt).toBeLessThan(VISIBILITY_MS + 10_000);
      expect(reminders(await inbox(two, acc)).map((m) => m.outerBizId)).toEqual([actionId]);
      expect((await reminderQueue(two)).dead).toBe(0);
      expect(await wasPending(two, acc)).toBe(false);
    },
    90_000,
  );
});
