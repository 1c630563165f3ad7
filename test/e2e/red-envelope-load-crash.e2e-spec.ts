import { DelayQueueService } from '../../src/engines/delay-queue/delay-queue.service';
import { JOBS_QUEUE } from '../../src/features/red-envelope/red-envelope-activities.service';
import { WalletService } from '../../src/features/wallet/wallet.service';
import { rawConnection, waitUntil } from '../harness/redis-process';
import { randomPrefix, RedisServerHandle, startRedisServer } from '../harness/redis-server';
import { expectConserved, startService } from '../support/red-envelope-faults';
import { rainBody, rainId, rainKit } from '../support/red-envelopes';
import { CREDS, startTestApp, TestApp } from '../support/test-app';

/**
 * The instance loading a big rain (dist/main.js, run `npx nest build` first) SIGKILLed in the middle of the
 * preload: nothing half-loaded is grabbable, and the `advance:<id>` job, brought due on a survivor, finishes the
 * load (once the dead loader's lock lease has run out) with exactly count envelopes adding up to the total, the
 * sponsor debited once. About 35 s, most of it the lease.
 */
const ADMIN = { 'x-admin-key': CREDS.adminKey, 'content-type': 'application/json' };
const COUNT = 300_000;
const TOTAL = 3_000_000;

describe('a preload killed mid-way', () => {
  let redis: RedisServerHandle;
  let survivor: TestApp | undefined;
  let kill: (() => Promise<void>) | undefined;

  beforeAll(async () => {
    redis = await startRedisServer();
  });
  afterAll(async () => {
    await kill?.();
    await survivor?.close();
    await redis?.destroy();
  });

  it('dist/main.js SIGKILLed while LOADING: the advance job finishes it → READY with exactly count envelopes, funded once', async () => {
    const prefix = randomPrefix();
    const child = await startService(redis.url, prefix, { BALANCE_CHANNEL: 'wallet' });
    kill = () => child.kill();
    const top = await child.call(`/admin/wallets/merchant:${CREDS.merchantId}/top-ups`, {
      method: 'POST',
      headers: ADMIN,
      body: JSON.stringify({ amount: TOTAL, currency: 'CNY', reference: 'top-load' }),
    });
    expect([200, 201]).toContain(top.status);
    const id = rainId('big');
    const created = await child.call('/admin/red-envelopes/activities', {
      method: 'POST',
      headers: ADMIN,
      body: JSON.stringify(rainBody(id, { totalAmount: TOTAL, count: COUNT, subPools: 4 })),
    });
    expect(created.status).toBe(202);
    await waitUntil(
      'the preload to be under way',
      async () => {
        const view = (await (await child.call(`/admin/red-envelopes/activities/${id}`, { headers: ADMIN })).json()) as {
          state: string;
          progress: { loaded: number; total: number };
        };
        return (view.state === 'LOADING' && view.progress.loaded > 0) || JSON.stringify(view);
      },
      20_000,
      5,
    );
    await child.kill();

    survivor = await startTestApp(redis.url, { REDIS_KEY_PREFIX: prefix, RATE_LIMIT_ENABLED: 'false', BALANCE_CHANNEL: 'wallet' });
    const kit = rainKit(survivor);
    const a = await kit.activities.mustRead(id);
    expect(a.state).toBe('LOADING');
    expect(a.loaded).toBeGreaterThan(0);
    expect(a.loaded).toBeLessThan(COUNT);
    // Some sub-pool was not armed: it serves nothing, and the app answers NOT_STARTED.
    const stats = await kit.activities.poolStats(a);
    const unarmed = stats.map((s, k) => (s.armed ? -1 : k)).filter((k) => k >= 0);
    expect(unarmed.length).toBeGreaterThan(0);
    for (const k of unarmed) expect(await kit.store.grab(kit.store.pool(a, k), 'acc_early', true)).toEqual({ outcome: 'NOT_LOADED' });
    expect((await kit.grab('acc_early', id)).body.status).toBe('NOT_STARTED');
    // Every cent accounted for mid-load too: what the armed sub-pools hold, and the rest still loading.
    const midLoad = await kit.reconciliation(id);
    expect(midLoad.loading.amount).toBeGreaterThan(0);
    expect(midLoad.left.amount + midLoad.loading.amount).toBe(TOTAL);
    expect(midLoad.left.count + midLoad.loading.count).toBe(COUNT);
    expect(midLoad.balanced).toBe(true);

    const queue = survivor.app.get(DelayQueueService);
    expect(await queue.reschedule(JOBS_QUEUE, `advance:${id}`, { dueAt: Date.now() })).toBeGreaterThan(0);
    // The killed loader's lock lease (30 s) must run out first: until then the job is refused and tried again; it is
    // brought due again every second so that it runs as soon as the lease has ended.
    await waitUntil(
      'READY',
      async () => {
        if ((await kit.store.activity(id))?.state === 'READY') return true;
        await queue.reschedule(JOBS_QUEUE, `advance:${id}`, { dueAt: Date.now() }).catch(() => 0);
        return 'not yet';
      },
      45_000,
      1000,
    );
    const r = await kit.reconciliation(id);
    expect(r).toMatchObject({
      total: TOTAL,
      count: COUNT,
      left: { count: COUNT, amount: TOTAL },
      loading: { count: 0, amount: 0 },
      grabbed: { count: 0 },
      balanced: true,
    });
    expect((await kit.activities.poolStats(a)).every((p) => p.armed)).toBe(true);
    const raw = rawConnection(redis);
    try {
      let listed = 0;
      for (let k = 0; k < 4; k++) {
        listed += await raw.llen(kit.store.pool(a, k).pool);
        expect(await raw.exists(kit.store.pool(a, k).staging)).toBe(0);
      }
      expect(listed).toBe(COUNT);
      // Funded once, and now grabbable.
      const ledger = await survivor.app.get(WalletService).entries({ kind: 'merchant', id: CREDS.merchantId }, undefined, 10);
      expect(ledger.items.filter((e) => e.reference === `red-envelope:${id}`)).toHaveLength(1);
      await waitUntil('a tap to grab', async () => (await kit.grab('acc_after', id)).body.status === 'GRABBED', 5000, 100);
      await kit.credited(id);
      await expectConserved(kit, raw, [id], TOTAL);
    } finally {
      raw.disconnect();
    }
  }, 60_000);
});
