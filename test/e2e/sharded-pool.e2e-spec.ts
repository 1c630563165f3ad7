import { homeOf, othersOf } from '../../src/engines/sharded-pool/home';
import { activityBody, activityId, seckillKit, type SeckillKit } from '../support/seckill';
import { rainBody, rainId, rainKit } from '../support/red-envelopes';
import { CREDS, useAppOnOwnRedis } from '../support/test-app';

/**
 * The sharded-pool engine as both features use it, on a real Redis: a buyer whose home shard is empty is served from
 * wherever stock is left, at any shard count, and is told SOLD_OUT / NONE_LEFT only when every shard is empty.
 */
const ctx = useAppOnOwnRedis();
let seckill: SeckillKit;
let rain: ReturnType<typeof rainKit>;
beforeAll(() => {
  seckill = seckillKit(ctx.t);
  rain = rainKit(ctx.t);
});

/** `n` accounts (named after `tag`) whose home shard of `poolId` (over `shards`) is `shard`. */
function homedOn(tag: string, poolId: string, shards: number, shard: number, n: number): string[] {
  const out: string[] = [];
  for (let i = 0; out.length < n; i++) if (homeOf(`acc_${tag}_${i}`, poolId, shards) === shard) out.push(`acc_${tag}_${i}`);
  return out;
}

/** A funded rain of `count` envelopes of 100 over 16 sub-pools, loaded; its id. */
async function rainOf16(tag: string, count: number): Promise<string> {
  const id = rainId(tag);
  await rain.fund(CREDS.merchantId, count * 100);
  await rain.create(rainBody(id, { totalAmount: count * 100, count, subPools: 16 }));
  return id;
}

describe('the home hash', () => {
  it('keeps the numbers live data was placed by (md5 of account and pool, first 4 bytes big-endian, mod the shard count)', () => {
    expect([homeOf('acc_1', 'p1', 16), homeOf('acc_2', 'p1', 16), homeOf('acc_1', 'rain-x', 3), homeOf('acc_9', 'p1', 7), homeOf('acc_1', 'p1', 1)]).toEqual([
      7, 10, 1, 0, 0,
    ]);
    expect(othersOf(14, 16).slice(0, 3)).toEqual([15, 0, 1]);
  });
});

describe('red-envelope with 16 sub-pools', () => {
  it('a user whose home sub-pool is empty gets an envelope from the one far sub-pool still holding some; NONE_LEFT only after it is empty', async () => {
    const id = await rainOf16('far', 32);
    const user = 'acc_far_user';
    const home = homeOf(user, id, 16);
    const far = (home + 8) % 16;
    // Every sub-pool but the far one is emptied by users homed there (2 envelopes each).
    for (let k = 0; k < 16; k++) {
      if (k === far) continue;
      for (const u of homedOn(`d${k}`, id, 16, k, 2)) expect((await rain.grab(u, id)).body.status).toBe('GRABBED');
    }
    const rec = (await rain.store.activity(id))!;
    const left = await Promise.all(Array.from({ length: 16 }, async (_, k) => (await rain.store.stats(rain.store.pool(rec, k))).leftCount));
    expect(left.map((n, k) => (k === far ? n > 0 : n === 0))).toEqual(Array(16).fill(true));
    // The home sub-pool and the next several are empty; the envelope is eight sub-pools on.
    const got = await rain.grab(user, id);
    expect(got.body.status).toBe('GRABBED');
    expect((await rain.grab(user, id)).body).toMatchObject({ status: 'ALREADY_GRABBED', envelopeId: got.body.envelopeId });
    const [last] = homedOn('last', id, 16, home, 1);
    expect((await rain.grab(last, id)).body.status).toBe('GRABBED');
    const [none] = homedOn('none', id, 16, (home + 3) % 16, 1);
    expect((await rain.grab(none, id)).body).toEqual({ status: 'NONE_LEFT' });
    expect(await rain.credited(id)).toMatchObject({ grabbed: { count: 32 }, left: { count: 0 } });
  });
});

describe('red-envelope fall-over under concurrent taps', () => {
  it('users whose home sub-pool is empty tap four times at once while the other sub-pools run dry: one envelope each', async () => {
    // Four rains in a row: the copies' race is a matter of timing, each rain another chance for it.
    for (let round = 0; round < 4; round++) {
      const id = await rainOf16('conc', 24);
      const home = (5 + round) % 16;
      // The home sub-pool's envelopes go first; then 30 users homed there tap four times each, all at once, for 22 envelopes.
      for (const u of homedOn(`cdrain${round}`, id, 16, home, 2)) expect((await rain.grab(u, id)).body.status).toBe('GRABBED');
      const users = homedOn(`ctap${round}`, id, 16, home, 30);
      const tap = async (u: string) => {
        const res = await rain.grab(u, id);
        return { u, status: res.status, body: res.body as { status?: string; envelopeId?: string } };
      };
      const answers = await Promise.all(users.flatMap((u) => [0, 1, 2, 3].map(() => tap(u))));
      // A tap answered 503 (a command past its deadline on a loaded machine) is tapped again, as the app does, until
      // its user has an answer that says what they hold.
      for (let retry = 0; retry < 20; retry++) {
        const settled = new Set(answers.filter((a) => a.status === 200).map((a) => a.u));
        const unsettled = [...new Set(answers.filter((a) => a.status === 503 && !settled.has(a.u)).map((a) => a.u))];
        if (unsettled.length === 0) break;
        for (const u of unsettled) answers.push(await tap(u));
      }
      expect({ round, unexpected: answers.filter((a) => a.status !== 200 && a.status !== 503) }).toEqual({ round, unexpected: [] });
      const byUser = new Map<string, Set<string>>();
      for (const { u, body } of answers) if (body.envelopeId) byUser.set(u, (byUser.get(u) ?? new Set()).add(body.envelopeId));
      expect({ round, twice: [...byUser.entries()].filter(([, got]) => got.size > 1) }).toEqual({ round, twice: [] });
      expect(byUser.size).toBe(22);
      // Each envelope answered GRABBED once (a tap whose 503 came after its grab landed is answered ALREADY_GRABBED again).
      const grabbed = answers.filter((a) => a.body.status === 'GRABBED').length;
      expect(grabbed).toBeLessThanOrEqual(22);
      if (!answers.some((a) => a.status === 503)) expect(grabbed).toBe(22);
      expect(new Set(answers.map((a) => a.body.envelopeId).filter(Boolean)).size).toBe(22);
      expect(await rain.credited(id)).toMatchObject({ grabbed: { count: 24 }, left: { count: 0 }, balanced: true });
    }
  });
});

