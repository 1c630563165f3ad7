import request from 'supertest';
import { RedisServerHandle, startRedisServer } from '../harness/redis-server';
import { rainBody, rainKit } from '../support/red-envelopes';
import { activityBody, activityId, seckillKit } from '../support/seckill';
import { CREDS, startTestApp, TestApp } from '../support/test-app';

/**
 * The gauges the dashboard and the alert rules read that no counter gives (ops/grafana, ops/prometheus): Redis
 * availability, replicas missing under DURABILITY_REPLICAS, a sale's stock, a rain's progress. Each is read from a
 * running app's GET /metrics.
 */
async function scrape(t: TestApp): Promise<string> {
  const res = await request(t.server).get('/metrics').set('x-admin-key', CREDS.adminKey);
  expect(res.status).toBe(200);
  return res.text;
}

/** The value of the sample `name{labels}` (labels as exposed, in order), or undefined when absent. */
function sample(text: string, name: string, labels = ''): number | undefined {
  const line = text.split('\n').find((l) => l.startsWith(labels ? `${name}{${labels}} ` : `${name} `));
  return line === undefined ? undefined : Number(line.slice(line.lastIndexOf(' ') + 1));
}

describe('ops gauges on GET /metrics', () => {
  let redis: RedisServerHandle;
  const apps: TestApp[] = [];
  const start = async (env: Record<string, string> = {}) => {
    const t = await startTestApp(redis.url, { RATE_LIMIT_ENABLED: 'false', ...env });
    apps.push(t);
    return t;
  };

  beforeAll(async () => {
    redis = await startRedisServer();
  });
  afterAll(async () => {
    await Promise.all(apps.map((a) => a.close()));
    await redis?.destroy();
  });

  it('redis_up is 1 while the command connection is up, 0 while Redis is down', async () => {
    const t = await start();
    expect(sample(await scrape(t), 'redis_up')).toBe(1);
    await redis.stop();
    try {
      // The connection notices when its socket closes (within a moment: the readiness probe asks Redis meanwhile).
      let up: number | undefined;
      for (let i = 0; i < 50 && up !== 0; i++) {
        await request(t.server).get('/health/ready');
        up = sample(await scrape(t), 'redis_up');
      }
      expect(up).toBe(0);
    } finally {
      await redis.start();
    }
  });

  it('durability_replicas_missing: what the emptiest master lacks under DURABILITY_REPLICAS, 0 without durable writes', async () => {
    const plain = await start();
    expect(sample(await scrape(plain), 'durability_replicas_missing')).toBe(0);
    // A standalone Redis has no replica: two wanted, two missing (outside production the boot only warns).
    const durable = await start({ DURABILITY_REPLICAS: '2', DURABILITY_TIMEOUT_MS: '100' });
    expect(sample(await scrape(durable), 'durability_replicas_missing')).toBe(2);
  });

  it('seckill_stock_units: each product of a live sale, available, reserved and sold', async () => {
    const kit = seckillKit(await start());
    const id = activityId('ops');
    await kit.create(activityBody(id, [{ productId: 'p1', stock: 5, shards: 2 }]));
    expect((await kit.reserve('acc_ops_1', id, 'p1')).status).toBe(201);
    // The live sales are read from the catalog the instance refreshes: a sale just created shows within moments.
    const live = `activity="${id}",product="p1",state="available"`;
    let text = await scrape(kit.t);
    for (let i = 0; i < 50 && sample(text, 'seckill_stock_units', live) === undefined; i++) {
      await new Promise((r) => setTimeout(r, 100));
      text = await scrape(kit.t);
    }
    expect(sample(text, 'seckill_stock_units', `activity="${id}",product="p1",state="available"`)).toBe(4);
    expect(sample(text, 'seckill_stock_units', `activity="${id}",product="p1",state="reserved"`)).toBe(1);
    expect(sample(text, 'seckill_stock_units', `activity="${id}",product="p1",state="sold"`)).toBe(0);
  });

  it('red_envelope_rain_envelopes: a rain’s envelopes left, grabbed and credited', async () => {
    const kit = rainKit(await start({ BALANCE_CHANNEL: 'wallet' }));
    const id = `ops-${Date.now().toString(36)}`;
    await kit.fund(CREDS.merchantId, 10_000);
    await kit.create(rainBody(id, { totalAmount: 1_000, count: 10 }));
    expect((await kit.grab('acc_ops_r1', id)).body.status).toBe('GRABBED');
    expect((await kit.grab('acc_ops_r2', id)).body.status).toBe('GRABBED');
    await kit.credited(id);
    const text = await scrape(kit.t);
    expect(sample(text, 'red_envelope_rain_envelopes', `activity="${id}",state="left"`)).toBe(8);
    expect(sample(text, 'red_envelope_rain_envelopes', `activity="${id}",state="grabbed"`)).toBe(2);
    expect(sample(text, 'red_envelope_rain_envelopes', `activity="${id}",state="credited"`)).toBe(2);
    expect(sample(text, 'red_envelope_rain_envelopes', `activity="${id}",state="pending"`)).toBe(0);
  });
});
