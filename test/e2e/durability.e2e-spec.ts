import type Redis from 'ioredis';
import request from 'supertest';
import { setTimeout as sleep } from 'node:timers/promises';
import { ConfigError } from '../../src/platform/config/config.error';
import { RedisProcess, rawConnection, waitUntil, withConnection } from '../harness/redis-process';
import { RedisSentinelHandle, startRedisSentinel } from '../harness/redis-sentinel';
import { startRedisServer } from '../harness/redis-server';
import { activityBody, activityId } from '../support/seckill';
import { CREDS, merchantHeaders, startTestApp, TestApp, userToken } from '../support/test-app';

const TIMEOUT_MS = 300;
/** What a WRITE_UNCONFIRMED may take beyond its WAIT timeout(s): the script, the HTTP round trip, a loaded machine. */
const MARGIN_MS = 700;
const SERVICE = { 'x-service-token': CREDS.serviceToken };

let seq = 0;
const orderNo = () => `dur-${process.pid}-${++seq}`;

/** WAIT calls the node has served (INFO commandstats). */
async function waitCalls(node: RedisProcess): Promise<number> {
  const stats = await withConnection(node, (c) => c.info('commandstats'));
  return Number(/^cmdstat_wait:calls=(\d+)/m.exec(stats)?.[1] ?? 0);
}

/** Until the replica has everything the master has. */
async function replicaCaughtUp(s: RedisSentinelHandle): Promise<void> {
  await waitUntil(
    'the replica to catch up',
    async () => {
      const m = await withConnection(s.master, (c) => c.info('replication'));
      const r = await withConnection(s.replica, (c) => c.info('replication'));
      const masterOffset = /^master_repl_offset:(\d+)/m.exec(m)?.[1];
      return (/^master_link_status:up/m.test(r) && /^slave0:.*state=online/m.test(m) && r.includes(`slave_repl_offset:${masterOffset}`)) || 'behind';
    },
    10_000,
  );
}

function api(t: () => TestApp) {
  const createOrder = (no: string) => {
    const body = JSON.stringify({ merchantOrderNo: no, amount: 1200, currency: 'CNY', subject: 'Durable beans' });
    return request(t().server)
      .post('/merchant/orders')
      .set(merchantHeaders('POST', '/merchant/orders', body))
      .send(body);
  };
  const writeMessage = (outerBizId: string) =>
    request(t().server)
      .post('/messages')
      .set(SERVICE)
      .send({ accountId: 'acc_dur', bizType: 'PAYMENT_SUCCESS', outerBizId, title: 'Paid', content: 'Paid 12.00' });
  return { createOrder, writeMessage };
}

/** Runs `fn` with the replica's process stopped (SIGSTOP), continuing it (SIGCONT) whatever happens. */
async function withReplicaStalled<T>(s: RedisSentinelHandle, fn: () => Promise<T>): Promise<T> {
  const pid = s.replica.pid!;
  process.kill(pid, 'SIGSTOP');
  try {
    return await fn();
  } finally {
    process.kill(pid, 'SIGCONT');
  }
}

