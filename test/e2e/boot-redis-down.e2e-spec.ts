import Redis from 'ioredis';
import request from 'supertest';
import { eventStreamKeys } from '../../src/features/orders/order.keys';
import { KeyBuilder } from '../../src/platform/redis/key-builder';
import { waitUntil } from '../harness/redis-process';
import { startRedisServer } from '../harness/redis-server';
import { CREDS, startTestApp, userToken } from '../support/test-app';

/**
 * A service must boot while its Redis is down (a rolling restart during a Redis failover): alive, not ready, every
 * call a prompt 503, and every background worker (stream consumers, delay-queue processors, the crediting of red
 * envelopes) picks up once Redis answers.
 */
describe('booting while Redis is down', () => {
  it('boots, answers 503 until Redis is back, then works without a restart', async () => {
    const redis = await startRedisServer();
    await redis.stop();
    const t = await startTestApp(redis.url);
    try {
      const http = () => request(t.server);
      expect((await http().get('/health/live')).status).toBe(200);
      expect((await http().get('/health/ready')).status).toBe(503);
      const started = Date.now();
      const down = await http()
        .get('/messages')
        .set('authorization', `Bearer ${userToken('boot-1')}`);
      expect(down.status).toBe(503);
      expect(down.body.error).toBe('REDIS_UNAVAILABLE');
      expect(Date.now() - started).toBeLessThan(3000);

      await redis.start();
      await waitUntil('ready', async () => (await http().get('/health/ready')).status === 200, 20_000);
      const write = await http()
        .post('/messages')
        .set('x-service-token', CREDS.serviceToken)
        .send({ accountId: 'boot-1', bizType: 'PAYMENT_SUCCESS', outerBizId: 'boot-order-1', title: 'Paid', content: 'Paid 1.00' });
      expect(write.status).toBe(201);
      const pull = await http()
        .get('/messages')
        .set('authorization', `Bearer ${userToken('boot-1')}`);
      expect(pull.status).toBe(200);
      expect(pull.body.messages.map((m: { outerBizId: string }) => m.outerBizId)).toEqual(['boot-order-1']);
      // The order events' consumer groups were created by their readers once Redis answered.
      const raw = new Redis(redis.url);
      try {
        const stream = eventStreamKeys(new KeyBuilder(t.config))[0];
        await waitUntil('the order-event consumer groups', async () => ((await raw.xinfo('GROUPS', stream).catch(() => [])) as unknown[]).length >= 2, 20_000);
      } finally {
        raw.disconnect();
      }
    } finally {
      const closing = Date.now();
      await t.close();
      expect(Date.now() - closing).toBeLessThan(10_000);
      await redis.destroy();
    }
  }, 60_000);
});
