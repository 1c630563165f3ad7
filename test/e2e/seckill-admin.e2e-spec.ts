import request from 'supertest';
import { KeyBuilder } from '../../src/platform/redis/key-builder';
import { SPREAD_TAGS } from '../../src/platform/redis/slot-tags';
import { shardKeys } from '../../src/features/seckill/seckill.keys';
import { MAX_SHARDS, seckillConfig } from '../../src/features/seckill/seckill.config';
import { waitUntil } from '../harness/redis-process';
import { activityBody, activityId, seckillKit, type SeckillKit } from '../support/seckill';
import { CREDS, merchantHeaders, useAppOnOwnRedis, userToken } from '../support/test-app';

// Low limits, so that "too many products / shards" can be sent in a small body.
const ctx = useAppOnOwnRedis({ SECKILL_MAX_PRODUCTS: '3', SECKILL_MAX_SHARDS: '4', RATE_LIMIT_ENABLED: 'false' });
let kit: SeckillKit;
beforeAll(() => (kit = seckillKit(ctx.t)));

const iso = (msFromNow: number) => new Date(Date.now() + msFromNow).toISOString();
const fieldsOf = (body: { details?: { field: string }[] }) => (body.details ?? []).map((d) => d.field);
const exists = async (id: string) => (await kit.admin().get(`/admin/seckill/activities/${id}`)).status;

describe('seckill admin: identities', () => {
  const path = '/admin/seckill/activities';

  it.each([
    ['an app user', () => ({ authorization: `Bearer ${userToken('acc_admin_wannabe')}` })],
    ['a service', () => ({ 'x-service-token': CREDS.serviceToken })],
    ['a wrong admin key', () => ({ 'x-admin-key': 'not-the-admin-key-0123456789' })],
    ['nobody', () => ({})],
  ])('refuses %s on every admin endpoint and stores nothing', async (_who, headers) => {
    const id = activityId('idn');
    const body = activityBody(id, [{ productId: 'p1', stock: 5 }]);
    const create = await request(ctx.t.server).post(path).set(headers()).send(body);
    expect([401, 403]).toContain(create.status);
    expect(await exists(id)).toBe(404);

    // An existing activity stays as it is.
    const other = activityId('idn');
    await kit.create(activityBody(other, [{ productId: 'p1', stock: 5 }], { startsAt: iso(60_000) }));
    const attempts = [
      request(ctx.t.server)
        .put(`${path}/${other}`)
        .set(headers())
        .send(activityBody(other, [{ productId: 'p1', stock: 9 }], { startsAt: iso(60_000) })),
      request(ctx.t.server).post(`${path}/${other}/end`).set(headers()),
      request(ctx.t.server).get(`${path}/${other}`).set(headers()),
      request(ctx.t.server).get(`${path}/${other}/check`).set(headers()),
      request(ctx.t.server).get(`${path}/${other}/results`).set(headers()),
    ];
    for (const res of await Promise.all(attempts)) expect([401, 403]).toContain(res.status);
    const read = await kit.admin().get(`${path}/${other}`);
    expect(read.body).toMatchObject({ state: 'UPCOMING', products: [{ productId: 'p1', stock: 5, available: 5 }] });
    expect(read.body.endedAt).toBeUndefined();
  });

  it('refuses a signed merchant request and stores nothing', async () => {
    const id = activityId('idm');
    const body = JSON.stringify(activityBody(id, [{ productId: 'p1', stock: 5 }]));
    const res = await request(ctx.t.server)
      .post(path)
      .set(merchantHeaders('POST', path, body))
      .send(body);
    expect([401, 403]).toContain(res.status);
    expect(await exists(id)).toBe(404);
  });
});

