import { RedisService } from '../../src/platform/redis/redis.service';
import { SPREAD_TAGS } from '../../src/platform/redis/slot-tags';
import type { PoolKeys } from '../../src/features/red-envelope/red-envelope.keys';
import { RedEnvelopeStore } from '../../src/features/red-envelope/red-envelope.store';
import { rainId } from '../support/red-envelopes';
import { useAppOnOwnRedis } from '../support/test-app';

/**
 * Each lua/features/red-envelope script's contract, through RedEnvelopeStore on a real Redis: arm (never an incomplete
 * staging list, once), grab (repeat tap, window, NONE_LEFT, FALL_OVER then CLAIMED), take (EXISTING on a retry),
 * confirm (idempotent), settle (pending → credited once, dead → pending, credited final), drain (idempotent, left →
 * refunded) and redrive. After each, a sub-pool's counters add up: loaded = left + grabbed + refunded and
 * grabbed = pending + credited + dead.
 */
const ctx = useAppOnOwnRedis({ RATE_LIMIT_ENABLED: 'false' });
let store: RedEnvelopeStore;
let redis: RedisService;
beforeAll(() => {
  store = ctx.t.app.get(RedEnvelopeStore);
  redis = ctx.t.app.get(RedisService);
});

const HOUR = 3600_000;
const items = (id: string, pool: number, amounts: number[]) => amounts.map((a, i) => `${id}.${pool + i * 10}:${a}`);

async function armed(id: string, pool: number, amounts: number[], window: { startsAt?: number; endsAt?: number; limit?: number } = {}) {
  const k = store.pool({ activityId: id, subPools: 16, tags: SPREAD_TAGS }, pool);
  const now = await store.now();
  await store.stage(k, items(id, pool, amounts));
  const r = await store.arm(k, {
    count: amounts.length,
    amount: amounts.reduce((s, a) => s + a, 0),
    startsAt: window.startsAt ?? now - 1000,
    endsAt: window.endsAt ?? now + HOUR,
    limit: window.limit ?? 1,
    pool,
    expireAt: now + 2 * HOUR,
  });
  expect(r.armed).toBe(true);
  return k;
}

async function expectBalanced(k: PoolKeys) {
  const s = await store.stats(k);
  expect(s.leftCount + s.grabbedCount + s.refundedCount).toBe(s.loadedCount);
  expect(s.leftAmount + s.grabbedAmount + s.refundedAmount).toBe(s.loadedAmount);
  expect(s.pendingCount + s.creditedCount + s.deadCount).toBe(s.grabbedCount);
  expect(s.pendingAmount + s.creditedAmount + s.deadAmount).toBe(s.grabbedAmount);
  // The pool list holds exactly what is left.
  expect(await redis.command((c) => c.llen(k.pool))).toBe(s.leftCount);
  return s;
}

