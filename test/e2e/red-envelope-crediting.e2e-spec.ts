import { BackgroundWorkers } from '../../src/engines/workers/background-workers.service';
import Redis from 'ioredis';
import { MetricsService } from '../../src/platform/metrics/metrics.service';
import { CreditingService } from '../../src/features/red-envelope/crediting.service';
import { activityIndexKey } from '../../src/features/red-envelope/red-envelope.keys';
import { KeyBuilder } from '../../src/platform/redis/key-builder';
import { WalletService } from '../../src/features/wallet/wallet.service';
import type { WalletCommand } from '../../src/features/wallet/wallet.types';
import { rawConnection, waitUntil } from '../harness/redis-process';
import { randomPrefix, RedisServerHandle, startRedisServer } from '../harness/redis-server';
import { expectConserved, expectCreditedOnce, startService } from '../support/red-envelope-faults';
import { rainBody, rainId, rainKit } from '../support/red-envelopes';
import { CREDS, startTestApp, TestApp, userToken } from '../support/test-app';

/**
 * Crediting grabs into wallets exactly once through redelivery: WalletService.credit failing (spied on the
 * instance, Redis untouched) is retried after RED_ENVELOPE_CREDIT_RETRY_MS and never credits twice; a grab that
 * keeps failing is dead-lettered (and balances), then re-driven by ops and credited; a crediting instance
 * (dist/main.js) SIGKILLed mid-run has its pending grabs taken over by the survivor. After each test the
 * reconciliation balances and money is conserved (wallets + pools = top-ups).
 */
const ENV = { RATE_LIMIT_ENABLED: 'false', BALANCE_CHANNEL: 'wallet', RED_ENVELOPE_CREDIT_RETRY_MS: '200', RED_ENVELOPE_CREDIT_MAX_DELIVERIES: '4' };
const ADMIN = { 'x-admin-key': CREDS.adminKey, 'content-type': 'application/json' };