describe('seckill admin: the documented maximum of shards is the enforced one', () => {
  it('ProductDto.shards documents 16, SECKILL_MAX_SHARDS cannot raise it, and 17 is refused', async () => {
    const doc = (await request(ctx.t.server).get('/docs-json')).body;
    expect(doc.components.schemas.ProductDto.properties.shards).toMatchObject({ minimum: 1, maximum: MAX_SHARDS });
    expect(MAX_SHARDS).toBe(16);
    expect(() => seckillConfig.load({ SECKILL_MAX_SHARDS: '17' })).toThrow(/SECKILL_MAX_SHARDS/);
    expect(seckillConfig.load({ SECKILL_MAX_SHARDS: '16' }).maxShards).toBe(16);
  });
});

describe('seckill admin: bad input (400 naming the field, nothing stored)', () => {
  type Body = ReturnType<typeof activityBody>;
  const cases: [string, (id: string) => Body, string][] = [
    ['endsAt before startsAt', (id) => activityBody(id, [{ productId: 'p1', stock: 5 }], { startsAt: iso(60_000), endsAt: iso(30_000) }), 'endsAt'],
    ['endsAt equal to startsAt', (id) => ((s) => activityBody(id, [{ productId: 'p1', stock: 5 }], { startsAt: s, endsAt: s }))(iso(60_000)), 'endsAt'],
    ['endsAt in the past', (id) => activityBody(id, [{ productId: 'p1', stock: 5 }], { startsAt: iso(-120_000), endsAt: iso(-60_000) }), 'endsAt'],
    [
      'a duplicate productId',
      (id) =>
        activityBody(id, [
          { productId: 'p1', stock: 5 },
          { productId: 'p1', stock: 6 },
        ]),
      'products[1].productId',
    ],
    ['shards above the stock', (id) => activityBody(id, [{ productId: 'p1', stock: 2, shards: 3 }]), 'products[0].shards'],
    ['shards above SECKILL_MAX_SHARDS (4)', (id) => activityBody(id, [{ productId: 'p1', stock: 100, shards: 5 }]), 'products[0].shards'],
    ['shards above the documented maximum (16)', (id) => activityBody(id, [{ productId: 'p1', stock: 100, shards: 17 }]), 'products[0].shards'],
    [
      'price × limit above the order maximum',
      (id) => activityBody(id, [{ productId: 'p1', stock: 5, price: 5_000_000_000 }], { perUserLimit: 3 }),
      'products[0].price',
    ],
    [
      'price × the product’s own limit above the order maximum',
      (id) => activityBody(id, [{ productId: 'p1', stock: 5, price: 5_000_000_000, perUserLimit: 3 }]),
      'products[0].price',
    ],
    [
      'a start more than 366 days ahead',
      (id) => activityBody(id, [{ productId: 'p1', stock: 5 }], { startsAt: iso(367 * 86_400_000), endsAt: iso(368 * 86_400_000) }),
      'startsAt',
    ],
    // ISO 8601 week dates pass the format check but do not parse: the 400 names startsAt (it named endsAt).
    ['a week-date startsAt', (id) => activityBody(id, [{ productId: 'p1', stock: 5 }], { startsAt: '2026-W49-1T10:00:00Z' }), 'startsAt'],
    ['a blank title', (id) => activityBody(id, [{ productId: 'p1', stock: 5 }], { title: ' \t ' }), 'title'],
    ['an empty eligibility list (nobody could buy)', (id) => activityBody(id, [{ productId: 'p1', stock: 5 }], { eligibleAccounts: [] }), 'eligibleAccounts'],
    ['a blank product title', (id) => activityBody(id, [{ productId: 'p1', stock: 5, title: '   ' }]), 'products[0].title'],
    // Half of a surrogate pair (valid JSON, not valid text): stored, it made every reservation's order script fail (500).
    ['a title with an unpaired surrogate', (id) => activityBody(id, [{ productId: 'p1', stock: 5 }], { title: 'Sale \ud83d' }), 'title'],
    ['a product title with an unpaired surrogate', (id) => activityBody(id, [{ productId: 'p1', stock: 5, title: '\udc00 pack' }]), 'products[0].title'],
    // An array where a product goes: ValidateNested looked inside it and found nothing wrong, and the activity was
    // created with a product that had no id, price or stock.
    ['an empty array as the only product', (id) => ({ ...activityBody(id, [{ productId: 'p1', stock: 5 }]), products: [[]] as never }), 'products[0]'],
    [
      'an empty array after a good product',
      (id) => ((b) => ({ ...b, products: [...b.products, []] as never }))(activityBody(id, [{ productId: 'p1', stock: 5 }])),
      'products[1]',
    ],
    [
      'more products than SECKILL_MAX_PRODUCTS (3)',
      (id) =>
        activityBody(
          id,
          ['a', 'b', 'c', 'd'].map((p) => ({ productId: p, stock: 1 })),
        ),
      'products',
    ],
  ];

  it.each(cases)('POST with %s', async (_what, make, field) => {
    const id = activityId('bad');
    const res = await kit.admin().post('/admin/seckill/activities', make(id));
    expect(res.status).toBe(400);
    expect(fieldsOf(res.body)).toContain(field);
    expect(await exists(id)).toBe(404);
    const listed = await kit.user('acc_look').get('/seckill/activities');
    expect(listed.body.items.map((a: { activityId: string }) => a.activityId)).not.toContain(id);
  });

  it.each(cases)('PUT with %s leaves the activity as it was', async (_what, make, field) => {
    const id = activityId('badput');
    const original = activityBody(id, [{ productId: 'p1', stock: 5 }], { startsAt: iso(60_000) });
    await kit.create(original);
    const before = (await kit.admin().get(`/admin/seckill/activities/${id}`)).body;
    const res = await kit.admin().put(`/admin/seckill/activities/${id}`, make(id));
    expect(res.status).toBe(400);
    expect(fieldsOf(res.body)).toContain(field);
    const after = (await kit.admin().get(`/admin/seckill/activities/${id}`)).body;
    expect(after).toEqual(before);
    expect((await kit.admin().get(`/admin/seckill/activities/${id}/check`)).body).toMatchObject({ ok: true, problems: [] });
  });

  it('PUT with a body activityId other than the path’s: 400 on activityId, neither activity touched', async () => {
    const id = activityId('pth');
    const other = activityId('pth');
    await kit.create(activityBody(id, [{ productId: 'p1', stock: 5 }], { startsAt: iso(60_000) }));
    const res = await kit.admin().put(`/admin/seckill/activities/${id}`, activityBody(other, [{ productId: 'p1', stock: 9 }], { startsAt: iso(60_000) }));
    expect(res.status).toBe(400);
    expect(fieldsOf(res.body)).toContain('activityId');
    expect(await exists(other)).toBe(404);
    expect((await kit.stock(id)).get('p1')).toMatchObject({ stock: 5, available: 5 });
  });

  it('PUT or end of an activity that does not exist: 404, nothing stored (not even lock state)', async () => {
    const id = activityId('nope');
    const res = await kit.admin().put(`/admin/seckill/activities/${id}`, activityBody(id, [{ productId: 'p1', stock: 5 }], { startsAt: iso(60_000) }));
    expect(res.status).toBe(404);
    expect((await kit.admin().post(`/admin/seckill/activities/${id}/end`)).status).toBe(404);
    expect(await exists(id)).toBe(404);
    expect(await ctx.raw.keys(`*${id}*`)).toEqual([]);
  });
});

