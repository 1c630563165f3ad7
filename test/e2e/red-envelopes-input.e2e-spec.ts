import { KeyBuilder } from '../../src/platform/redis/key-builder';
import { activityKey } from '../../src/features/red-envelope/red-envelope.keys';
import { rainBody, rainId, rainKit, type RainKit } from '../support/red-envelopes';
import { CREDS, merchantHeaders, useAppOnOwnRedis, userToken } from '../support/test-app';
import request from 'supertest';

/**
 * Creating rains over HTTP: bad input (400 naming the field; nothing created, nothing debited), funding (refused
 * funds create nothing; one debit per activity however often it is sent), who may do what, and the distribution.
 * A low RED_ENVELOPE_MAX_COUNT and RED_ENVELOPE_MAX_SUBPOOLS, so the configured limits are reachable.
 */
const ctx = useAppOnOwnRedis({ RATE_LIMIT_ENABLED: 'false', RED_ENVELOPE_MAX_COUNT: '500', RED_ENVELOPE_MAX_SUBPOOLS: '4' });
let kit: RainKit;
beforeAll(async () => {
  kit = rainKit(ctx.t);
  await kit.fund(CREDS.merchantId, 1_000_000);
});
afterEach(async () => kit.expectConservation(ctx.raw));

const create = (body: unknown) => kit.admin().post('/admin/red-envelopes/activities', body);
const iso = (ms: number) => new Date(ms).toISOString();

describe('red-envelope rains: bad input', () => {
  const now = Date.now();
  const cases: Array<[string, Record<string, unknown>, string]> = [
    ['a count of 0', { count: 0 }, 'count'],
    ['a negative count', { count: -1 }, 'count'],
    ['a total below count × minimum', { totalAmount: 99, count: 100 }, 'totalAmount'],
    ['a total below count × an explicit minimum', { totalAmount: 499, count: 100, minAmount: 5 }, 'totalAmount'],
    ['a count above the configured maximum (500)', { totalAmount: 100_000, count: 501 }, 'count'],
    ['a count above the absolute maximum', { totalAmount: 100_000_000, count: 10_000_001 }, 'count'],
    ['a non-integer total', { totalAmount: 100.5 }, 'totalAmount'],
    ['a non-integer count', { count: 10.5 }, 'count'],
    ['a count as a string', { count: '10' }, 'count'],
    ['a non-integer minimum', { minAmount: 1.5 }, 'minAmount'],
    ['a non-integer perUserLimit', { perUserLimit: 1.5 }, 'perUserLimit'],
    ['endsAt before startsAt', { startsAt: iso(now + 60_000), endsAt: iso(now + 30_000) }, 'endsAt'],
    ['endsAt equal to startsAt', { startsAt: iso(now + 60_000), endsAt: iso(now + 60_000) }, 'endsAt'],
    ['endsAt in the past', { startsAt: iso(now - 60_000), endsAt: iso(now - 30_000) }, 'endsAt'],
    ['a start without a time zone', { startsAt: '2026-12-31T20:00:00' }, 'startsAt'],
    ['subPools above the count', { totalAmount: 100, count: 3, subPools: 4 }, 'subPools'],
    ['subPools above the configured maximum (4)', { subPools: 5 }, 'subPools'],
    ['subPools of 0', { subPools: 0 }, 'subPools'],
    ['a bad activity id (space)', { activityId: 'bad id' }, 'activityId'],
    ['a bad activity id (33 characters)', { activityId: 'a'.repeat(33) }, 'activityId'],
    ['a bad activity id (dot)', { activityId: 'a.b' }, 'activityId'],
    ['a bad sponsor id', { sponsorMerchantId: '..' }, 'sponsorMerchantId'],
    ['an unknown currency', { currency: 'XXX' }, 'currency'],
    ['a start more than 366 days ahead', { startsAt: iso(now + 367 * 86_400_000), endsAt: iso(now + 367 * 86_400_000 + 60_000) }, 'startsAt'],
    ['a week-date startsAt', { startsAt: '2026-W49-1T10:00:00Z' }, 'startsAt'],
    ['a blank title', { title: '  ' }, 'title'],
    ['a title with an unpaired surrogate', { title: 'Rain \ud83d' }, 'title'],
  ];

  it.each(cases)('%s: 400 naming the field, nothing created, nothing debited', async (_what, over, field) => {
    const id = rainId('bad');
    const body = rainBody(id, over);
    const before = await kit.merchantBalance(CREDS.merchantId);
    const res = await create(body);
    expect({ status: res.status, error: res.body.error }).toEqual({ status: 400, error: 'VALIDATION_FAILED' });
    expect(res.body.details.map((d: { field: string }) => d.field)).toContain(field);
    // Nothing created under the body's id (or the valid one it would have had), nothing debited.
    const probe = typeof body.activityId === 'string' && /^[A-Za-z0-9_-]{1,32}$/.test(body.activityId) ? body.activityId : id;
    expect((await kit.admin().get(`/admin/red-envelopes/activities/${probe}`)).status).toBe(404);
    expect(await kit.merchantBalance(CREDS.merchantId)).toBe(before);
    expect((await kit.entries(`merchant:${CREDS.merchantId}`)).filter((e) => e.kind !== 'top-up')).toEqual([]);
  });

  it('a bad id in the path is a 400 naming activityId, on every route', async () => {
    for (const path of [
      '/admin/red-envelopes/activities/bad.id',
      '/admin/red-envelopes/activities/bad.id/reconciliation',
      '/admin/red-envelopes/activities/bad.id/distribution',
    ]) {
      const res = await kit.admin().get(path);
      expect([path, res.status, res.body.details?.map((d: { field: string }) => d.field)]).toEqual([path, 400, ['activityId']]);
    }
    const grab = await kit.grab('acc_bad', 'bad.id');
    expect([grab.status, grab.body.details?.map((d: { field: string }) => d.field)]).toEqual([400, ['activityId']]);
    expect((await kit.user('acc_bad').get(`/red-envelopes/activities/${'x'.repeat(33)}`)).status).toBe(400);
  });
});