describe('red-envelope fall-over cut short (a process dies between its steps)', () => {
  it('after the claim, and after the far take: the next tap finishes it with one envelope, recorded on the home sub-pool', async () => {
    const id = await rainOf16('cut', 16);
    const claimOnly = 'acc_cut_claim';
    const home = homeOf(claimOnly, id, 16);
    // claimOnly and sameHome share a home sub-pool; its one envelope goes to a third user.
    const [other] = homedOn('cut', id, 16, home, 1);
    const [sameHome] = homedOn('cut2', id, 16, home, 1);
    expect((await rain.grab(other, id)).body.status).toBe('GRABBED');
    const rec = (await rain.store.activity(id))!;
    const homeKeys = rain.store.pool(rec, home);
    // claimOnly: the home script claimed, then the process died (no take, no confirm).
    expect(await rain.store.grab(homeKeys, claimOnly, true)).toEqual({ outcome: 'FALL_OVER', ordinal: 1 });
    // sameHome: claimed and took on a far sub-pool, then died before the confirm.
    expect(await rain.store.grab(homeKeys, sameHome, true)).toEqual({ outcome: 'FALL_OVER', ordinal: 1 });
    const far = (home + 9) % 16;
    const t = await rain.store.take(rain.store.pool(rec, far), sameHome, home, 1);
    expect(t.outcome).toBe('GRABBED');
    const again = await rain.grab(sameHome, id);
    expect(again.body).toMatchObject({ status: 'ALREADY_GRABBED', envelopeId: (t as { envelopeId: string }).envelopeId });
    expect((await rain.user(sameHome).get(`/red-envelopes/activities/${id}/mine`)).body.items).toHaveLength(1);
    expect((await rain.grab(claimOnly, id)).body.status).toBe('GRABBED');
    expect((await rain.grab(claimOnly, id)).body.status).toBe('ALREADY_GRABBED');
    expect(await rain.credited(id)).toMatchObject({ grabbed: { count: 3 }, left: { count: 13 } });
  });
});

describe('seckill with 16 shards', () => {
  it('a buyer whose home shard is empty reserves from the one far shard holding stock; SOLD_OUT only when every shard is empty', async () => {
    const id = activityId('far');
    await seckill.create(activityBody(id, [{ productId: 'p1', stock: 32, shards: 16 }], { perUserLimit: 4 }));
    const buyer = 'acc_far_buyer';
    const home = homeOf(buyer, 'p1', 16);
    const far = (home + 9) % 16;
    for (let k = 0; k < 16; k++) {
      if (k === far) continue;
      const [drainer] = homedOn(`s${k}`, 'p1', 16, k, 1);
      expect((await seckill.reserve(drainer, id, 'p1', 2)).status).toBe(201);
    }
    expect((await seckill.expectInvariant(id)).get('p1')).toMatchObject({ available: 2, reserved: 30 });
    const one = await seckill.reserve(buyer, id, 'p1', 1);
    expect([one.status, one.body.quantity]).toEqual([201, 1]);
    const [next] = homedOn('next', 'p1', 16, (home + 1) % 16, 1);
    // Two wanted, one left: SOLD_OUT naming what is left, and that unit still sells.
    expect((await seckill.reserve(next, id, 'p1', 2)).body).toMatchObject({ error: 'SOLD_OUT', details: { available: 1 } });
    expect((await seckill.reserve(next, id, 'p1', 1)).status).toBe(201);
    expect((await seckill.reserve('acc_after', id, 'p1', 1)).body).toMatchObject({ error: 'SOLD_OUT', details: { available: 0 } });
    expect((await seckill.expectInvariant(id)).get('p1')).toMatchObject({ available: 0, reserved: 32 });
  });

  it('a quantity above any one shard is taken over the shards that hold stock, wherever they are', async () => {
    const id = activityId('spread');
    await seckill.create(activityBody(id, [{ productId: 'p1', stock: 16, shards: 16 }], { perUserLimit: 4 }));
    const buyer = 'acc_spread_buyer';
    const home = homeOf(buyer, 'p1', 16);
    const keep = [(home + 5) % 16, (home + 11) % 16, (home + 15) % 16];
    for (let k = 0; k < 16; k++) {
      if (keep.includes(k)) continue;
      const [drainer] = homedOn(`t${k}`, 'p1', 16, k, 1);
      expect((await seckill.reserve(drainer, id, 'p1', 1)).status).toBe(201);
    }
    const three = await seckill.reserve(buyer, id, 'p1', 3, 'tap-3');
    expect([three.status, three.body.quantity]).toEqual([201, 3]);
    const again = await seckill.reserve(buyer, id, 'p1', 3, 'tap-3');
    expect([again.status, again.body.reservationId]).toEqual([200, three.body.reservationId]);
    expect((await seckill.expectInvariant(id)).get('p1')).toMatchObject({ available: 0, reserved: 16 });
  });
});