describe('red-envelope crediting through redelivery', () => {
  let redis: RedisServerHandle;
  let raw: Redis;
  const apps: TestApp[] = [];
  const kills: (() => Promise<void>)[] = [];

  beforeAll(async () => {
    redis = await startRedisServer();
    raw = rawConnection(redis);
  });
  afterEach(() => jest.restoreAllMocks());
  afterAll(async () => {
    await Promise.all(kills.map((k) => k()));
    await Promise.all(apps.map((a) => a.close()));
    raw?.disconnect();
    await redis?.destroy();
  });

  /** Fails the red-envelope credits: the first `n`, and every one to an account of `always`. */
  function failCredits(t: TestApp, n: number, always: Set<string> = new Set()) {
    const wallets = t.app.get(WalletService);
    const credit = wallets.credit.bind(wallets);
    const calls: string[] = [];
    let failures = 0;
    jest.spyOn(wallets, 'credit').mockImplementation(async (cmd: WalletCommand) => {
      if (cmd.kind === 'red-envelope') {
        calls.push(cmd.reference);
        if (failures < n || always.has(cmd.owner.id)) {
          failures++;
          throw new Error('wallet unavailable');
        }
      }
      return credit(cmd);
    });
    return { calls, failures: () => failures };
  }

  it('the first credits fail: each is retried and every grab is credited exactly once', async () => {
    const t = await startTestApp(redis.url, ENV);
    apps.push(t);
    const kit = rainKit(t);
    await kit.fund(CREDS.merchantId, 3000);
    const id = rainId('fail');
    await kit.create(rainBody(id, { totalAmount: 3000, count: 30, subPools: 2 }));
    const spy = failCredits(t, 45);
    const users = Array.from({ length: 40 }, (_, i) => `acc_f${i}`);
    const answers = await Promise.all(users.map((u) => kit.grab(u, id)));
    expect(answers.filter((r) => r.body.status === 'GRABBED')).toHaveLength(30);

    const r = await kit.credited(id, 20_000);
    expect(r).toMatchObject({ grabbed: { count: 30, amount: 3000 }, credited: { count: 30, amount: 3000 }, dead: { count: 0 }, balanced: true });
    // Every failure was delivered again (the failures ran out before any grab reached 4 deliveries).
    expect(spy.failures()).toBe(45);
    expect(spy.calls.length).toBeGreaterThanOrEqual(30 + 45);
    const grabs = await expectCreditedOnce(kit, id);
    expect(grabs.size).toBe(30);
    await expectConserved(kit, raw, [id], 3000);
  }, 40_000);

  it('once a rain is settled, every instance stops crediting it, not only the one that ended it', async () => {
    const shared = { ...ENV, REDIS_KEY_PREFIX: randomPrefix() };
    const [t1, t2] = [await startTestApp(redis.url, shared), await startTestApp(redis.url, shared)];
    apps.push(t1, t2);
    const [kit1, kit2] = [rainKit(t1), rainKit(t2)];
    await kit1.fund(CREDS.merchantId, 1000);
    const id = rainId('retire');
    await kit1.create(rainBody(id, { totalAmount: 1000, count: 10, endsAt: new Date(Date.now() + 2500).toISOString() }));
    // A grab on each instance: each starts crediting the rain.
    expect((await kit1.grab('acc_r1', id)).body.status).toBe('GRABBED');
    expect((await kit2.grab('acc_r2', id)).body.status).toBe('GRABBED');
    const crediting = [t1.app.get(CreditingService), t2.app.get(CreditingService)];
    expect(crediting.map((c) => c.isRunning(id))).toEqual([true, true]);
    // Ended and settled by the end job of one of them.
    await waitUntil('settled', async () => (await kit1.state(id)) === 'SETTLED', 20_000, 50);
    // The rain's crediting runner is labelled with its id in /metrics; once retired, its series go too.
    const series = async (t: TestApp) => (await t.app.get(MetricsService).render()).body.split('\n').filter((l) => l.includes(`red-envelope-credit:${id}"`));
    expect((await series(t1)).length + (await series(t2)).length).toBeGreaterThan(0);
    for (const c of crediting) await c.retireSettled();
    expect(crediting.map((c) => c.isRunning(id))).toEqual([false, false]);
    expect([await series(t1), await series(t2)]).toEqual([[], []]);
    await expectConserved(kit1, raw, [id], 1000);
  }, 40_000);

  it('concurrent starts of one rain’s crediting (grabs on an instance not crediting it yet, the jobs) make one runner', async () => {
    const t = await startTestApp(redis.url, { ...ENV, REDIS_KEY_PREFIX: randomPrefix() });
    apps.push(t);
    const kit = rainKit(t);
    await kit.fund(CREDS.merchantId, 1000);
    const id = rainId('race');
    await kit.create(rainBody(id, { totalAmount: 1000, count: 10 }));
    const crediting = t.app.get(CreditingService);
    await crediting.stop(id);
    const a = await kit.activities.mustRead(id);
    await Promise.all(Array.from({ length: 20 }, () => crediting.start(a)));
    const workers = t.app.get(BackgroundWorkers);
    const runnersOf = () => workers.names.filter((n) => n.startsWith(`streams:red-envelope-credit:${id}:`));
    // The one stopped above, and one started again.
    expect(runnersOf()).toHaveLength(2);
    expect(crediting.isRunning(id)).toBe(true);
    expect((await kit.grab('acc_race', id)).body.status).toBe('GRABBED');
    await kit.credited(id);
    await expectCreditedOnce(kit, id);
  }, 40_000);

  it('a grab that keeps failing is dead-lettered (balanced), then re-driven by ops and credited once', async () => {
    const t = await startTestApp(redis.url, ENV);
    apps.push(t);
    const kit = rainKit(t);
    await kit.fund(CREDS.merchantId, 1000);
    const id = rainId('dead');
    await kit.create(rainBody(id, { totalAmount: 1000, count: 10 }));
    const broken = new Set(['acc_d0']);
    const spy = failCredits(t, 0, broken);
    const first = await kit.grab('acc_d0', id);
    const others = await Promise.all(Array.from({ length: 5 }, (_, i) => kit.grab(`acc_d${i + 1}`, id)));
    expect(others.every((o) => o.body.status === 'GRABBED')).toBe(true);

    await waitUntil(
      'the broken grab to be dead-lettered',
      async () => {
        const rec = await kit.reconciliation(id);
        return (rec.dead.count === 1 && rec.pending.count === 0) || JSON.stringify(rec);
      },
      15_000,
      50,
    );
    const dead = await kit.reconciliation(id);
    expect(dead).toMatchObject({ grabbed: { count: 6 }, credited: { count: 5 }, dead: { count: 1, amount: first.body.amount }, balanced: true });
    // Given up after RED_ENVELOPE_CREDIT_MAX_DELIVERIES deliveries, none of them credited.
    expect(spy.calls.filter((c) => c === first.body.envelopeId)).toHaveLength(4);
    expect(await kit.balance('acc_d0')).toBe(0);
    const mine = await kit.user('acc_d0').get(`/red-envelopes/activities/${id}/mine`);
    expect(mine.body.items).toEqual([{ envelopeId: first.body.envelopeId, amount: first.body.amount, crediting: 'DEAD' }]);
    await expectConserved(kit, raw, [id], 1000);

    // The wallet is fixed; ops re-drive the dead letters.
    broken.clear();
    const redriven = await kit.admin().post(`/admin/red-envelopes/activities/${id}/dead-letters/redrive`);
    expect([redriven.status, redriven.body]).toEqual([200, { redriven: 1 }]);
    const r = await kit.credited(id);
    expect(r).toMatchObject({ credited: { count: 6 }, dead: { count: 0 }, pending: { count: 0 }, balanced: true });
    expect(await kit.balance('acc_d0')).toBe(first.body.amount);
    // A second re-drive has nothing to do.
    expect((await kit.admin().post(`/admin/red-envelopes/activities/${id}/dead-letters/redrive`)).body).toEqual({ redriven: 0 });
    await expectCreditedOnce(kit, id);
    await expectConserved(kit, raw, [id], 1000);
  }, 40_000);

  it('the crediting instance (dist/main.js) SIGKILLed mid-run: the survivor takes its pending grabs over, each credited once', async () => {
    const prefix = randomPrefix();
    // One credit at a time on the child, so its pending list is long when it dies.
    const child = await startService(redis.url, prefix, { ...ENV, RED_ENVELOPE_CREDIT_CONCURRENCY: '1' });
    kills.push(() => child.kill());
    const top = await child.call(`/admin/wallets/merchant:${CREDS.merchantId}/top-ups`, {
      method: 'POST',
      headers: ADMIN,
      body: JSON.stringify({ amount: 50_000, currency: 'CNY', reference: 'top-kill' }),
    });
    expect([200, 201]).toContain(top.status);
    const id = rainId('kill');
    const created = await child.call('/admin/red-envelopes/activities', {
      method: 'POST',
      headers: ADMIN,
      body: JSON.stringify(rainBody(id, { totalAmount: 50_000, count: 500, subPools: 2 })),
    });
    expect(created.status).toBe(202);
    await waitUntil(
      'the rain to be loaded',
      async () =>
        ['READY', 'OPEN'].includes(((await (await child.call(`/admin/red-envelopes/activities/${id}`, { headers: ADMIN })).json()) as { state: string }).state),
      20_000,
      50,
    );

    // 500 users grab through the child, 25 at a time; it is killed once 250 have been answered.
    let next = 0;
    let answered = 0;
    const burst = Promise.all(
      Array.from({ length: 25 }, async () => {
        while (next < 500) {
          const i = next++;
          await child
            .call(`/red-envelopes/activities/${id}/grab`, { method: 'POST', headers: { authorization: `Bearer ${userToken(`acc_k${i}`)}` } })
            .catch(() => null);
          answered++;
        }
      }),
    );
    await waitUntil('the grabs to be under way', async () => answered >= 250, 30_000, 2);
    await child.kill();
    await burst;

    const survivor = await startTestApp(redis.url, { ...ENV, REDIS_KEY_PREFIX: prefix });
    apps.push(survivor);
    const kit = rainKit(survivor);
    const before = await kit.reconciliation(id);
    expect(before.grabbed.count).toBeGreaterThanOrEqual(250);
    // Usually the child dies holding grabs it read and had not credited (pending with the dead consumer), but not
    // always: it may have credited everything it read (a loaded CI run). The redelivery tests above make that case
    // for certain; here what must hold is that every grab ends credited once.

    const r = await kit.credited(id, 20_000);
    expect(r).toMatchObject({ grabbed: { count: before.grabbed.count }, credited: { count: before.grabbed.count }, dead: { count: 0 }, balanced: true });
    await expectCreditedOnce(kit, id);
    await expectConserved(kit, raw, [id], 50_000);
    // The survivor also serves new grabs, credited too.
    expect((await kit.grab('acc_after', id)).body.status).toBe(before.grabbed.count < 500 ? 'GRABBED' : 'NONE_LEFT');
    await kit.credited(id);
    await expectConserved(kit, raw, [id], 50_000);
  }, 60_000);

  it('an instance that was already running and never served a grab of the rain takes over the grabs of a SIGKILLed crediting instance', async () => {
    const prefix = randomPrefix();
    // Up before the rain exists, so its crediting is not resumed at its boot; it serves no grab of the rain either.
    // It looks for rains to credit every 3 s, so it usually finds this one only after the child is gone.
    const survivor = await startTestApp(redis.url, { ...ENV, REDIS_KEY_PREFIX: prefix, RED_ENVELOPE_CREDIT_RETRY_MS: '3000' });
    apps.push(survivor);
    const kit = rainKit(survivor);
    const child = await startService(redis.url, prefix, { ...ENV, RED_ENVELOPE_CREDIT_CONCURRENCY: '1' });
    kills.push(() => child.kill());
    const top = await child.call(`/admin/wallets/merchant:${CREDS.merchantId}/top-ups`, {
      method: 'POST',
      headers: ADMIN,
      body: JSON.stringify({ amount: 30_000, currency: 'CNY', reference: 'top-orphan' }),
    });
    expect(top.status).toBe(201);
    const id = rainId('orphan');
    const created = await child.call('/admin/red-envelopes/activities', {
      method: 'POST',
      headers: ADMIN,
      body: JSON.stringify(rainBody(id, { totalAmount: 30_000, count: 300 })),
    });
    expect(created.status).toBe(202);
    await waitUntil(
      'the rain to be loaded',
      async () => ['READY', 'OPEN'].includes((await kit.admin().get(`/admin/red-envelopes/activities/${id}`)).body.state),
      20_000,
      50,
    );

    // Every grab goes through the child, 30 at a time; it dies right after the last answer, with grabs not credited.
    await Promise.all(
      Array.from({ length: 30 }, async (_, w) => {
        for (let i = w; i < 300; i += 30)
          await child.call(`/red-envelopes/activities/${id}/grab`, { method: 'POST', headers: { authorization: `Bearer ${userToken(`acc_o${i}`)}` } });
      }),
    );
    await child.kill();
    const before = await kit.reconciliation(id);
    expect(before.grabbed.count).toBe(300);
    // The child credits one at a time, so it dies with grabs pending (200 of 300 in a typical run): the survivor
    // credits them, without a grab of the rain coming to it (before, they waited for the end job).

    const r = await kit.credited(id, 20_000);
    expect(r).toMatchObject({ grabbed: { count: 300 }, credited: { count: 300 }, dead: { count: 0 }, balanced: true });
    await expectCreditedOnce(kit, id);
    await expectConserved(kit, raw, [id], 30_000);
  }, 60_000);

  it('at boot, crediting resumes for activities past the first page of the index (more than 1,000 in the retention)', async () => {
    const prefix = randomPrefix();
    // It looks for rains to credit at its boot and then once a minute: it does not take this one up again once stopped.
    const first = await startTestApp(redis.url, { ...ENV, REDIS_KEY_PREFIX: prefix, RED_ENVELOPE_CREDIT_RETRY_MS: '60000' });
    const kit = rainKit(first);
    await kit.fund(CREDS.merchantId, 1000);
    const id = rainId('paged');
    await kit.create(rainBody(id, { totalAmount: 1000, count: 10 }));
    // A grab whose crediting has not happened when the instance stops (its consumer stopped first).
    await first.app.get(CreditingService).stop(id);
    expect((await kit.store.grab(kit.store.pool(await kit.activities.mustRead(id), 0), 'acc_paged', false)).outcome).toBe('GRABBED');
    expect(await kit.reconciliation(id)).toMatchObject({ grabbed: { count: 1 }, pending: { count: 1 } });
    // 1,000 other activities ending before this one: listed first, so this one is on the index's second page.
    const indexKey = activityIndexKey(first.app.get(KeyBuilder));
    const soon = Date.now() + 60_000;
    await raw.zadd(indexKey, ...Array.from({ length: 1000 }, (_, i) => [soon, `${id}-other-${i}`]).flat());
    await first.close();

    const next = await startTestApp(redis.url, { ...ENV, REDIS_KEY_PREFIX: prefix });
    apps.push(next);
    const r = await rainKit(next).credited(id, 15_000);
    expect(r).toMatchObject({ grabbed: { count: 1 }, credited: { count: 1 }, pending: { count: 0 }, balanced: true });
  }, 40_000);
});
