import { startRedisServer } from '../harness/redis-server';
import request from 'supertest';
import { startTestApp, userToken } from '../support/test-app';

/**
 * Every stream consumer and delay-queue worker of the app is on a blocking connection. After Redis was down long
 * enough for those connections to back off, a read can be queued on one that is still reconnecting when Redis
 * comes back; closing that connection does not settle such a read (ioredis), and stopping once waited for it.
 */
describe('shutdown right after a Redis restart', () => {
  it('app.close() finishes promptly although the blocking connections are still reconnecting', async () => {
    const redis = await startRedisServer();
    const t = await startTestApp(redis.url);
    try {
      await redis.stop();
      // A request while Redis is down (a 503), then long enough for every blocking connection to back off.
      expect(
        (
          await request(t.server)
            .get('/messages')
            .set('authorization', `Bearer ${userToken('down-1')}`)
        ).status,
      ).toBe(503);
      await new Promise((r) => setTimeout(r, 5000));
      await redis.start();
      const started = Date.now();
      await t.close();
      expect(Date.now() - started).toBeLessThan(10_000);
    } finally {
      await redis.destroy();
    }
  }, 40_000);
});
