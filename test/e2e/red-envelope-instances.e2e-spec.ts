import type Redis from 'ioredis';
import { rawConnection } from '../harness/redis-process';
import { randomPrefix, RedisServerHandle, startRedisServer } from '../harness/redis-server';
import { rainBody, rainId, rainKit } from '../support/red-envelopes';
import { CREDS, startTestApp, TestApp } from '../support/test-app';

/**
 * A rain grabbed through two instances on one Redis: more users than envelopes, each tapping three times at once,
 * the taps spread over both instances. Each envelope goes to one user, no user gets two, every answer that names an
 * envelope names the user's one, and once credited (by whichever instance) the rain balances and each user's wallet
 * holds exactly their envelope.
 */

const ENV = { RATE_LIMIT_ENABLED: 'false', BALANCE_CHANNEL: 'wallet', RED_ENVELOPE_CREDIT_RETRY_MS: '200' };

describe('red-envelope rain across instances', () => {
  let redis: RedisServerHandle;
  let raw: Redis;
  const apps: TestApp[] = [];

  beforeAll(async () => {
    redis = await startRedisServer();
    raw = rawConnection(redis);
    const prefix = randomPrefix();
    for (let i = 0; i < 2; i++) apps.push(await startTestApp(redis.url, { ...ENV, REDIS_KEY_PREFIX: prefix }));
  });
  afterAll(async () => {
    raw?.disconnect();
    await Promise.all(apps.map((a) => a.close()));
    await redis?.destroy();
  });

  it('300 envelopes, 3 sub-pools, 500 users × 3 taps over both instances: each envelope once, nobody twice, balanced once credited', async () => {
    const kits = apps.map((t) => rainKit(t));
    const TOTAL = 30_000;
    await kits[0].fund(CREDS.merchantId, TOTAL);
    const id = rainId('two');
    await kits[0].create(rainBody(id, { totalAmount: TOTAL, count: 300, subPools: 3 }));

    const users = Array.from({ length: 500 }, (_, i) => `acc_two_${i}`);
    const taps = await Promise.all(
      users.flatMap((u, i) =>
        [0, 1, 2].map(async (k) => {
          const res = await kits[(i + k) % 2].grab(u, id);
          return { u, status: res.status, body: res.body as { status: string; envelopeId?: string; amount?: number } };
        }),
      ),
    );
    for (const t of taps) expect({ u: t.u, status: t.status }).toEqual({ u: t.u, status: 200 });
    for (const t of taps) expect(['GRABBED', 'ALREADY_GRABBED', 'NONE_LEFT']).toContain(t.body.status);

    const grabbed = taps.filter((t) => t.body.status === 'GRABBED');
    expect(grabbed.length).toBe(300);
    expect(new Set(grabbed.map((t) => t.body.envelopeId)).size).toBe(300);
    expect(new Set(grabbed.map((t) => t.u)).size).toBe(300);
    // Every answer naming an envelope names the one the user grabbed.
    const envelopeOf = new Map(grabbed.map((t) => [t.u, t.body.envelopeId]));
    for (const t of taps.filter((x) => x.body.status === 'ALREADY_GRABBED'))
      expect({ u: t.u, envelopeId: t.body.envelopeId }).toEqual({ u: t.u, envelopeId: envelopeOf.get(t.u) });
    expect(grabbed.reduce((s, t) => s + (t.body.amount ?? 0), 0)).toBe(TOTAL);

    const r = await kits[1].credited(id);
    expect(r.balanced).toBe(true);
    expect(r.credited).toEqual({ count: 300, amount: TOTAL });
    expect(r.left).toEqual({ count: 0, amount: 0 });
    for (const t of grabbed) expect({ u: t.u, balance: await kits[Number(t.u.split('_').pop()) % 2].balance(t.u) }).toEqual({ u: t.u, balance: t.body.amount });
    const empty = users.filter((u) => !envelopeOf.has(u)).slice(0, 20);
    for (const u of empty) expect({ u, balance: await kits[0].balance(u) }).toEqual({ u, balance: 0 });
    await kits[0].expectConservation(raw);
  }, 60_000);
});