describe('red-envelope rains: funding', () => {
  it('20 identical creates at once by a sponsor without enough money: every one 409 INSUFFICIENT_FUNDS (none 200 for a rain never made)', async () => {
    const poor = `m_poor20_${process.pid}`;
    await kit.fund(poor, 999);
    const id = rainId('poor20');
    const body = rainBody(id, { sponsorMerchantId: poor, totalAmount: 1000, count: 10 });
    const all = await Promise.all(Array.from({ length: 20 }, () => create(body)));
    expect(all.map((r) => `${r.status} ${r.body.error}`)).toEqual(Array.from({ length: 20 }, () => '409 INSUFFICIENT_FUNDS'));
    expect((await kit.admin().get(`/admin/red-envelopes/activities/${id}`)).status).toBe(404);
    expect(await kit.merchantBalance(poor)).toBe(999);
  });

  it('a sponsor without enough money: 409 INSUFFICIENT_FUNDS, no activity, the wallet unchanged', async () => {
    const poor = `m_poor_${process.pid}`;
    await kit.fund(poor, 999);
    const id = rainId('poor');
    const res = await create(rainBody(id, { sponsorMerchantId: poor, totalAmount: 1000, count: 10 }));
    expect({ status: res.status, error: res.body.error }).toEqual({ status: 409, error: 'INSUFFICIENT_FUNDS' });
    expect((await kit.admin().get(`/admin/red-envelopes/activities/${id}`)).status).toBe(404);
    expect((await kit.user('acc_poor').get(`/red-envelopes/activities/${id}`)).status).toBe(404);
    expect(await kit.merchantBalance(poor)).toBe(999);
    expect((await kit.entries(`merchant:${poor}`)).map((e) => e.kind)).toEqual(['top-up']);
    // The id is free: once funded, the same body creates it.
    await kit.fund(poor, 1);
    await kit.create(rainBody(id, { sponsorMerchantId: poor, totalAmount: 1000, count: 10 }));
    expect(await kit.merchantBalance(poor)).toBe(0);
  });

  it('the same create twice, and 20 at once, debit once; another payload under the same id is 409 ACTIVITY_EXISTS', async () => {
    const sponsor = `m_twice_${process.pid}`;
    await kit.fund(sponsor, 50_000);
    const id = rainId('twice');
    const body = rainBody(id, { sponsorMerchantId: sponsor, totalAmount: 5000, count: 50 });
    const first = await create(body);
    expect(first.status).toBe(202);
    kit.rains.add(id);
    const again = await create(body);
    expect([again.status, again.body.activityId]).toEqual([200, id]);
    expect(await kit.merchantBalance(sponsor)).toBe(45_000);

    const id2 = rainId('twenty');
    const body2 = rainBody(id2, { sponsorMerchantId: sponsor, totalAmount: 7000, count: 70 });
    const all = await Promise.all(Array.from({ length: 20 }, () => create(body2)));
    kit.rains.add(id2);
    expect(all.map((r) => (r.status === 200 || r.status === 202 ? 'ok' : `${r.status} ${JSON.stringify(r.body)}`))).toEqual(all.map(() => 'ok'));
    expect(all.filter((r) => r.status === 202)).toHaveLength(1);
    expect(await kit.merchantBalance(sponsor)).toBe(38_000);
    const fundings = (await kit.entries(`merchant:${sponsor}`)).filter((e) => e.kind === 'funding');
    // Newest first; a debit's amount is negative.
    expect(fundings.map((e) => [e.reference, e.amount])).toEqual([
      [`red-envelope:${id2}`, -7000],
      [`red-envelope:${id}`, -5000],
    ]);

    const other = await create({ ...body, totalAmount: 6000 });
    expect({ status: other.status, error: other.body.error }).toEqual({ status: 409, error: 'ACTIVITY_EXISTS' });
    expect(await kit.merchantBalance(sponsor)).toBe(38_000);
    // Both load (the same bodies again answer 200).
    await kit.create(body);
    await kit.create(body2);
  });

  it('an activity id is never used twice, even after its record expired: the same body is 409 and nothing is debited', async () => {
    const sponsor = `m_reuse_${process.pid}`;
    await kit.fund(sponsor, 10_000);
    const id = rainId('reuse');
    const body = rainBody(id, { sponsorMerchantId: sponsor, totalAmount: 3000, count: 30 });
    await kit.create(body);
    kit.rains.add(id);
    // The record's expiry, as after the rain's retention (its envelope ids and references stay in the wallets).
    const key = activityKey(ctx.t.app.get(KeyBuilder), id);
    const record = (await ctx.raw.get(key))!;
    await ctx.raw.del(key);
    const again = await create(body);
    expect({ status: again.status, error: again.body.error }).toEqual({ status: 409, error: 'ACTIVITY_EXISTS' });
    expect(await kit.merchantBalance(sponsor)).toBe(7000);
    // Back, so that the money check after the test finds the rain's 3,000 where they are.
    await ctx.raw.set(key, record);
  });
});