describe('durable writes under Sentinel (master + one replica)', () => {
  let s: RedisSentinelHandle;
  let durable: TestApp;
  let plain: TestApp;
  let raw: Redis;
  const sentinelEnv = (replicas: string) => ({
    REDIS_URL: '',
    REDIS_SENTINELS: s.envValue,
    REDIS_SENTINEL_MASTER: s.masterName,
    REDIS_COMMAND_TIMEOUT_MS: '1000',
    DURABILITY_REPLICAS: replicas,
    DURABILITY_TIMEOUT_MS: String(TIMEOUT_MS),
  });
  const d = api(() => durable);
  const p = api(() => plain);

  beforeAll(async () => {
    s = await startRedisSentinel();
    raw = rawConnection(s.master);
    // The first WAIT after a replica's full sync can take up to its once-a-second ACK: have it behind us.
    await raw.set('warm-up', '1');
    await raw.wait(1, 5000);
    durable = await startTestApp('', sentinelEnv('1'));
    plain = await startTestApp('', sentinelEnv('0'));
  });

  afterAll(async () => {
    await durable?.close();
    await plain?.close();
    raw?.disconnect();
    await s?.destroy();
  });

  it('with DURABILITY_REPLICAS=1, an order and a message are acknowledged after a WAIT for one replica, which has them', async () => {
    const before = await waitCalls(s.master);
    const no = orderNo();
    const order = await d.createOrder(no);
    expect(order.status).toBe(201);
    const message = await d.writeMessage(`dur-${no}`);
    expect(message.status).toBe(201);
    expect(await waitCalls(s.master)).toBe(before + 2);
    // What WAIT confirmed is on the replica already, no waiting.
    const onReplica = await withConnection(s.replica, (c) => c.keys(`*${order.body.orderId}*`));
    expect(onReplica.length).toBeGreaterThan(0);
  });

  it('with DURABILITY_REPLICAS=1, a flash-sale reservation is acknowledged after its units and then its buyer index (which finds its order) are on the replica', async () => {
    const id = activityId('dur');
    const created = await request(durable.server)
      .post('/admin/seckill/activities')
      .set({ 'x-admin-key': CREDS.adminKey })
      .send(activityBody(id, [{ productId: 'p', stock: 2 }]));
    expect(created.status).toBe(201);
    const before = await waitCalls(s.master);
    const r = await request(durable.server)
      .post(`/seckill/activities/${id}/products/p/reservations`)
      .set('authorization', `Bearer ${userToken('acc_dur_rsv')}`)
      .send({ quantity: 1, requestId: 'dur-1' });
    expect(r.status).toBe(201);
    // One WAIT after the reserve script, one after the buyer index: the answered order id can be found on the replica.
    expect(await waitCalls(s.master)).toBe(before + 2);
    const index = await withConnection(s.replica, (c) => c.keys('*seckill:{u:acc_dur_rsv}:reservations'));
    expect(index).toHaveLength(1);
    expect(await withConnection(s.replica, (c) => c.hexists(index[0], `o:${r.body.orderId as string}`))).toBe(1);
  });

  it('with DURABILITY_REPLICAS=0, sends no WAIT', async () => {
    const before = await waitCalls(s.master);
    expect((await p.createOrder(orderNo())).status).toBe(201);
    expect((await p.writeMessage(`plain-${seq}`)).status).toBe(201);
    expect(await waitCalls(s.master)).toBe(before);
  });

  it('answers WRITE_UNCONFIRMED (503, Retry-After) within the timeout while the replica is stalled; a retry with the same key returns the original', async () => {
    const no = orderNo();
    const { single, batch } = await withReplicaStalled(s, async () => {
      const started = Date.now();
      const res = await d.createOrder(no);
      const single = { res, ms: Date.now() - started };
      // Writes in flight together.
      const nos = Array.from({ length: 10 }, () => orderNo());
      const timed = async (call: Promise<request.Response>) => {
        const started = Date.now();
        return { res: await call, ms: Date.now() - started };
      };
      const replies = await Promise.all([...nos.map((n) => timed(d.createOrder(n))), ...nos.map((n) => timed(d.writeMessage(`m-${n}`)))]);
      return { single, batch: { nos, replies } };
    });

    expect(single.res.status).toBe(503);
    expect(single.res.body.error).toBe('WRITE_UNCONFIRMED');
    expect(single.res.headers['retry-after']).toBe('1');
    expect(single.ms).toBeLessThan(TIMEOUT_MS + MARGIN_MS);
    expect(batch.replies.map((r) => [r.res.status, r.res.body.error])).toEqual(batch.replies.map(() => [503, 'WRITE_UNCONFIRMED']));
    // WAIT holds the command connection: each of a request's commands (the nonce, then the script) can queue behind
    // one WAIT already out, and the script then waits its own. Bounded, never a hang.
    expect(Math.max(...batch.replies.map((r) => r.ms))).toBeLessThan(3 * TIMEOUT_MS + MARGIN_MS);

    // The write exists on the master: the retry with the same key answers it (200, not a second 201).
    await replicaCaughtUp(s);
    const retried = await d.createOrder(no);
    expect(retried.status).toBe(200);
    expect(retried.body).toMatchObject({ merchantOrderNo: no, version: 1, status: 'CREATED' });
    for (const n of batch.nos) {
      expect((await d.createOrder(n)).status).toBe(200);
      const m = await d.writeMessage(`m-${n}`);
      expect([m.status, m.body.duplicate]).toEqual([200, true]);
    }

    const metrics = (await request(durable.server).get('/metrics').set({ 'x-admin-key': CREDS.adminKey })).text;
    expect(metrics).toMatch(/durability_unconfirmed_writes_total\{script="orders\/create"\} 11/);
    expect(metrics).toMatch(/durability_unconfirmed_writes_total\{script="messages\/write"\} 10/);
    expect(metrics).toMatch(/durability_wait_seconds_count \d+/);
  });

  it('does not stall the service after the replica comes back', async () => {
    await sleep(50);
    expect((await d.createOrder(orderNo())).status).toBe(201);
  });
});

describe('the start-up check of DURABILITY_REPLICAS', () => {
  it('refuses to boot in production when a master has fewer replicas, naming the variable; development boots', async () => {
    const redis = await startRedisServer();
    try {
      const env = { DURABILITY_REPLICAS: '1', DURABILITY_TIMEOUT_MS: '300', NODE_ENV: 'production' };
      const err = await startTestApp(redis.url, env).then(
        (t) => t.close().then(() => undefined),
        (e: unknown) => e,
      );
      expect(err).toBeInstanceOf(ConfigError);
      expect((err as ConfigError).variable).toBe('DURABILITY_REPLICAS');
      const dev = await startTestApp(redis.url, { DURABILITY_REPLICAS: '1', DURABILITY_TIMEOUT_MS: '300', NODE_ENV: 'development' });
      await dev.close();
    } finally {
      await redis.destroy();
    }
  });
});

describe('the start-up check of the eviction policy', () => {
  it('refuses to boot in production on a Redis that evicts keys, naming REDIS_URL and the policy; development boots', async () => {
    const redis = await startRedisServer({ args: ['--maxmemory', '64mb', '--maxmemory-policy', 'volatile-lru'] });
    try {
      const err = await startTestApp(redis.url, { NODE_ENV: 'production' }).then(
        (t) => t.close().then(() => undefined),
        (e: unknown) => e,
      );
      expect(err).toBeInstanceOf(ConfigError);
      expect((err as ConfigError).variable).toBe('REDIS_URL');
      expect((err as ConfigError).message).toMatch(/^REDIS_URL names a Redis with maxmemory-policy volatile-lru: .*noeviction/);
      const dev = await startTestApp(redis.url, { NODE_ENV: 'development' });
      await dev.close();
    } finally {
      await redis.destroy();
    }
  });

  it('boots in production on a Redis with noeviction', async () => {
    const redis = await startRedisServer({ args: ['--maxmemory', '64mb', '--maxmemory-policy', 'noeviction'] });
    try {
      const t = await startTestApp(redis.url, { NODE_ENV: 'production' });
      await t.close();
    } finally {
      await redis.destroy();
    }
  });
});