describe('seckill admin: path ids and repeated creates', () => {
  it.each([
    ['GET', (id: string) => kit.admin().get(`/admin/seckill/activities/${id}`)],
    ['check', (id: string) => kit.admin().get(`/admin/seckill/activities/${id}/check`)],
    ['end', (id: string) => kit.admin().post(`/admin/seckill/activities/${id}/end`)],
    ['results', (id: string) => kit.admin().get(`/admin/seckill/activities/${id}/results`)],
    ['PUT', (id: string) => kit.admin().put(`/admin/seckill/activities/${id}`, activityBody(id, [{ productId: 'p1', stock: 1 }]))],
  ])('%s: a malformed activity id is a 400 naming activityId, an unknown one a 404', async (_what, call) => {
    for (const bad of ['x'.repeat(33), 'a.b', 'a%20b']) {
      const res = await call(bad);
      expect(res.status).toBe(400);
      expect(fieldsOf(res.body)).toContain('activityId');
    }
    const unknown = activityId('unk');
    expect((await call(unknown)).status).toBe(404);
    expect(await exists(unknown)).toBe(404);
  });

  it('the same body again: 200 and the same activity; 10 at once: one 201, the others wait for it and answer 200, loaded once', async () => {
    const id = activityId('dup');
    const body = activityBody(id, [{ productId: 'p1', stock: 7, shards: 2 }], { startsAt: iso(60_000) });
    const all = await Promise.all(Array.from({ length: 10 }, () => kit.admin().post('/admin/seckill/activities', body)));
    expect(all.map((r) => r.status).sort()).toEqual([200, 200, 200, 200, 200, 200, 200, 200, 200, 201]);
    const again = await kit.admin().post('/admin/seckill/activities', body);
    expect(again.status).toBe(200);
    expect(again.body.updatedAt).toBe(all.find((r) => r.status === 201)!.body.updatedAt);
    expect((await kit.admin().get(`/admin/seckill/activities/${id}/check`)).body).toMatchObject({ ok: true, problems: [] });
    expect((await kit.stock(id)).get('p1')).toMatchObject({ stock: 7, available: 7 });
  });
});