describe('red-envelope rains: identities', () => {
  it('only admins manage rains: a user, a merchant, a service get 401/403 and nothing is created', async () => {
    const id = rainId('who');
    const body = rainBody(id, { totalAmount: 100, count: 10 });
    const path = '/admin/red-envelopes/activities';
    const text = JSON.stringify(body);
    const before = await kit.merchantBalance(CREDS.merchantId);
    const tries = [
      request(ctx.t.server).post(path).send(body),
      request(ctx.t.server)
        .post(path)
        .set({ authorization: `Bearer ${userToken('acc_who')}` })
        .send(body),
      request(ctx.t.server)
        .post(path)
        .set(merchantHeaders('POST', path, text))
        .send(text),
      request(ctx.t.server)
        .post(path)
        .set({ authorization: `Bearer ${CREDS.serviceToken}` })
        .send(body),
      request(ctx.t.server).post(path).set({ 'x-admin-key': 'not-the-admin-key-0123456789' }).send(body),
    ];
    for (const res of await Promise.all(tries)) expect([401, 403]).toContain(res.status);
    expect((await kit.admin().get(`${path}/${id}`)).status).toBe(404);
    expect(await kit.merchantBalance(CREDS.merchantId)).toBe(before);
    // Nor may they read ops' views.
    for (const sub of ['', '/reconciliation', '/distribution']) {
      expect([401, 403]).toContain((await kit.user('acc_who').get(`${path}/${id}${sub}`)).status);
    }
    expect([401, 403]).toContain(
      (
        await request(ctx.t.server)
          .post(`${path}/${id}/dead-letters/redrive`)
          .set({ authorization: `Bearer ${userToken('acc_who')}` })
      ).status,
    );
    // And an admin key is not an app user: grabbing needs a user token.
    expect([401, 403]).toContain((await kit.admin().post(`/red-envelopes/activities/${id}/grab`)).status);
  });

  it("a user's /mine shows only their own envelope; the rain screen shows no amounts", async () => {
    const id = rainId('mine');
    await kit.create(rainBody(id, { totalAmount: 1000, count: 10 }));
    const a = await kit.grab('acc_mine_a', id);
    const b = await kit.grab('acc_mine_b', id);
    expect([a.body.status, b.body.status]).toEqual(['GRABBED', 'GRABBED']);
    await kit.credited(id);
    const mineA = await kit.user('acc_mine_a').get(`/red-envelopes/activities/${id}/mine`);
    const mineB = await kit.user('acc_mine_b').get(`/red-envelopes/activities/${id}/mine`);
    expect(mineA.body).toEqual({ items: [{ envelopeId: a.body.envelopeId, amount: a.body.amount, crediting: 'CREDITED' }] });
    expect(mineB.body).toEqual({ items: [{ envelopeId: b.body.envelopeId, amount: b.body.amount, crediting: 'CREDITED' }] });
    const none = await kit.user('acc_mine_c').get(`/red-envelopes/activities/${id}/mine`);
    expect({ status: none.status, error: none.body.error }).toEqual({ status: 404, error: 'NOT_FOUND' });
    expect((await kit.user('acc_mine_a').get(`/red-envelopes/activities/${rainId('nope')}/mine`)).status).toBe(404);

    const screen = await kit.user('acc_mine_c').get(`/red-envelopes/activities/${id}`);
    expect(screen.status).toBe(200);
    expect(screen.body).toEqual({
      activityId: id,
      title: 'Quiz rain',
      state: 'OPEN',
      startsAt: expect.any(String),
      endsAt: expect.any(String),
      count: 10,
      left: 8,
    });
    expect(JSON.stringify(screen.body)).not.toMatch(/amount|seed|sponsor/i);
    await kit.expectBalanced(id);
  });
});