describe('red-envelope scripts through the store', () => {
  it('arm refuses an incomplete staging list (nothing grabbable), then arms once', async () => {
    const id = rainId('arm');
    const k = store.pool({ activityId: id, subPools: 1, tags: SPREAD_TAGS }, 0);
    const now = await store.now();
    const arm = { count: 4, amount: 100, startsAt: now - 1000, endsAt: now + HOUR, limit: 1, pool: 0, expireAt: now + 2 * HOUR };
    await store.stage(k, items(id, 0, [10, 20, 30]));
    expect(await store.arm(k, arm)).toEqual({ armed: false, staged: 3 });
    expect(await redis.command((c) => c.exists(k.pool))).toBe(0);
    expect((await store.stats(k)).armed).toBe(false);
    // Half-loaded: a tap is not served from the staging list.
    expect(await store.grab(k, 'acc_a1', false)).toEqual({ outcome: 'NOT_LOADED' });
    expect(await redis.command((c) => c.llen(k.staging))).toBe(3);

    await store.stage(k, [`${id}.30:40`]);
    expect(await store.arm(k, arm)).toEqual({ armed: true, staged: 0 });
    expect(await redis.command((c) => c.exists(k.staging))).toBe(0);
    let s = await expectBalanced(k);
    expect(s).toMatchObject({ armed: true, loadedCount: 4, loadedAmount: 100, leftCount: 4, leftAmount: 100 });

    const g = await store.grab(k, 'acc_a1', false);
    expect(g.outcome).toBe('GRABBED');
    // Armed again (a load resumed after a crash, a staging list written again): nothing changes.
    await store.stage(k, items(id, 0, [10, 20, 30, 40]));
    expect(await store.arm(k, arm)).toEqual({ armed: true, staged: 0 });
    s = await expectBalanced(k);
    expect(s).toMatchObject({ leftCount: 3, grabbedCount: 1, loadedCount: 4 });
  });

  it('grab: a repeated tap answers the same envelope; the window on the Redis clock; NONE_LEFT', async () => {
    const id = rainId('grab');
    const k = await armed(id, 0, [10, 20]);
    const first = await store.grab(k, 'acc_g1', false);
    expect(first).toMatchObject({ outcome: 'GRABBED', envelopeId: expect.stringMatching(new RegExp(`^${id}\\.`)) });
    expect(await store.grab(k, 'acc_g1', false)).toEqual({ ...first, outcome: 'ALREADY_GRABBED' });
    expect(await store.grabsOf(k, 'acc_g1')).toEqual([`${(first as { envelopeId: string }).envelopeId}:${(first as { amount: number }).amount}:0:1`]);
    expect(await store.envelopeState(k, (first as { envelopeId: string }).envelopeId)).toBe('pending');
    // The grab is on the credit stream, in the same step.
    const credits = await redis.command((c) => c.xrange(k.credits, '-', '+'));
    expect(credits).toHaveLength(1);
    expect(credits[0][1]).toEqual([
      'envelopeId',
      (first as { envelopeId: string }).envelopeId,
      'account',
      'acc_g1',
      'amount',
      String((first as { amount: number }).amount),
      'pool',
      '0',
      'home',
      '0',
    ]);
    expect((await store.grab(k, 'acc_g2', false)).outcome).toBe('GRABBED');
    expect(await store.grab(k, 'acc_g3', false)).toEqual({ outcome: 'NONE_LEFT' });
    // A holder still gets their envelope back once it is empty.
    expect((await store.grab(k, 'acc_g1', false)).outcome).toBe('ALREADY_GRABBED');
    expect(await expectBalanced(k)).toMatchObject({ grabbedCount: 2, grabbedAmount: 30, pendingCount: 2, leftCount: 0 });

    const now = await store.now();
    const early = await armed(rainId('early'), 0, [10], { startsAt: now + HOUR, endsAt: now + 2 * HOUR });
    expect(await store.grab(early, 'acc_g1', true)).toEqual({ outcome: 'NOT_STARTED' });
    const late = await armed(rainId('late'), 0, [10], { startsAt: now - 2 * HOUR, endsAt: now - 1 });
    expect(await store.grab(late, 'acc_g1', true)).toEqual({ outcome: 'ENDED' });
    expect(await store.take(late, 'acc_g1', 0)).toEqual({ outcome: 'ENDED' });
    expect(await expectBalanced(early)).toMatchObject({ leftCount: 1, grabbedCount: 0 });
    await expectBalanced(late);
  });

  it("a grab reads the user's record once, the window and the sub-pool's index in one HMGET, and no claim on a one-sub-pool rain", async () => {
    const calls = async () => {
      const info = await redis.command((c) => c.info('commandstats'));
      const of = (name: string) => Number(new RegExp(`cmdstat_${name}:calls=(\\d+)`).exec(info)?.[1] ?? 0);
      return { hget: of('hget'), hmget: of('hmget') };
    };
    const id = rainId('count');
    const k = await armed(
      id,
      3,
      Array.from({ length: 20 }, (_, i) => 10 + i),
    );
    const before = await calls();
    for (let i = 0; i < 20; i++) expect((await store.grab(k, `acc_c${i}`, false)).outcome).toBe('GRABBED');
    const after = await calls();
    // Per grab: HGET of the user's grabs, HMGET of the window with the index; a little room for the app's own jobs.
    expect(after.hmget - before.hmget).toBeGreaterThanOrEqual(20);
    expect(after.hget - before.hget).toBeLessThanOrEqual(20 + 5);
    // The index read with the window is the one recorded.
    expect(await store.grabsOf(k, 'acc_c0')).toEqual([expect.stringMatching(/^[^:]+:\d+:3:1$/)]);
    const credits = await redis.command((c) => c.xrange(k.credits, '-', '+'));
    expect(credits.every(([, f]) => f[7] === '3' && f[9] === '3')).toBe(true);
    await expectBalanced(k);
  });

  it('the window edges on the Redis clock: startsAt is inside, endsAt outside, and the window opens and closes by itself', async () => {
    // startsAt = the Redis time now: the script runs at or after it, so it is open.
    let now = await store.now();
    const opening = await armed(rainId('edge'), 0, [10], { startsAt: now, endsAt: now + HOUR });
    expect((await store.grab(opening, 'acc_w1', false)).outcome).toBe('GRABBED');
    // endsAt = the Redis time now: already closed, for a grab and a fall-over take.
    now = await store.now();
    const closing = await armed(rainId('edge'), 0, [10], { startsAt: now - HOUR, endsAt: now });
    expect(await store.grab(closing, 'acc_w1', true)).toEqual({ outcome: 'ENDED' });
    expect(await store.take(closing, 'acc_w1', 1)).toEqual({ outcome: 'ENDED' });
    // A window 300 ms ahead, 300 ms long: NOT_STARTED, then GRABBED, then ENDED, by the Redis clock alone.
    now = await store.now();
    const k = await armed(rainId('edge'), 0, [10, 20, 30], { startsAt: now + 300, endsAt: now + 600 });
    expect(await store.grab(k, 'acc_w1', false)).toEqual({ outcome: 'NOT_STARTED' });
    while ((await store.now()) < now + 300) await new Promise((r) => setTimeout(r, 10));
    expect((await store.grab(k, 'acc_w1', false)).outcome).toBe('GRABBED');
    while ((await store.now()) < now + 600) await new Promise((r) => setTimeout(r, 10));
    expect(await store.grab(k, 'acc_w2', false)).toEqual({ outcome: 'ENDED' });
    expect(await expectBalanced(k)).toMatchObject({ grabbedCount: 1, leftCount: 2 });
    await expectBalanced(opening);
    await expectBalanced(closing);
  });

  it('per-user limit 2: a second tap grabs a second envelope, a third answers the first', async () => {
    const k = await armed(rainId('lim'), 0, [10, 20, 30], { limit: 2 });
    const a = await store.grab(k, 'acc_l', false);
    const b = await store.grab(k, 'acc_l', false);
    expect([a.outcome, b.outcome]).toEqual(['GRABBED', 'GRABBED']);
    expect(await store.grab(k, 'acc_l', false)).toEqual({ ...a, outcome: 'ALREADY_GRABBED' });
    expect(await store.grabsOf(k, 'acc_l')).toHaveLength(2);
    expect(await expectBalanced(k)).toMatchObject({ grabbedCount: 2, leftCount: 1 });
  });

  it('fall-over: FALL_OVER claims, CLAIMED while claimed, take is EXISTING on a retry, confirm is idempotent', async () => {
    const id = rainId('fo');
    const home = await armed(id, 0, [10]);
    const other = await armed(id, 1, [20, 30]);
    expect((await store.grab(home, 'acc_x', true)).outcome).toBe('GRABBED');
    // The home sub-pool is empty: without others NONE_LEFT, with others FALL_OVER and a claim.
    expect(await store.grab(home, 'acc_f', false)).toEqual({ outcome: 'NONE_LEFT' });
    expect(await store.grab(home, 'acc_f', true)).toEqual({ outcome: 'FALL_OVER', ordinal: 1 });
    expect(await redis.command((c) => c.hget(home.claims, 'acc_f'))).toBe('1');
    expect(await store.grab(home, 'acc_f', true)).toEqual({ outcome: 'CLAIMED', ordinal: 1 });

    const t = await store.take(other, 'acc_f', 0);
    expect(t).toMatchObject({ outcome: 'GRABBED' });
    const { envelopeId, amount } = t as { envelopeId: string; amount: number };
    // A retried take (the answer was lost) finds it instead of taking a second one.
    expect(await store.take(other, 'acc_f', 0)).toEqual({ outcome: 'EXISTING', envelopeId, amount });
    const credit = (await redis.command((c) => c.xrange(other.credits, '-', '+')))[0][1];
    expect(credit).toEqual(['envelopeId', envelopeId, 'account', 'acc_f', 'amount', String(amount), 'pool', '1', 'home', '0']);

    const entry = `${envelopeId}:${amount}:1:1`;
    await store.confirm(home, 'acc_f', entry);
    await store.confirm(home, 'acc_f', entry);
    expect(await store.grabsOf(home, 'acc_f')).toEqual([entry]);
    expect(await redis.command((c) => c.hexists(home.claims, 'acc_f'))).toBe(0);
    // The per-user limit counts it on the home sub-pool.
    expect(await store.grab(home, 'acc_f', true)).toEqual({ outcome: 'ALREADY_GRABBED', envelopeId, amount });
    // A fall-over that found nothing: the claim goes, nothing is recorded.
    expect(await store.grab(home, 'acc_n', true)).toEqual({ outcome: 'FALL_OVER', ordinal: 1 });
    await store.confirm(home, 'acc_n', '');
    expect(await redis.command((c) => c.hexists(home.claims, 'acc_n'))).toBe(0);
    expect(await store.grabsOf(home, 'acc_n')).toEqual([]);
    expect((await store.take(other, 'acc_y', 0)).outcome).toBe('GRABBED');
    expect(await store.take(other, 'acc_z', 0)).toEqual({ outcome: 'EMPTY' });
    expect(await expectBalanced(home)).toMatchObject({ grabbedCount: 1, leftCount: 0 });
    expect(await expectBalanced(other)).toMatchObject({ grabbedCount: 2, grabbedAmount: 50, leftCount: 0 });
  });

  it('settle: pending → credited once, pending → dead → pending, credited is final, unknown changes nothing', async () => {
    const k = await armed(rainId('set'), 0, [10, 20, 30]);
    const a = (await store.grab(k, 'acc_s1', false)) as { envelopeId: string; amount: number };
    const b = (await store.grab(k, 'acc_s2', false)) as { envelopeId: string; amount: number };
    expect(await store.settle(k, a.envelopeId, 'credited')).toEqual({ moved: true, previous: 'pending' });
    expect(await store.settle(k, a.envelopeId, 'credited')).toEqual({ moved: false, previous: 'credited' });
    expect(await store.settle(k, a.envelopeId, 'dead')).toEqual({ moved: false, previous: 'credited' });
    expect(await store.settle(k, a.envelopeId, 'pending')).toEqual({ moved: false, previous: 'credited' });
    expect(await store.envelopeState(k, a.envelopeId)).toBe('credited');
    expect(await expectBalanced(k)).toMatchObject({ creditedCount: 1, creditedAmount: a.amount, pendingCount: 1 });

    expect(await store.settle(k, b.envelopeId, 'dead')).toEqual({ moved: true, previous: 'pending' });
    expect(await store.settle(k, b.envelopeId, 'dead')).toEqual({ moved: false, previous: 'dead' });
    expect(await expectBalanced(k)).toMatchObject({ deadCount: 1, deadAmount: b.amount, pendingCount: 0 });
    expect(await store.settle(k, b.envelopeId, 'pending')).toEqual({ moved: true, previous: 'dead' });
    expect(await store.settle(k, b.envelopeId, 'credited')).toEqual({ moved: true, previous: 'pending' });
    expect(await store.settle(k, 'nope.1', 'credited')).toEqual({ moved: false, previous: '' });
    expect(await expectBalanced(k)).toMatchObject({ creditedCount: 2, creditedAmount: a.amount + b.amount, deadCount: 0, pendingCount: 0 });
  });

  it('settle many in one call: each envelope moves once (a repeat in the same call too), the counters by the sum', async () => {
    const k = await armed(rainId('setm'), 0, [10, 20, 30, 40]);
    const g = [];
    for (const acc of ['acc_m1', 'acc_m2', 'acc_m3']) g.push((await store.grab(k, acc, false)) as { envelopeId: string; amount: number });
    expect(await store.settle(k, g[2].envelopeId, 'dead')).toEqual({ moved: true, previous: 'pending' });
    const ids = [g[0].envelopeId, g[1].envelopeId, g[0].envelopeId, g[2].envelopeId, 'nope.9'];
    expect(await store.settleMany(k, ids, 'credited')).toEqual([
      { moved: true, previous: 'pending' },
      { moved: true, previous: 'pending' },
      { moved: false, previous: 'credited' },
      { moved: true, previous: 'dead' },
      { moved: false, previous: '' },
    ]);
    const total = g[0].amount + g[1].amount + g[2].amount;
    expect(await expectBalanced(k)).toMatchObject({ creditedCount: 3, creditedAmount: total, pendingCount: 0, pendingAmount: 0, deadCount: 0, deadAmount: 0 });
    expect(await store.settleMany(k, ids, 'credited')).toEqual(ids.map((id) => ({ moved: false, previous: id === 'nope.9' ? '' : 'credited' })));
    expect(await expectBalanced(k)).toMatchObject({ creditedCount: 3, creditedAmount: total });
  });

  it('drain: the left envelopes move to refunded once, grabs then answer ENDED', async () => {
    const k = await armed(rainId('dr'), 0, [10, 20, 30, 40]);
    const g = (await store.grab(k, 'acc_d1', false)) as { amount: number };
    const first = await store.drain(k);
    expect(first).toEqual({ count: 3, amount: 100 - g.amount });
    expect(await store.drain(k)).toEqual(first);
    expect(await redis.command((c) => c.exists(k.pool))).toBe(0);
    expect(await store.grab(k, 'acc_d2', true)).toEqual({ outcome: 'ENDED' });
    expect(await store.take(k, 'acc_d2', 0)).toEqual({ outcome: 'ENDED' });
    expect(await expectBalanced(k)).toMatchObject({ leftCount: 0, refundedCount: 3, refundedAmount: 100 - g.amount, grabbedCount: 1 });
  });

  it('redrive: a dead-lettered grab goes back on the credit stream with its own fields, and pending', async () => {
    const k = await armed(rainId('rd'), 0, [10, 20]);
    const g = (await store.grab(k, 'acc_r1', false)) as { envelopeId: string; amount: number };
    const [[entryId, fields]] = await redis.command((c) => c.xrange(k.credits, '-', '+'));
    // As lua/engines/streams/fail-2.lua records a given-up entry.
    await redis.command((c) =>
      c.xadd(k.dead, '*', 'group', 'red-envelope-credit', 'consumer', 'c1', 'eventId', entryId, 'deliveries', '3', 'error', 'boom', ...fields),
    );
    await store.settle(k, g.envelopeId, 'dead');
    expect(await expectBalanced(k)).toMatchObject({ deadCount: 1, pendingCount: 0 });

    expect(await store.redrive(k, 100)).toBe(1);
    expect(await redis.command((c) => c.xlen(k.dead))).toBe(0);
    const credits = await redis.command((c) => c.xrange(k.credits, '-', '+'));
    expect(credits).toHaveLength(2);
    expect(credits[1][1]).toEqual(fields);
    expect(await store.envelopeState(k, g.envelopeId)).toBe('pending');
    expect(await expectBalanced(k)).toMatchObject({ deadCount: 0, pendingCount: 1, pendingAmount: g.amount });
    // Nothing left to re-drive.
    expect(await store.redrive(k, 100)).toBe(0);
    expect(await redis.command((c) => c.xlen(k.credits))).toBe(2);
  });
});