describe('seckill admin: the window on the Redis clock', () => {
  it('5 ends at once: every one answers 200 ENDED with the same endedAt (they wait for the first)', async () => {
    const id = activityId('end5');
    await kit.create(activityBody(id, [{ productId: 'p1', stock: 4, shards: 2 }]));
    const all = await Promise.all(Array.from({ length: 5 }, () => kit.admin().post(`/admin/seckill/activities/${id}/end`)));
    expect(all.map((r) => [r.status, r.body.state])).toEqual(Array.from({ length: 5 }, () => [200, 'ENDED']));
    expect(new Set(all.map((r) => r.body.endedAt)).size).toBe(1);
  });

  it('NOT_STARTED before startsAt, 201 after it', async () => {
    const id = activityId('win');
    const startsAt = Date.now() + 1500;
    await kit.create(activityBody(id, [{ productId: 'p1', stock: 5 }], { startsAt: new Date(startsAt).toISOString() }));
    const early = await kit.reserve('acc_w1', id, 'p1');
    expect(early.status).toBe(409);
    expect(early.body.error).toBe('NOT_STARTED');
    expect((await kit.stock(id)).get('p1')).toMatchObject({ available: 5, reserved: 0 });
    await new Promise((r) => setTimeout(r, Math.max(0, startsAt - Date.now()) + 150));
    const late = await kit.reserve('acc_w1', id, 'p1');
    expect(late.status).toBe(201);
    expect((await kit.expectInvariant(id)).get('p1')).toMatchObject({ available: 4, reserved: 1 });
  });

  it('ENDED after endsAt', async () => {
    const id = activityId('win');
    const endsAt = Date.now() + 1500;
    await kit.create(activityBody(id, [{ productId: 'p1', stock: 5 }], { endsAt: new Date(endsAt).toISOString() }));
    expect((await kit.reserve('acc_w2', id, 'p1')).status).toBe(201);
    await kit.expectInvariant(id);
    await new Promise((r) => setTimeout(r, Math.max(0, endsAt - Date.now()) + 150));
    const late = await kit.reserve('acc_w3', id, 'p1');
    expect(late.status).toBe(409);
    expect(late.body.error).toBe('ENDED');
    expect((await kit.expectInvariant(id)).get('p1')).toMatchObject({ available: 4, reserved: 1 });
  });

  it('POST …/end ends the sale at once; GET shows endedAt', async () => {
    const id = activityId('end');
    await kit.create(activityBody(id, [{ productId: 'p1', stock: 5, shards: 2 }]));
    expect((await kit.reserve('acc_e1', id, 'p1')).status).toBe(201);
    const end = await kit.admin().post(`/admin/seckill/activities/${id}/end`);
    expect(end.status).toBe(200);
    expect(end.body.state).toBe('ENDED');
    const read = await kit.admin().get(`/admin/seckill/activities/${id}`);
    expect(read.body.state).toBe('ENDED');
    expect(Math.abs(Date.parse(read.body.endedAt) - Date.now())).toBeLessThan(5000);
    for (const acc of ['acc_e2', 'acc_e3', 'acc_e4']) {
      const r = await kit.reserve(acc, id, 'p1');
      expect(r.status).toBe(409);
      expect(r.body.error).toBe('ENDED');
    }
    expect((await kit.expectInvariant(id)).get('p1')).toMatchObject({ available: 4, reserved: 1 });
    // Ending again changes nothing.
    const again = await kit.admin().post(`/admin/seckill/activities/${id}/end`);
    expect(again.body.endedAt).toBe(read.body.endedAt);
  });

  it('PUT after the start: 409 ACTIVITY_STARTED, the stock unchanged', async () => {
    const id = activityId('put');
    const body = activityBody(id, [{ productId: 'p1', stock: 5 }]);
    await kit.create(body);
    expect((await kit.reserve('acc_p1', id, 'p1')).status).toBe(201);
    const res = await kit.admin().put(`/admin/seckill/activities/${id}`, { ...body, products: [{ ...body.products[0], stock: 50 }] });
    expect(res.status).toBe(409);
    expect(res.body.error).toBe('ACTIVITY_STARTED');
    expect((await kit.expectInvariant(id)).get('p1')).toMatchObject({ stock: 5, available: 4, reserved: 1 });
  });

  it('PUT before the start replaces the stock; the check is ok with the new stock', async () => {
    const id = activityId('put');
    const startsAt = iso(60_000);
    await kit.create(
      activityBody(
        id,
        [
          { productId: 'p1', stock: 5 },
          { productId: 'p2', stock: 8, shards: 4 },
        ],
        { startsAt },
      ),
    );
    const res = await kit.admin().put(
      `/admin/seckill/activities/${id}`,
      activityBody(
        id,
        [
          { productId: 'p1', stock: 12, shards: 3 },
          { productId: 'p3', stock: 7 },
        ],
        { startsAt },
      ),
    );
    expect(res.status).toBe(200);
    expect(res.body.products.map((p: { productId: string; available: number }) => [p.productId, p.available])).toEqual([
      ['p1', 12],
      ['p3', 7],
    ]);
    expect((await kit.admin().get(`/admin/seckill/activities/${id}/check`)).body).toMatchObject({ ok: true, problems: [] });
    const stock = await kit.expectInvariant(id);
    expect([...stock.keys()]).toEqual(['p1', 'p3']);
    expect(stock.get('p1')).toMatchObject({ stock: 12, available: 12 });
    // The removed product's shards are gone, and so is p1's single shard (3 shards spread their tags over 3 ranges).
    const keys = new KeyBuilder(ctx.t.config);
    for (let k = 0; k < 4; k++) expect(await ctx.raw.exists(shardKeys(keys, id, 'p2', k, { shards: 4, tags: SPREAD_TAGS }).stock)).toBe(0);
    expect(await ctx.raw.exists(shardKeys(keys, id, 'p1', 0, { shards: 1, tags: SPREAD_TAGS }).stock)).toBe(0);
    for (let k = 0; k < 3; k++) expect(await ctx.raw.exists(shardKeys(keys, id, 'p1', k, { shards: 3, tags: SPREAD_TAGS }).stock)).toBe(1);
  });
});