describe('red-envelope rains: the distribution', () => {
  it('count, minimum, sum and histogram agree with the rain, and the same activity always answers the same', async () => {
    const id = rainId('dist');
    await kit.create(rainBody(id, { totalAmount: 100_000, count: 500, minAmount: 10, subPools: 3 }));
    const res = await kit.admin().get(`/admin/red-envelopes/activities/${id}/distribution`);
    expect(res.status).toBe(200);
    const d = res.body as {
      count: number;
      min: number;
      max: number;
      mean: number;
      p50: number;
      p90: number;
      p99: number;
      histogram: { from: number; to: number; count: number }[];
    };
    expect(d.count).toBe(500);
    expect(d.min).toBeGreaterThanOrEqual(10);
    expect(d.max).toBeGreaterThanOrEqual(d.p99);
    expect(d.p99).toBeGreaterThanOrEqual(d.p90);
    expect(d.p90).toBeGreaterThanOrEqual(d.p50);
    expect(d.p50).toBeGreaterThanOrEqual(d.min);
    expect(Math.abs(d.mean * d.count - 100_000)).toBeLessThanOrEqual(d.count);
    expect(d.histogram.reduce((s, b) => s + b.count, 0)).toBe(500);
    expect(d.histogram.every((b) => b.from <= b.to && b.count >= 0)).toBe(true);
    // Seeded: asked again, the same answer; the seed is shown.
    const again = await kit.admin().get(`/admin/red-envelopes/activities/${id}/distribution`);
    expect(again.body).toEqual(d);
    expect((await kit.admin().get(`/admin/red-envelopes/activities/${id}`)).body.seed).toMatch(/^[0-9a-f]{32}$/);
    // The loaded pools hold exactly the split: the reconciliation balances with nothing grabbed.
    expect(await kit.expectBalanced(id)).toMatchObject({ total: 100_000, count: 500, left: { count: 500, amount: 100_000 } });
    expect((await kit.admin().get(`/admin/red-envelopes/activities/${rainId('nope')}/distribution`)).status).toBe(404);
  });
});
