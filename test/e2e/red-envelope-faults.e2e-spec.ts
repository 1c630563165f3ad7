import { randomBytes } from 'node:crypto';
import { DelayQueueService } from '../../src/engines/delay-queue/delay-queue.service';
import { JOBS_QUEUE } from '../../src/features/red-envelope/red-envelope-activities.service';
import type { ActivityRecord } from '../../src/features/red-envelope/red-envelope.types';
import { WalletService } from '../../src/features/wallet/wallet.service';
import type { WalletCommand } from '../../src/features/wallet/wallet.types';
import { rawConnection, waitUntil } from '../harness/redis-process';
import { startRedisServer } from '../harness/redis-server';
import { expectConserved, expectCreditedOnce } from '../support/red-envelope-faults';
import { rainBody, rainId, rainKit, type RainKit } from '../support/red-envelopes';
import { CREDS, startTestApp, type TestApp, useAppOnOwnRedis } from '../support/test-app';

/**
 * Red envelopes through faults: Redis restarted (AOF) in the middle of the grabs; an instance that crashed in
 * the middle of a preload (a partial staging list) or between the activity's record and the sponsor's debit, its
 * `advance:<id>` job taking it up; and the end job refunding what is left once, however often it runs, and
 * settling only once every grab is credited. After each, the reconciliation balances and money is conserved
 * (wallets + what the pools hold = top-ups).
 */
const ENV = { RATE_LIMIT_ENABLED: 'false', BALANCE_CHANNEL: 'wallet', RED_ENVELOPE_CREDIT_RETRY_MS: '200', RED_ENVELOPE_CREDIT_MAX_DELIVERIES: '1000' };

const ctx = useAppOnOwnRedis(ENV);
let kit: RainKit;
let queue: DelayQueueService;
let wallets: WalletService;
/** Every activity on the shared app, and every top-up made there: the conservation check spans them all. */
const ids: string[] = [];
let toppedUp = 0;
beforeAll(() => {
  kit = rainKit(ctx.t);
  queue = ctx.t.app.get(DelayQueueService);
  wallets = ctx.t.app.get(WalletService);
});
afterEach(() => jest.restoreAllMocks());

async function fund(merchantId: string, amount: number) {
  await kit.fund(merchantId, amount);
  toppedUp += amount;
}
const merchantBalance = async (id: string) => (await wallets.wallet({ kind: 'merchant', id })).balances.find((b) => b.currency === 'CNY')?.balance ?? 0;
const entriesWith = async (owner: { kind: 'merchant' | 'account'; id: string }, reference: string) =>
  (await wallets.entries(owner, undefined, 200)).items.filter((e) => e.reference === reference);

/** The activity record as create() would have stored it, in `state` (the instance then crashed). */
async function crashedRecord(id: string, sponsor: string, state: 'FUNDING' | 'LOADING', over: Partial<ActivityRecord> = {}) {
  const now = Date.now();
  const a: ActivityRecord = {
    activityId: id,
    sponsorMerchantId: sponsor,
    title: 'Crashed rain',
    currency: 'CNY',
    totalAmount: 5000,
    count: 50,
    minAmount: 1,
    perUserLimit: 1,
    subPools: 2,
    startsAt: now - 1000,
    endsAt: now + 3600_000,
    seed: randomBytes(16).toString('hex'),
    fingerprint: 'f'.repeat(64),
    state,
    loaded: 0,
    createdAt: now,
    ...over,
  };
  // As create() does: the job first, then the record.
  await queue.schedule(JOBS_QUEUE, `advance:${id}`, { delayMs: 60_000 }, { activityId: id }, { ifExists: 'keep' });
  expect(await kit.store.saveActivity(a, a.endsAt + 86_400_000, true)).toBe(true);
  return a;
}

/** Brings the `advance:<id>` job due now and waits until the activity is no longer FUNDING or LOADING. */
async function runAdvanceJob(id: string) {
  expect(await queue.reschedule(JOBS_QUEUE, `advance:${id}`, { dueAt: Date.now() })).toBeGreaterThan(0);
  await waitUntil(
    'the advance job to run',
    async () => {
      const a = await kit.store.activity(id);
      return (!a || !['FUNDING', 'LOADING'].includes(a.state)) && (await queue.get(JOBS_QUEUE, `advance:${id}`)) === null;
    },
    15_000,
    50,
  );
}