describe('seckill admin: edits and the end seen by buyers', () => {
  it('a PUT before the start replaces the eligibility list and the limit; after the start the new rules apply', async () => {
    const id = activityId('rules');
    const startsAt = Date.now() + 1500;
    const body = activityBody(id, [{ productId: 'p1', stock: 10, shards: 2 }], { startsAt: new Date(startsAt).toISOString(), eligibleAccounts: ['acc_old'] });
    await kit.create(body);
    expect((await kit.reserve('acc_new', id, 'p1')).body.error).toBe('NOT_STARTED');
    const put = await kit.admin().put(`/admin/seckill/activities/${id}`, { ...body, perUserLimit: 3, eligibleAccounts: ['acc_new'] });
    expect(put.status).toBe(200);
    expect(put.body).toMatchObject({ perUserLimit: 3, restricted: true, eligibleCount: 1 });
    await new Promise((r) => setTimeout(r, Math.max(0, startsAt - Date.now()) + 150));
    expect((await kit.reserve('acc_old', id, 'p1')).body.error).toBe('NOT_ELIGIBLE');
    expect((await kit.reserve('acc_new', id, 'p1', 3)).status).toBe(201);
    expect((await kit.reserve('acc_new', id, 'p1', 1)).body.error).toBe('LIMIT_EXCEEDED');
    expect((await kit.expectInvariant(id)).get('p1')).toMatchObject({ available: 7, reserved: 3 });
  });

  it('a PUT before the start that lifts the eligibility list lets any account buy', async () => {
    const id = activityId('open');
    const startsAt = Date.now() + 1500;
    const body = activityBody(id, [{ productId: 'p1', stock: 3 }], { startsAt: new Date(startsAt).toISOString(), eligibleAccounts: ['acc_only'] });
    await kit.create(body);
    const { eligibleAccounts: _dropped, ...open } = body;
    expect((await kit.admin().put(`/admin/seckill/activities/${id}`, open)).body).toMatchObject({ restricted: false, eligibleCount: 0 });
    await new Promise((r) => setTimeout(r, Math.max(0, startsAt - Date.now()) + 150));
    expect((await kit.reserve('acc_anyone', id, 'p1')).status).toBe(201);
    await kit.expectInvariant(id);
  });

  it('an ended activity leaves the app’s list, and its listing says ENDED', async () => {
    const id = activityId('gone');
    await kit.create(activityBody(id, [{ productId: 'p1', stock: 3 }]));
    const listed = async () =>
      ((await kit.user('acc_l').get('/seckill/activities')).body.items as { activityId: string; state: string }[]).find((a) => a.activityId === id);
    expect(await listed()).toMatchObject({ state: 'OPEN' });
    expect((await kit.admin().post(`/admin/seckill/activities/${id}/end`)).status).toBe(200);
    expect(await listed()).toBeUndefined();
    expect((await kit.user('acc_l').get(`/seckill/activities/${id}/products`)).body.state).toBe('ENDED');
  });
});

