import request from 'supertest';
import { RedisClusterHandle, startRedisCluster } from '../harness/redis-cluster';
import { RedisSentinelHandle, startRedisSentinel } from '../harness/redis-sentinel';
import { merchantHeaders, startTestApp, TestApp, userToken } from '../support/test-app';

/** The whole HTTP stack on each non-standalone topology: scripts, rate limits and nonces work unchanged. */
describe.each<[string, () => Promise<{ env: Record<string, string>; stop: () => Promise<void> }>]>([
  [
    'a 3-master Redis Cluster',
    async () => {
      const c: RedisClusterHandle = await startRedisCluster({ masters: 3 });
      return { env: { REDIS_CLUSTER_NODES: c.envValue }, stop: () => c.destroy() };
    },
  ],
  [
    'Redis Sentinel (master + replica)',
    async () => {
      const s: RedisSentinelHandle = await startRedisSentinel();
      return { env: { REDIS_SENTINELS: s.envValue, REDIS_SENTINEL_MASTER: s.masterName }, stop: () => s.destroy() };
    },
  ],
])('The app on %s', (_name, start) => {
  let topo: { env: Record<string, string>; stop: () => Promise<void> };
  let t: TestApp;

  beforeAll(async () => {
    topo = await start();
    // startTestApp sets REDIS_URL; an empty value means unset, so the topology above is the only one.
    t = await startTestApp('', { ...topo.env, RATE_LIMIT_USER: '3', RATE_LIMIT_WINDOW_MS: '5000' });
  });
  afterAll(async () => {
    await t?.close();
    await topo?.stop();
  });

  it('is ready once the scripts are loaded on every master', async () => {
    const res = await request(t.server).get('/health/ready');
    expect(res.body).toEqual({ status: 'ready', redis: 'up', scriptsLoaded: true });
  });

  it('runs a script per account across slots, and rate limits each account', async () => {
    for (const acc of ['acc_a', 'acc_b', 'acc_c', 'acc_d']) {
      const auth = { authorization: `Bearer ${userToken(acc)}` };
      const counts: number[] = [];
      for (let i = 0; i < 3; i++) counts.push((await request(t.server).post('/diagnostics/touch').set(auth).send({ label: 'x' })).body.count);
      expect(counts).toEqual([1, 2, 3]);
      expect((await request(t.server).post('/diagnostics/touch').set(auth).send({ label: 'x' })).status).toBe(429);
    }
  });

  it('claims merchant nonces once', async () => {
    const headers = merchantHeaders('GET', '/diagnostics/whoami', '');
    expect((await request(t.server).get('/diagnostics/whoami').set(headers)).status).toBe(200);
    expect((await request(t.server).get('/diagnostics/whoami').set(headers)).status).toBe(401);
  });
});