/** Every envelope in the activity's pools, as "id:amount", sorted (the records crashedRecord writes have the first tags). */
async function pooled(id: string, subPools: number, part: 'pool' | 'staging' = 'pool') {
  const out: string[] = [];
  for (let k = 0; k < subPools; k++) out.push(...(await ctx.raw.lrange(kit.store.pool({ activityId: id, subPools }, k)[part], 0, -1)));
  return out.sort();
}

describe('red envelopes through faults', () => {
  it('an instance crashed mid-preload: nothing half-armed is grabbable, the advance job restarts it → READY with exactly count envelopes', async () => {
    const sponsor = 'm_load';
    await fund(sponsor, 5000);
    const id = rainId('load');
    ids.push(id);
    const a = await crashedRecord(id, sponsor, 'LOADING', { loaded: 10 });
    // It was funded (as create() does before LOADING).
    await wallets.debit({ owner: { kind: 'merchant', id: sponsor }, currency: 'CNY', amount: 5000, reference: `red-envelope:${id}`, kind: 'funding' });
    const amounts = kit.activities.amounts(a);
    const expected = Array.from({ length: a.count }, (_, i) => `${id}.${i}:${amounts[i]}`).sort();
    // Sub-pool 0 was staged completely and armed; sub-pool 1 has 10 of its 25 envelopes staged.
    const k0 = kit.store.pool(a, 0);
    const k1 = kit.store.pool(a, 1);
    const even = Array.from({ length: 25 }, (_, j) => 2 * j);
    await kit.store.stage(
      k0,
      even.map((i) => `${id}.${i}:${amounts[i]}`),
    );
    const common = { startsAt: a.startsAt, endsAt: a.endsAt, limit: 1, expireAt: a.endsAt + 86_400_000 };
    expect((await kit.store.arm(k0, { ...common, count: 25, amount: even.reduce((s, i) => s + amounts[i], 0), pool: 0 })).armed).toBe(true);
    await kit.store.stage(
      k1,
      even.slice(0, 10).map((j) => `${id}.${j + 1}:${amounts[j + 1]}`),
    );

    // Half-loaded: the app answers NOT_STARTED, and the half-staged sub-pool serves nothing even to the script.
    const early = await Promise.all(Array.from({ length: 10 }, (_, i) => kit.grab(`acc_l${i}`, id)));
    expect(early.map((r) => r.body.status)).toEqual(Array(10).fill('NOT_STARTED'));
    expect(await kit.store.grab(k1, 'acc_x', false)).toEqual({ outcome: 'NOT_LOADED' });
    expect((await kit.admin().get(`/admin/red-envelopes/activities/${id}`)).body).toMatchObject({ state: 'LOADING', progress: { loaded: 10, total: 50 } });
    expect(await pooled(id, 2)).toHaveLength(25);

    await runAdvanceJob(id);
    const view = (await kit.admin().get(`/admin/red-envelopes/activities/${id}`)).body;
    expect(view).toMatchObject({ state: 'OPEN', progress: { loaded: 50, total: 50 } });
    // Exactly the split, each envelope once, nothing left staged.
    expect(await pooled(id, 2)).toEqual(expected);
    expect(await pooled(id, 2, 'staging')).toEqual([]);
    // Funded once: the advance job did not debit again.
    expect(await merchantBalance(sponsor)).toBe(0);
    expect(await entriesWith({ kind: 'merchant', id: sponsor }, `red-envelope:${id}`)).toHaveLength(1);

    // The app uses the record it read (LOADING) for up to a second: the first tap that grabs.
    await waitUntil('a tap to grab', async () => (await kit.grab('acc_l0', id)).body.status === 'GRABBED', 5000, 100);
    const grabs = await Promise.all(Array.from({ length: 60 }, (_, i) => kit.grab(`acc_l${i}`, id)));
    expect(grabs.filter((r) => r.body.status === 'GRABBED')).toHaveLength(49);
    expect(grabs.filter((r) => r.body.status === 'ALREADY_GRABBED')).toHaveLength(1);
    expect(grabs.filter((r) => r.body.status === 'NONE_LEFT')).toHaveLength(10);
    await kit.credited(id);
    await expectCreditedOnce(kit, id);
    await expectConserved(kit, ctx.raw, ids, toppedUp);
  }, 40_000);

  it('crashed between the record and the debit (FUNDING): the job funds it once and loads it; with too little money it is removed and nothing debited', async () => {
    const sponsor = 'm_fund';
    await fund(sponsor, 7000);
    const id = rainId('fund');
    ids.push(id);
    await crashedRecord(id, sponsor, 'FUNDING');
    expect((await kit.grab('acc_u1', id)).body.status).toBe('NOT_STARTED');
    await runAdvanceJob(id);
    expect((await kit.admin().get(`/admin/red-envelopes/activities/${id}`)).body.state).toBe('OPEN');
    expect(await merchantBalance(sponsor)).toBe(2000);
    // Advanced again (another instance's job, a create retried): nothing more is debited.
    await kit.activities.advance(id);
    expect(await merchantBalance(sponsor)).toBe(2000);
    expect(await entriesWith({ kind: 'merchant', id: sponsor }, `red-envelope:${id}`)).toHaveLength(1);
    expect(await pooled(id, 2)).toHaveLength(50);

    // Debited, then crashed before LOADING was saved: the job does not debit twice.
    const id2 = rainId('fund2');
    ids.push(id2);
    await crashedRecord(id2, sponsor, 'FUNDING', { totalAmount: 2000, count: 20 });
    await wallets.debit({ owner: { kind: 'merchant', id: sponsor }, currency: 'CNY', amount: 2000, reference: `red-envelope:${id2}`, kind: 'funding' });
    await runAdvanceJob(id2);
    expect((await kit.admin().get(`/admin/red-envelopes/activities/${id2}`)).body.state).toBe('OPEN');
    expect(await merchantBalance(sponsor)).toBe(0);
    expect(await entriesWith({ kind: 'merchant', id: sponsor }, `red-envelope:${id2}`)).toHaveLength(1);

    // The sponsor's wallet is empty now: a crashed FUNDING activity is removed, nothing debited.
    const poor = rainId('poor');
    await crashedRecord(poor, sponsor, 'FUNDING', { totalAmount: 1000, count: 10 });
    await runAdvanceJob(poor);
    expect((await kit.admin().get(`/admin/red-envelopes/activities/${poor}`)).status).toBe(404);
    expect(await entriesWith({ kind: 'merchant', id: sponsor }, `red-envelope:${poor}`)).toEqual([]);
    expect(await merchantBalance(sponsor)).toBe(0);
    expect(await pooled(poor, 2)).toEqual([]);
    await expectConserved(kit, ctx.raw, ids, toppedUp);
  }, 40_000);

  it('the end job refunds the leftovers once however often it runs, and settles only once every grab is credited', async () => {
    const sponsor = 'm_end';
    await fund(sponsor, 4000);
    const id = rainId('end');
    ids.push(id);
    const endsAt = Date.now() + 2500;
    await kit.create(rainBody(id, { sponsorMerchantId: sponsor, totalAmount: 4000, count: 40, subPools: 2, endsAt: new Date(endsAt).toISOString() }));
    // One grabber's wallet refuses credits until later.
    const credit = wallets.credit.bind(wallets);
    let blocked = true;
    jest.spyOn(wallets, 'credit').mockImplementation(async (cmd: WalletCommand) => {
      if (blocked && cmd.owner.id === 'acc_e0') throw new Error('wallet unavailable');
      return credit(cmd);
    });
    const grabs = await Promise.all(Array.from({ length: 12 }, (_, i) => kit.grab(`acc_e${i}`, id)));
    expect(grabs.every((r) => r.body.status === 'GRABBED')).toBe(true);
    const grabbed = grabs.reduce((s, r) => s + (r.body.amount as number), 0);

    // At endsAt the job ends it: grabs stop, the 28 left go back to the sponsor in one entry, but not SETTLED yet.
    await waitUntil('the end job to refund', async () => (await kit.admin().get(`/admin/red-envelopes/activities/${id}`)).body.state === 'ENDED', 15_000, 50);
    expect((await kit.grab('acc_late', id)).body.status).toBe('ENDED');
    const ended = await kit.reconciliation(id);
    expect(ended).toMatchObject({ left: { count: 0 }, refunded: { count: 28, amount: 4000 - grabbed }, pending: { count: 1 }, balanced: true });
    expect(await merchantBalance(sponsor)).toBe(4000 - grabbed);
    await expectConserved(kit, ctx.raw, ids, toppedUp);

    // The job again (twice at once, and its queue entry brought due): still one refund, still ENDED.
    await Promise.all([kit.activities.end(id).catch(() => 'pending'), kit.activities.end(id).catch(() => 'pending')]);
    await queue.reschedule(JOBS_QUEUE, `end:${id}`, { dueAt: Date.now() }).catch(() => 0);
    await new Promise((r) => setTimeout(r, 500));
    expect((await kit.admin().get(`/admin/red-envelopes/activities/${id}`)).body.state).toBe('ENDED');
    expect(await entriesWith({ kind: 'merchant', id: sponsor }, `red-envelope:${id}:leftover`)).toHaveLength(1);
    expect(await merchantBalance(sponsor)).toBe(4000 - grabbed);

    // The wallet works again: the grab is credited, and the job (retried) settles the activity.
    blocked = false;
    await kit.credited(id);
    await queue.reschedule(JOBS_QUEUE, `end:${id}`, { dueAt: Date.now() }).catch(() => 0);
    await waitUntil('SETTLED', async () => (await kit.admin().get(`/admin/red-envelopes/activities/${id}`)).body.state === 'SETTLED', 15_000, 50);
    expect((await kit.admin().get(`/admin/red-envelopes/activities/${id}`)).body).toMatchObject({ refundedAmount: 4000 - grabbed });
    // Once more after SETTLED: nothing moves.
    await kit.activities.end(id);
    await queue.schedule(JOBS_QUEUE, `end:${id}`, { dueAt: Date.now() }, { activityId: id });
    await waitUntil('the extra end job to run', async () => (await queue.get(JOBS_QUEUE, `end:${id}`)) === null, 10_000, 50);
    expect(await entriesWith({ kind: 'merchant', id: sponsor }, `red-envelope:${id}:leftover`)).toHaveLength(1);
    expect(await merchantBalance(sponsor)).toBe(4000 - grabbed);
    expect(await kit.reconciliation(id)).toMatchObject({
      credited: { count: 12, amount: grabbed },
      refunded: { count: 28, amount: 4000 - grabbed },
      balanced: true,
    });
    await expectCreditedOnce(kit, id);
    await expectConserved(kit, ctx.raw, ids, toppedUp);
  }, 40_000);

  it('Redis restarted (AOF) mid-grabs: nothing lost or doubled, balanced, and crediting resumes', async () => {
    const own = await startRedisServer({ appendonly: true });
    const raw = rawConnection(own);
    let t: TestApp | undefined;
    try {
      t = await startTestApp(own.url, ENV);
      const k = rainKit(t);
      await k.fund(CREDS.merchantId, 20_000);
      const id = rainId('aof');
      await k.create(rainBody(id, { totalAmount: 20_000, count: 200, subPools: 2 }));
      const n = 150;
      const first = new Map<number, { status: number; envelopeId?: string }>();
      let next = 0;
      let restarted = false;
      await Promise.all(
        Array.from({ length: 10 }, async () => {
          while (next < n) {
            const i = next++;
            const res = await k.grab(`acc_a${i}`, id);
            first.set(i, { status: res.status, envelopeId: res.body.envelopeId as string | undefined });
            if (i === 40 && !restarted) {
              restarted = true;
              void own.restart();
            }
          }
        }),
      );
      await waitUntil(
        'Redis to be back',
        () =>
          k.store.now().then(
            () => true,
            () => false,
          ),
        15_000,
        50,
      );
      expect([...first.values()].filter((r) => r.status !== 200).length).toBeGreaterThan(0);
      // Every user taps again: each holds one envelope (the one answered before, if it was answered).
      const again = await Promise.all(Array.from({ length: n }, (_, i) => k.grab(`acc_a${i}`, id)));
      for (const [i, res] of again.entries()) {
        expect({ i, status: res.status, grabbed: ['GRABBED', 'ALREADY_GRABBED'].includes(res.body.status as string) }).toEqual({
          i,
          status: 200,
          grabbed: true,
        });
        const before = first.get(i)!;
        if (before.status === 200) expect({ i, envelopeId: res.body.envelopeId }).toEqual({ i, envelopeId: before.envelopeId });
      }
      expect(new Set(again.map((r) => r.body.envelopeId)).size).toBe(n);
      const r = await k.credited(id, 20_000);
      expect(r).toMatchObject({ grabbed: { count: n }, credited: { count: n }, left: { count: 200 - n }, balanced: true });
      const grabs = await expectCreditedOnce(k, id);
      expect([...grabs.keys()].sort()).toEqual(again.map((x) => x.body.envelopeId as string).sort());
      await expectConserved(k, raw, [id], 20_000);
      // After the restart, a new grab is made and credited.
      expect((await k.grab('acc_new', id)).body.status).toBe('GRABBED');
      await k.credited(id);
      await expectConserved(k, raw, [id], 20_000);
    } finally {
      raw.disconnect();
      await t?.close();
      await own.destroy();
    }
  }, 60_000);
});
