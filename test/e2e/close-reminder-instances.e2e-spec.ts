import { CloseReminderService, REMINDER_QUEUE } from '../../src/features/close-reminder/close-reminder.service';
import type { Delivery, QueueStats } from '../../src/engines/delay-queue/delay-queue.types';
import type Redis from 'ioredis';
import type { AppConfig } from '../../src/platform/config/app-config';
import { queueKeys } from '../../src/engines/delay-queue/delay-queue.keys';
import { KeyBuilder } from '../../src/platform/redis/key-builder';
import { rawConnection, waitUntil } from '../harness/redis-process';
import { randomPrefix, RedisServerHandle, startRedisServer } from '../harness/redis-server';
import { FINAL_STATES, parseMetrics, reminderKit, sleep } from '../support/close-reminder';
import { startServiceProcess } from '../support/service-process';
import { CREDS, merchantHeaders, startTestApp, TestApp, userToken } from '../support/test-app';

/**
 * Close reminders shared by several instances of the service on one Redis
 * (one key prefix): two in-process apps splitting the work; the built service
 * (dist/main.js, run `npx nest build` first; test/support/service-process.ts) SIGKILLed in the middle of a burst
 * of sends, another instance finishing its work; and a Redis restarted (AOF)
 * while reminders wait. Each reminder reaches its payer's inbox exactly once.
 */

const ADMIN = { 'x-admin-key': CREDS.adminKey };
/** Short enough that reminders claimed by a killed instance are sent by another within the test. */
const VISIBILITY = { CLOSE_REMINDER_VISIBILITY_TIMEOUT_SECONDS: '2' };

/** The built service (test/support/service-process.ts) on `redisUrl` with `prefix`, with the calls these tests make. */
async function startService(redisUrl: string, prefix: string, env: Record<string, string> = {}) {
  const proc = await startServiceProcess(redisUrl, prefix, {
    env: { CHANNEL_LATENCY_MS: '2', CLOSE_REMINDER_MIN_LEFT_SECONDS: '10', ...VISIBILITY, ...env },
  });
  const svc = {
    ...proc,
    async json<T>(path: string, headers: Record<string, string> = ADMIN): Promise<T> {
      const res = await proc.call(path, { headers });
      if (res.status !== 200) throw new Error(`GET ${path}: ${res.status} ${await res.text()}`);
      return (await res.json()) as T;
    },
    async metrics() {
      const res = await proc.call('/metrics', { headers: ADMIN });
      return parseMetrics(await res.text());
    },
    queue: () => svc.json<QueueStats>(`/admin/delay-queues/${REMINDER_QUEUE}`),
    async putSettings(leadSeconds: number) {
      const res = await proc.call(`/admin/close-reminder/merchants/${CREDS.merchantId}`, {
        method: 'PUT',
        headers: { ...ADMIN, 'content-type': 'application/json' },
        body: JSON.stringify({ enabled: true, leadSeconds }),
      });
      expect(res.status).toBe(201);
    },
    /** A one-minute order of the test merchant for `payer`, signed. */
    async createOrder(payer: string, no: string): Promise<string> {
      const body = JSON.stringify({ merchantOrderNo: no, amount: 12800, currency: 'CNY', subject: 'Tea', expireMinutes: 1, payerAccountId: payer });
      const res = await proc.call('/merchant/orders', { method: 'POST', headers: merchantHeaders('POST', '/merchant/orders', body), body });
      if (res.status !== 201) throw new Error(`create: ${res.status} ${await res.text()}`);
      return ((await res.json()) as { orderId: string }).orderId;
    },
  };
  return svc;
}
type Service = Awaited<ReturnType<typeof startService>>;

/** How many members `key` holds, whatever its type. */
async function sizeOf(raw: Redis, key: string): Promise<number> {
  const type = await raw.type(key);
  if (type === 'none') return 0;
  if (type === 'zset') return raw.zcard(key);
  if (type === 'list') return raw.llen(key);
  if (type === 'hash') return raw.hlen(key);
  if (type === 'set') return raw.scard(key);
  throw new Error(`${key} is a ${type}`);
}

