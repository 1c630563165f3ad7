import request from 'supertest';
import { RedisServerHandle, randomPrefix, startRedisServer } from '../harness/redis-server';
import { CREDS, startTestApp, TestApp, userToken } from '../support/test-app';

async function eventually(fn: () => Promise<boolean>, timeoutMs = 8000): Promise<boolean> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    if (await fn()) return true;
    await new Promise((r) => setTimeout(r, 100));
  }
  return false;
}

describe('Ops endpoints', () => {
  let redis: RedisServerHandle;

  beforeAll(async () => {
    redis = await startRedisServer();
  });
  afterAll(async () => {
    await redis.destroy();
  });

  describe('health', () => {
    let t: TestApp;
    beforeAll(async () => {
      t = await startTestApp(redis.url);
    });
    afterAll(() => t.close());

    it('is live and ready once Redis answers and the scripts are loaded', async () => {
      expect((await request(t.server).get('/health/live')).body).toEqual({ status: 'live' });
      const ready = await request(t.server).get('/health/ready');
      expect(ready.status).toBe(200);
      expect(ready.body).toEqual({ status: 'ready', redis: 'up', scriptsLoaded: true });
    });

    it('is not ready (503, Retry-After) while Redis is down but stays live, and recovers after a restart', async () => {
      await redis.stop();
      try {
        const started = Date.now();
        const ready = await request(t.server).get('/health/ready');
        expect(Date.now() - started).toBeLessThan(t.config.redis.commandTimeoutMs + 500);
        expect(ready.status).toBe(503);
        expect(ready.headers['retry-after']).toBeDefined();
        expect(ready.body.redis).toBe('down');
        expect((await request(t.server).get('/health/live')).status).toBe(200);
      } finally {
        await redis.start();
      }
      expect(await eventually(async () => (await request(t.server).get('/health/ready')).status === 200)).toBe(true);
      // the restarted Redis has an empty script cache: scripts must still run
      const res = await request(t.server)
        .post('/diagnostics/touch')
        .set('authorization', `Bearer ${userToken('acc_h')}`)
        .send({ label: 'after' });
      expect(res.status).toBe(200);
    });

    it('needs no credentials for probes', async () => {
      expect((await request(t.server).get('/health/ready').set('authorization', 'Bearer junk')).status).toBe(200);
    });
  });

  describe('metrics', () => {
    let t: TestApp;
    beforeAll(async () => {
      t = await startTestApp(redis.url);
    });
    afterAll(() => t.close());

    it('exposes an HTTP duration histogram by route and status, and Redis error counters', async () => {
      await request(t.server)
        .post('/diagnostics/touch')
        .set('authorization', `Bearer ${userToken('acc_m')}`)
        .send({ label: 'm' });
      await request(t.server)
        .post('/diagnostics/touch')
        .set('authorization', `Bearer ${userToken('acc_m')}`)
        .send({ bad: 1 });
      const res = await request(t.server).get('/metrics').set('x-admin-key', CREDS.adminKey);
      expect(res.status).toBe(200);
      expect(res.headers['content-type']).toMatch(/text\/plain/);
      expect(res.text).toMatch(/http_request_duration_seconds_bucket\{[^}]*method="POST"[^}]*route="\/diagnostics\/touch"[^}]*status="200"/);
      expect(res.text).toMatch(/http_request_duration_seconds_count\{[^}]*route="\/diagnostics\/touch"[^}]*status="400"[^}]*\} 1/);
      expect(res.text).toMatch(/redis_errors_total\{kind="unavailable"\} \d+/);
    });

    it('counts Redis unavailability', async () => {
      const count = async () => {
        const text = (await request(t.server).get('/metrics').set('x-admin-key', CREDS.adminKey)).text;
        return Number(/redis_errors_total\{kind="unavailable"\} (\d+)/.exec(text)?.[1]);
      };
      const before = await count();
      await redis.stop();
      try {
        const res = await request(t.server)
          .post('/diagnostics/touch')
          .set('authorization', `Bearer ${userToken('acc_m')}`)
          .send({ label: 'x' });
        expect(res.status).toBe(503);
      } finally {
        await redis.start();
      }
      expect(await count()).toBeGreaterThan(before);
    });
  });

  describe('rate limits', () => {
    const prefix = randomPrefix();
    const env = { REDIS_KEY_PREFIX: prefix, RATE_LIMIT_USER: '5', RATE_LIMIT_WINDOW_MS: '3000' };
    let a: TestApp;
    let b: TestApp;
    beforeAll(async () => {
      a = await startTestApp(redis.url, env);
      b = await startTestApp(redis.url, env);
    });
    afterAll(async () => {
      await a.close();
      await b.close();
    });

    it('holds across two instances sharing Redis, answering 429 with Retry-After', async () => {
      const auth = { authorization: `Bearer ${userToken('acc_rl')}` };
      const statuses: number[] = [];
      for (let i = 0; i < 6; i++) {
        const app = i % 2 === 0 ? a : b;
        const res = await request(app.server).get('/diagnostics/whoami').set(auth);
        statuses.push(res.status);
        if (res.status === 429) {
          expect(Number(res.headers['retry-after'])).toBeGreaterThanOrEqual(1);
          expect(Number(res.headers['retry-after'])).toBeLessThanOrEqual(3);
          expect(res.body.error).toBe('RATE_LIMITED');
        }
      }
      expect(statuses).toEqual([200, 200, 200, 200, 200, 429]);
    });

    it('limits each caller separately', async () => {
      const res = await request(b.server)
        .get('/diagnostics/whoami')
        .set('authorization', `Bearer ${userToken('acc_other')}`);
      expect(res.status).toBe(200);
      expect(res.headers['x-ratelimit-remaining']).toBe('4');
    });

    it('charges failed authentication to the IP, answering 429 once the anonymous limit is spent', async () => {
      const c = await startTestApp(redis.url, { RATE_LIMIT_ANONYMOUS: '3', RATE_LIMIT_WINDOW_MS: '5000' });
      try {
        const statuses: number[] = [];
        for (let i = 0; i < 5; i++) statuses.push((await request(c.server).get('/metrics').set('x-admin-key', `guess-${i}-guess-guess`)).status);
        expect(statuses).toEqual([401, 401, 401, 429, 429]);
        const limited = await request(c.server).get('/diagnostics/whoami');
        expect(limited.status).toBe(429);
        expect(Number(limited.headers['retry-after'])).toBeGreaterThanOrEqual(1);
        // A caller with valid credentials is counted on its own limit, not the IP's.
        expect(
          (
            await request(c.server)
              .get('/diagnostics/whoami')
              .set('authorization', `Bearer ${userToken('acc_ok')}`)
          ).status,
        ).toBe(200);
      } finally {
        await c.close();
      }
    });

    it('never limits health probes', async () => {
      for (let i = 0; i < 30; i++) expect((await request(a.server).get('/health/live')).status).toBe(200);
    });
  });
});
