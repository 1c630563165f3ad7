import Redis from 'ioredis';
import type { AppConfig } from '../../src/config/app-config';
import { orderIndexKey, orderKeys, orderNumberKeyOf } from '../../src/orders/order-keys';
import { KeyBuilder } from '../../src/redis/key-builder';
import { waitUntil } from '../harness/redis-process';
import { randomPrefix, RedisServerHandle, startRedisServer } from '../harness/redis-server';
import { diedAtCrashPoint, ServiceProcess, startServiceProcess } from '../support/service-process';
import { CREDS, merchantHeaders } from '../support/test-app';

/**
 * The orders' multi-step writes killed at each step boundary: the built service (dist/main.js; `npx nest build`
 * first) runs with CRASH_AT=<boundary> and dies there with SIGKILL, a fresh instance starts on the same Redis, and
 * the state converges with no retry from the caller.
 */
const CREATE_BOUNDARIES = ['orders.create.after-expiry', 'orders.create.after-write'];
/** How long after its expiresAt an order's expiry closes it on a live instance (the delay queue's poll and the close). */
const EXPIRY_BOUND_MS = 5_000;

describe('orders: crash points', () => {
  let redis: RedisServerHandle;
  let raw: Redis;
  const prefix = randomPrefix();
  const keys = new KeyBuilder({ redis: { keyPrefix: prefix } } as AppConfig);
  const started: ServiceProcess[] = [];
  const start = async (crashAt?: string[]) => {
    const svc = await startServiceProcess(redis.url, prefix, { crashAt, env: { CHANNEL_LATENCY_MS: '2' } });
    started.push(svc);
    return svc;
  };
  const merchant = (svc: ServiceProcess, method: string, path: string, body?: unknown) => {
    const text = body === undefined ? '' : JSON.stringify(body);
    return svc.call(path, { method, headers: merchantHeaders(method, path, text), ...(text ? { body: text } : {}) });
  };

  beforeAll(async () => {
    redis = await startRedisServer();
    raw = new Redis(redis.url);
  });
  afterAll(async () => {
    for (const svc of started) await svc.kill();
    raw?.disconnect();
    await redis?.destroy();
  });

  it('order create: killed at every boundary, the order is CLOSED with its order.closed event within 5 s of its expiresAt, or was never written', async () => {
    const nos = CREATE_BOUNDARIES.map((b, i) => `crash-${process.pid}-${i}`);
    // One instance per boundary, each dying in the middle of its create (the caller never hears back).
    await Promise.all(
      CREATE_BOUNDARIES.map(async (boundary, i) => {
        const svc = await start([boundary]);
        const res = merchant(svc, 'POST', '/merchant/orders', { merchantOrderNo: nos[i], amount: 500, currency: 'CNY', subject: 'Crash', expireMinutes: 1 });
        await expect(res).rejects.toThrow();
        await diedAtCrashPoint(svc, boundary);
      }),
    );
    // Nobody retries the creates: a fresh instance alone must bring every order to an end.
    const fresh = await start();
    const written = await raw.get(orderIndexKey(keys, orderNumberKeyOf(CREDS.merchantId, nos[1])));
    expect({ beforeWrite: await raw.get(orderIndexKey(keys, orderNumberKeyOf(CREDS.merchantId, nos[0]))), afterWrite: written !== null }).toEqual({
      beforeWrite: null,
      afterWrite: true,
    });
    const orderId = written!;
    const [orderKey, , eventsKey] = orderKeys(keys, orderId);
    const expiresAt = Number(await raw.hget(orderKey, 'expiresAt'));
    await waitUntil(
      'the interrupted order to close',
      async () => (await raw.hget(orderKey, 'status')) === 'CLOSED',
      expiresAt - Date.now() + EXPIRY_BOUND_MS,
      100,
    );
    const closedAt = Number(await raw.hget(orderKey, 'closedAt'));
    expect(closedAt - expiresAt).toBeLessThan(EXPIRY_BOUND_MS);
    const events = (await raw.xrange(eventsKey, '-', '+')).map(([, f]) => f).filter((f) => f[f.indexOf('orderId') + 1] === orderId);
    expect(events.map((f) => f[f.indexOf('type') + 1])).toEqual(['order.created', 'order.closed']);
    // Over HTTP too: the merchant sees it closed by its expiry; the order cut before its write does not exist.
    const seen = (await (await merchant(fresh, 'GET', `/merchant/orders/${nos[1]}`)).json()) as { status: string; closeReason: string };
    expect([seen.status, seen.closeReason]).toEqual(['CLOSED', 'EXPIRED']);
    expect((await merchant(fresh, 'GET', `/merchant/orders/${nos[0]}`)).status).toBe(404);
  }, 150_000);
});