/** Creates `n` orders on `svc`, 20 at a time; payer i is `${payerPrefix}${i}`. */
async function createOrders(svc: Service, n: number, payerPrefix: string): Promise<string[]> {
  const ids: string[] = new Array(n);
  const run = randomPrefix();
  let next = 0;
  await Promise.all(
    Array.from({ length: 20 }, async () => {
      while (next < n) {
        const i = next++;
        ids[i] = await svc.createOrder(`${payerPrefix}${i}`, `${run}-${i}`);
      }
    }),
  );
  return ids;
}

describe('close reminders across instances', () => {
  let redis: RedisServerHandle;
  const apps: TestApp[] = [];
  const services: Service[] = [];

  beforeAll(async () => {
    redis = await startRedisServer();
  });

  afterAll(async () => {
    jest.restoreAllMocks();
    await Promise.all(services.map((s) => s.kill()));
    await Promise.all(apps.map((a) => a.close()));
    await redis?.destroy();
  });

  it('two instances share the reminders: each sent exactly once, the counters of both add up', async () => {
    const env = {
      REDIS_KEY_PREFIX: randomPrefix(),
      RATE_LIMIT_ENABLED: 'false',
      CLOSE_REMINDER_MIN_LEFT_SECONDS: '10',
      CLOSE_REMINDER_SEND_CONCURRENCY: '5',
      CLOSE_REMINDER_CLAIM_BATCH: '5',
    };
    const [a, b] = await Promise.all([startTestApp(redis.url, env), startTestApp(redis.url, env)]);
    apps.push(a, b);
    const [ka, kb] = [reminderKit(a), reminderKit(b)];
    await ka.put('m_shared', true, 59);
    const ids: string[] = [];
    for (let i = 0; i < 200; i++) ids.push(await ka.create('m_shared', `p_sh${i}`));

    const records = await kb.settled(ids, 30_000);
    for (const [i, id] of ids.entries()) {
      expect(records.get(id)?.state).toBe('sent');
      expect((await kb.inbox(`p_sh${i}`)).map((m) => [m.outerBizId, m.msgId])).toEqual([[id, records.get(id)!.msgId]]);
    }
    const [ma, mb] = [await ka.metrics(), await kb.metrics()];
    expect(ma.close_reminders_scheduled_total + mb.close_reminders_scheduled_total).toBe(200);
    expect(ma.close_reminders_sent_total + mb.close_reminders_sent_total).toBe(200);
  }, 60_000);

  it('an instance SIGKILLed in the middle of a burst: another one sends what it held, every reminder exactly once', async () => {
    const prefix = randomPrefix();
    const doomed = await startService(redis.url, prefix, { CLOSE_REMINDER_SEND_CONCURRENCY: '10', CLOSE_REMINDER_CLAIM_BATCH: '10' });
    services.push(doomed);
    // Due 5 s after creation: every order is scheduled before the burst begins.
    await doomed.putSettings(55);
    const n = 300;
    const ids = await createOrders(doomed, n, 'p_kill');
    await waitUntil('every reminder to be scheduled', async () => (await doomed.metrics()).close_reminders_scheduled_total === n || 'not yet', 10_000, 50);

    // Killed once some reminders are done, some held (claimed, in flight) and some still waiting. The service is
    // frozen (SIGSTOP) while the queue is counted, so the counts are the ones it dies with.
    const raw = rawConnection(redis);
    const [pendingKey, readyKey, inFlightKey] = queueKeys(new KeyBuilder({ redis: { keyPrefix: prefix } } as AppConfig), REMINDER_QUEUE).stateKeys;
    let atKill: { pending: number; ready: number; inFlight: number } | undefined;
    try {
      await waitUntil(
        'the burst to be under way',
        async () => {
          doomed.child.kill('SIGSTOP');
          // What it wrote before it stopped (an ack on its way) still reaches Redis: count once that has landed.
          await sleep(100);
          const [pending, ready, inFlight] = await Promise.all([pendingKey, readyKey, inFlightKey].map((key) => sizeOf(raw, key)));
          if (inFlight > 0 && pending + ready + inFlight < n && pending + ready > 0) {
            await doomed.kill();
            atKill = { pending, ready, inFlight };
            return true;
          }
          doomed.child.kill('SIGCONT');
          return JSON.stringify({ pending, ready, inFlight });
        },
        20_000,
        5,
      );
    } finally {
      raw.disconnect();
    }
    expect(atKill!.inFlight).toBeGreaterThan(0);

    // What the survivor is handed: the reminders the killed instance held come again (a second attempt).
    const attempts: number[] = [];
    const proto = CloseReminderService.prototype as unknown as { send(d: Delivery<unknown>): Promise<void> };
    const send = proto.send;
    jest.spyOn(proto, 'send').mockImplementation(function (this: unknown, d: Delivery<unknown>) {
      attempts.push(d.attempt);
      return send.call(this, d);
    });
    const survivor = await startTestApp(redis.url, { REDIS_KEY_PREFIX: prefix, RATE_LIMIT_ENABLED: 'false', ...VISIBILITY });
    apps.push(survivor);
    const k = reminderKit(survivor);
    const records = await k.settled(ids, 30_000);
    for (const [i, id] of ids.entries()) {
      expect(records.get(id)?.state).toBe('sent');
      expect((await k.inbox(`p_kill${i}`)).map((m) => [m.outerBizId, m.msgId])).toEqual([[id, records.get(id)!.msgId]]);
    }
    // A reminder the killed instance had sent but not yet acked (its ack waits for the end of the event-loop turn)
    // is already final above; the survivor is handed it again once its visibility timeout passes.
    await waitUntil(
      'the queue to drain',
      async () => {
        const q = await k.queueStats();
        return q.pending + q.ready + q.inFlight === 0 || JSON.stringify(q);
      },
      15_000,
      50,
    );
    // The survivor sent all the killed instance had not finished, and was handed again what it held.
    expect((await k.metrics()).close_reminders_sent_total).toBeGreaterThanOrEqual(atKill!.pending + atKill!.ready);
    expect(attempts.filter((a) => a >= 2).length).toBe(atKill!.inFlight);
    expect(await k.queueStats()).toMatchObject({ pending: 0, ready: 0, inFlight: 0, dead: 0 });
  }, 60_000);

  it('Redis restarted (AOF) while reminders wait: after the restart each is sent once', async () => {
    const own = await startRedisServer({ appendonly: true });
    try {
      const svc = await startService(own.url, randomPrefix());
      services.push(svc);
      await svc.putSettings(55);
      const n = 100;
      const ids = await createOrders(svc, n, 'p_aof');
      await waitUntil('every reminder to be scheduled', async () => (await svc.metrics()).close_reminders_scheduled_total === n || 'not yet', 10_000, 50);
      expect(await svc.queue()).toMatchObject({ pending: n, inFlight: 0 });

      await own.restart();
      // Orders created after the restart are reminded too: the instance reads the order events again.
      await waitUntil('the service to be ready again', async () => (await svc.call('/health/ready')).status === 200, 10_000, 100);
      const after = await createOrders(svc, 10, 'p_aof_after');
      ids.push(...after);

      await waitUntil(
        'every reminder to be sent',
        async () => {
          const m = await svc.metrics();
          return m.close_reminders_sent_total === n + after.length || JSON.stringify(m);
        },
        30_000,
        100,
      );
      for (const [i, id] of ids.entries()) {
        const status = await svc.json<{ state: string; msgId: string }>(`/admin/close-reminder/orders/${id}`);
        expect(FINAL_STATES.has(status.state) && status.state).toBe('sent');
        const payer = i < n ? `p_aof${i}` : `p_aof_after${i - n}`;
        const inbox = await svc.json<{ messages: Array<{ bizType: string; outerBizId: string; msgId: string }> }>('/messages?limit=100', {
          authorization: `Bearer ${userToken(payer)}`,
        });
        expect(inbox.messages.filter((m) => m.bizType === 'CLOSE_REMINDER').map((m) => [m.outerBizId, m.msgId])).toEqual([[id, status.msgId]]);
      }
      expect(await svc.queue()).toMatchObject({ pending: 0, ready: 0, inFlight: 0, dead: 0 });
      await svc.kill();
    } finally {
      await own.destroy();
    }
  }, 60_000);
});