describe('seckill admin: check and results', () => {
  it('check is ok for a fresh activity', async () => {
    const id = activityId('chk');
    await kit.create(
      activityBody(
        id,
        [
          { productId: 'p1', stock: 5 },
          { productId: 'p2', stock: 9, shards: 4 },
        ],
        { startsAt: iso(60_000) },
      ),
    );
    const res = await kit.admin().get(`/admin/seckill/activities/${id}/check`);
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ ok: true, problems: [] });
  });

  it('reports stray keys under a shard beyond the configured ones', async () => {
    const id = activityId('chk');
    await kit.create(activityBody(id, [{ productId: 'p1', stock: 5, shards: 2 }], { startsAt: iso(60_000) }));
    const keys = new KeyBuilder(ctx.t.config);
    // A shard 3 under the first tags (no salt): left by an activity loaded before spread tags, under this id.
    const stray = shardKeys(keys, id, 'p1', 3, { shards: 4 });
    await ctx.raw.hset(stray.stock, { initial: 3, available: 3, reserved: 0, sold: 0 });
    await ctx.raw.sadd(stray.buyers, 'acc_ghost');
    const res = await kit.admin().get(`/admin/seckill/activities/${id}/check`);
    expect(res.body.ok).toBe(false);
    expect(res.body.problems).toEqual([expect.stringMatching(/product p1 shard 3: leftover keys \(.*stock.*\)/)]);
    expect(res.body.problems[0]).toMatch(/buyers/);
  });

  it('results: 409 before the end, then sold, returned, buyers and revenue of a scripted sale', async () => {
    const id = activityId('res');
    await kit.create(
      activityBody(
        id,
        [
          { productId: 'p1', stock: 5, price: 1000 },
          { productId: 'p2', stock: 4, price: 250, shards: 2, currency: 'USD' },
        ],
        { perUserLimit: 2 },
      ),
    );
    const before = await kit.admin().get(`/admin/seckill/activities/${id}/results`);
    expect(before.status).toBe(409);
    expect(before.body.error).toBe('ACTIVITY_NOT_ENDED');

    // p1: a pays 2, b pays 1, c cancels 1, d leaves 1 reserved. p2: a pays 1, b pays 2.
    const a1 = await kit.reserve('acc_ra', id, 'p1', 2);
    const b1 = await kit.reserve('acc_rb', id, 'p1', 1);
    const c1 = await kit.reserve('acc_rc', id, 'p1', 1);
    const d1 = await kit.reserve('acc_rd', id, 'p1', 1);
    const a2 = await kit.reserve('acc_ra', id, 'p2', 1);
    const b2 = await kit.reserve('acc_rb', id, 'p2', 2);
    for (const r of [a1, b1, c1, d1, a2, b2]) expect(r.status).toBe(201);
    expect(await kit.pay('acc_ra', a1.body.orderId, 2000)).toBe('PAID');
    expect(await kit.pay('acc_rb', b1.body.orderId, 1000)).toBe('PAID');
    expect(await kit.pay('acc_ra', a2.body.orderId, 250)).toBe('PAID');
    expect(await kit.pay('acc_rb', b2.body.orderId, 500)).toBe('PAID');
    expect((await kit.user('acc_rc').delete(`/seckill/reservations/${c1.body.reservationId}`)).body.state).toBe('RELEASED');
    await waitUntil(
      'the paid reservations to be sold',
      async () => {
        const s = await kit.stock(id);
        return s.get('p1')!.sold === 3 && s.get('p2')!.sold === 3;
      },
      10_000,
    );
    await kit.expectInvariant(id);
    expect((await kit.admin().post(`/admin/seckill/activities/${id}/end`)).status).toBe(200);

    const res = await kit.admin().get(`/admin/seckill/activities/${id}/results`);
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({
      activityId: id,
      final: false,
      products: [
        { productId: 'p1', stock: 5, sold: 3, returned: 1, reserved: 1, buyers: 2, revenue: 3000, currency: 'CNY' },
        { productId: 'p2', stock: 4, sold: 3, returned: 0, reserved: 0, buyers: 2, revenue: 750, currency: 'USD' },
      ],
      revenue: { CNY: 3000, USD: 750 },
    });
    // d cancels: the figures become final.
    expect((await kit.user('acc_rd').delete(`/seckill/reservations/${d1.body.reservationId}`)).status).toBe(200);
    const final = await kit.admin().get(`/admin/seckill/activities/${id}/results`);
    expect(final.body).toMatchObject({ final: true, products: [{ productId: 'p1', sold: 3, returned: 2, reserved: 0, buyers: 2 }, { productId: 'p2' }] });
    await kit.expectInvariant(id);
  });
});
