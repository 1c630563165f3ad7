import request from 'supertest';
import { homeOf } from '../../src/engines/sharded-pool/home';
import { ActivityCatalog } from '../../src/features/seckill/activity-catalog';
import { waitUntil } from '../harness/redis-process';
import { activityBody, activityId, seckillKit, type SeckillKit } from '../support/seckill';
import { CREDS, merchantHeaders, useAppOnOwnRedis } from '../support/test-app';

// Races of hundreds of requests by one account: no rate limit in this app.
const ctx = useAppOnOwnRedis({ RATE_LIMIT_ENABLED: 'false' });
let kit: SeckillKit;
beforeAll(() => (kit = seckillKit(ctx.t)));

const fieldsOf = (body: { details?: { field: string }[] }) => (body.details ?? []).map((d) => d.field);
const count = <T>(xs: T[], pred: (x: T) => boolean) => xs.filter(pred).length;
const rsvPath = (id: string) => `/seckill/reservations/${id}`;
const reservePath = (activity: string, product: string) => `/seckill/activities/${activity}/products/${product}/reservations`;

describe('seckill reservations: identities', () => {
  it('a buyer sees and cancels only their own reservations; another account gets 404 and changes nothing', async () => {
    const id = activityId('own');
    await kit.create(activityBody(id, [{ productId: 'p1', stock: 3 }]));
    const mine = await kit.reserve('acc_owner', id, 'p1');
    expect(mine.status).toBe(201);
    const rid = mine.body.reservationId as string;

    expect((await kit.user('acc_thief').get(rsvPath(rid))).status).toBe(404);
    const del = await kit.user('acc_thief').delete(rsvPath(rid));
    expect(del.status).toBe(404);
    expect(del.body.error).toBe('NOT_FOUND');
    expect((await kit.user('acc_thief').get('/seckill/reservations')).body.items).toEqual([]);
    expect((await kit.user('acc_thief').get(`/seckill/reservations?activityId=${id}`)).body.items).toEqual([]);

    const still = await kit.user('acc_owner').get(rsvPath(rid));
    expect(still.status).toBe(200);
    expect(still.body).toMatchObject({ reservationId: rid, state: 'RESERVED', orderId: mine.body.orderId });
    // Its order is the buyer's alone: another account opening it gets 404 (and stores nothing); its buyer finds it.
    expect((await kit.open('acc_thief', mine.body.orderId)).status).toBe(404);
    expect(await kit.orders.findById(mine.body.orderId)).toBeUndefined();
    expect((await kit.open('acc_owner', mine.body.orderId)).body).toMatchObject({ orderId: mine.body.orderId, status: 'CREATED', amount: 990 });
    expect((await kit.orders.findById(mine.body.orderId))?.status).toBe('CREATED');
    expect((await kit.expectInvariant(id)).get('p1')).toMatchObject({ available: 2, reserved: 1, returned: 0 });
    const list = await kit.user('acc_owner').get(`/seckill/reservations?activityId=${id}`);
    expect(list.body.items.map((r: { reservationId: string }) => r.reservationId)).toEqual([rid]);
  });

  it.each([
    ['an admin key', () => ({ 'x-admin-key': CREDS.adminKey })],
    ['a service token', () => ({ 'x-service-token': CREDS.serviceToken })],
    ['no credentials', () => ({})],
  ])('refuses a reservation made with %s and takes nothing', async (_who, headers) => {
    const id = activityId('who');
    await kit.create(activityBody(id, [{ productId: 'p1', stock: 3 }]));
    const res = await request(ctx.t.server).post(reservePath(id, 'p1')).set(headers()).send({ quantity: 1, requestId: 'r1' });
    expect([401, 403]).toContain(res.status);
    expect((await kit.expectInvariant(id)).get('p1')).toMatchObject({ available: 3, reserved: 0 });
  });

  it('refuses a signed merchant reservation and takes nothing', async () => {
    const id = activityId('who');
    await kit.create(activityBody(id, [{ productId: 'p1', stock: 3 }]));
    const path = reservePath(id, 'p1');
    const body = JSON.stringify({ quantity: 1, requestId: 'r1' });
    const res = await request(ctx.t.server)
      .post(path)
      .set(merchantHeaders('POST', path, body))
      .send(body);
    expect([401, 403]).toContain(res.status);
    expect((await kit.expectInvariant(id)).get('p1')).toMatchObject({ available: 3, reserved: 0 });
  });
});

describe('seckill reservations: bad input (400 naming the field, the stock unchanged)', () => {
  let id: string;
  beforeAll(async () => {
    id = activityId('bad');
    await kit.create(activityBody(id, [{ productId: 'p1', stock: 5 }], { perUserLimit: 1000 }));
  });

  it.each([
    ['quantity 0', { quantity: 0, requestId: 'r' }, 'quantity'],
    ['quantity 1001', { quantity: 1001, requestId: 'r' }, 'quantity'],
    ['quantity 1.5', { quantity: 1.5, requestId: 'r' }, 'quantity'],
    ['quantity "1"', { quantity: '1', requestId: 'r' }, 'quantity'],
    ['quantity -1', { quantity: -1, requestId: 'r' }, 'quantity'],
    ['no quantity', { requestId: 'r' }, 'quantity'],
    ['a 65-character requestId', { quantity: 1, requestId: 'x'.repeat(65) }, 'requestId'],
    ['requestId ".."', { quantity: 1, requestId: '..' }, 'requestId'],
    ['requestId with a space', { quantity: 1, requestId: 'a b' }, 'requestId'],
    ['no requestId', { quantity: 1 }, 'requestId'],
    ['an unknown field', { quantity: 1, requestId: 'r', accountId: 'acc_other' }, 'accountId'],
  ])('reserve with %s', async (_what, body, field) => {
    const res = await kit.user('acc_bad').post(reservePath(id, 'p1'), body);
    expect(res.status).toBe(400);
    expect(fieldsOf(res.body)).toContain(field);
    expect((await kit.expectInvariant(id)).get('p1')).toMatchObject({ available: 5, reserved: 0 });
    expect((await kit.user('acc_bad').get('/seckill/reservations')).body.items).toEqual([]);
  });

  it.each([
    ['an activity id too long', () => reservePath('a'.repeat(33), 'p1'), 'activityId'],
    ['a product id with a dot', () => reservePath(id, 'p.1'), 'productId'],
  ])('reserve on %s', async (_what, path, field) => {
    const res = await kit.user('acc_bad').post(path(), { quantity: 1, requestId: 'r' });
    expect(res.status).toBe(400);
    expect(fieldsOf(res.body)).toContain(field);
    expect((await kit.expectInvariant(id)).get('p1')).toMatchObject({ available: 5, reserved: 0 });
  });

  it('an unknown product or activity: 404, nothing taken', async () => {
    expect((await kit.reserve('acc_bad', id, 'p9')).status).toBe(404);
    expect((await kit.reserve('acc_bad', activityId('none'), 'p1')).status).toBe(404);
    expect((await kit.expectInvariant(id)).get('p1')).toMatchObject({ available: 5, reserved: 0 });
  });

  it.each([
    ['GET', (u: ReturnType<SeckillKit['user']>) => u.get('/seckill/reservations/sk_123'), 'reservationId'],
    ['DELETE', (u: ReturnType<SeckillKit['user']>) => u.delete('/seckill/reservations/sk_ZZZZZZZZZZZZZZZZZZZZZZZZ'), 'reservationId'],
    ['list', (u: ReturnType<SeckillKit['user']>) => u.get('/seckill/reservations?activityId=bad%20id'), 'activityId'],
  ])('%s with a malformed id', async (_what, call, field) => {
    const res = await call(kit.user('acc_bad'));
    expect(res.status).toBe(400);
    expect(fieldsOf(res.body)).toContain(field);
  });

  it.each([
    ['page 0', 'page=0', 'page'],
    ['page 1.5', 'page=1.5', 'page'],
    ['size 51', 'size=51', 'size'],
    ['size 0', 'size=0', 'size'],
    ['size x', 'size=x', 'size'],
  ])('listing with %s', async (_what, query, field) => {
    const res = await kit.user('acc_bad').get(`/seckill/activities/${id}/products?${query}`);
    expect(res.status).toBe(400);
    expect(fieldsOf(res.body)).toContain(field);
  });

  it('more than the per-user limit in one request: 409 LIMIT_EXCEEDED, nothing taken', async () => {
    const small = activityId('lim');
    await kit.create(activityBody(small, [{ productId: 'p1', stock: 5 }], { perUserLimit: 2 }));
    const res = await kit.reserve('acc_bad', small, 'p1', 3);
    expect(res.status).toBe(409);
    expect(res.body.error).toBe('LIMIT_EXCEEDED');
    expect((await kit.expectInvariant(small)).get('p1')).toMatchObject({ available: 5, reserved: 0 });
  });
});

describe('seckill reservations: idempotency', () => {
  it('1,000 concurrent reservations with one requestId: one reservation, one 201, the rest 200, one unit, one order', async () => {
    const id = activityId('idem');
    await kit.create(activityBody(id, [{ productId: 'p1', stock: 10 }]));
    const ordersBefore = await kit.metric('orders_created_total');
    const reservedBefore = await kit.metric('seckill_reservations_total');
    const all = await Promise.all(Array.from({ length: 1000 }, () => kit.reserve('acc_idem', id, 'p1', 1, 'tap-1')));
    const statuses = all.map((r) => r.status);
    expect({
      created: count(statuses, (s) => s === 201),
      ok: count(statuses, (s) => s === 200),
      other: count(statuses, (s) => s !== 200 && s !== 201),
    }).toEqual({ created: 1, ok: 999, other: 0 });
    expect(new Set(all.map((r) => r.body.reservationId)).size).toBe(1);
    expect(new Set(all.map((r) => r.body.orderId)).size).toBe(1);
    expect((await kit.expectInvariant(id)).get('p1')).toMatchObject({ available: 9, reserved: 1 });
    expect(await kit.metric('seckill_reservations_total')).toBe(reservedBefore + 1);
    // Its order is stored once, at its first use, whichever of the answers' (one) order id is opened, how often.
    const opened = await Promise.all(all.slice(0, 50).map((r) => kit.open('acc_idem', r.body.orderId)));
    expect(new Set(opened.map((o) => `${o.status} ${o.body.status}`))).toEqual(new Set(['200 CREATED']));
    expect(await kit.metric('orders_created_total')).toBe(ordersBefore + 1);
    expect((await kit.user('acc_idem').get(`/seckill/reservations?activityId=${id}`)).body.items).toHaveLength(1);
  });
});

describe('seckill reservations: the per-user limit under concurrency', () => {
  const heldBy = async (account: string, activity: string) =>
    ((await kit.user(account).get(`/seckill/reservations?activityId=${activity}`)).body.items as { state: string; quantity: number }[])
      .filter((r) => r.state !== 'RELEASED')
      .reduce((s, r) => s + r.quantity, 0);

  it('perUserLimit 2, 50 concurrent requests by one account: exactly 2 units held', async () => {
    const id = activityId('lim');
    await kit.create(activityBody(id, [{ productId: 'p1', stock: 20 }], { perUserLimit: 2 }));
    const all = await Promise.all(Array.from({ length: 50 }, (_, i) => kit.reserve('acc_greedy', id, 'p1', 1, `g-${i}`)));
    expect(count(all, (r) => r.status === 201)).toBe(2);
    expect(all.filter((r) => r.status !== 201).map((r) => r.body.error)).toEqual(Array(48).fill('LIMIT_EXCEEDED'));
    expect((await kit.expectInvariant(id)).get('p1')).toMatchObject({ available: 18, reserved: 2 });
    expect(await heldBy('acc_greedy', id)).toBe(2);
  });

  it('perUserLimit 2 on a product of 4 shards with 1 unit each: the limit holds across shards, and fall-over happens', async () => {
    const id = activityId('lims');
    await kit.create(activityBody(id, [{ productId: 'p1', stock: 4, shards: 4 }], { perUserLimit: 2 }));
    const fallOvers = await kit.metric('seckill_fall_overs_total');
    const all = await Promise.all(Array.from({ length: 50 }, (_, i) => kit.reserve('acc_greedy2', id, 'p1', 1, `g-${i}`)));
    expect(count(all, (r) => r.status === 201)).toBe(2);
    for (const r of all.filter((x) => x.status !== 201)) expect(['LIMIT_EXCEEDED', 'SOLD_OUT']).toContain(r.body.error);
    expect(await kit.metric('seckill_fall_overs_total')).toBeGreaterThanOrEqual(fallOvers + 1);
    expect((await kit.expectInvariant(id)).get('p1')).toMatchObject({ available: 2, reserved: 2 });
    expect(await heldBy('acc_greedy2', id)).toBe(2);
    // The two other units are still there for others.
    const others = await Promise.all(['acc_o1', 'acc_o2', 'acc_o3', 'acc_o4'].map((a) => kit.reserve(a, id, 'p1')));
    expect(count(others, (r) => r.status === 201)).toBe(2);
    expect((await kit.expectInvariant(id)).get('p1')).toMatchObject({ available: 0, reserved: 4 });
  });

  it('quantity 2 on a sharded product with 1 unit per shard: taken over two shards, and it counts 2 against the limit', async () => {
    const id = activityId('limq');
    await kit.create(activityBody(id, [{ productId: 'p1', stock: 4, shards: 4 }], { perUserLimit: 2 }));
    const r = await kit.reserve('acc_q', id, 'p1', 2);
    expect(r.status).toBe(201);
    expect(r.body).toMatchObject({ quantity: 2, amount: 1980, state: 'RESERVED' });
    expect((await kit.reserve('acc_q', id, 'p1', 1)).body.error).toBe('LIMIT_EXCEEDED');
    expect((await kit.expectInvariant(id)).get('p1')).toMatchObject({ available: 2, reserved: 2 });
    // Cancelled: both units back where they were taken, and the limit free again.
    expect((await kit.user('acc_q').delete(rsvPath(r.body.reservationId))).body).toMatchObject({ state: 'RELEASED', quantity: 2 });
    expect((await kit.expectInvariant(id)).get('p1')).toMatchObject({ available: 4, reserved: 0, returned: 2 });
    expect((await kit.reserve('acc_q', id, 'p1', 2)).status).toBe(201);
  });
});

describe('seckill reservations: sharded products', () => {
  /** An account whose home shard of `productId` (of `shards`) is `shard`. */
  const accountOnShard = (tag: string, productId: string, shards: number, shard: number) => {
    for (let i = 0; ; i++) if (homeOf(`acc_${tag}_${i}`, productId, shards) === shard) return `acc_${tag}_${i}`;
  };

  it('a buyer of 2 whose home shard has 1 left and the others none: SOLD_OUT naming 1 left, and that unit still sells', async () => {
    const id = activityId('last');
    await kit.create(activityBody(id, [{ productId: 'p1', stock: 2, shards: 2 }], { perUserLimit: 2 }));
    const buyer = accountOnShard('two', 'p1', 2, 0);
    const drainer = accountOnShard('drain', 'p1', 2, 1);
    expect((await kit.reserve(drainer, id, 'p1', 1)).status).toBe(201);
    const two = await kit.reserve(buyer, id, 'p1', 2);
    expect(two.status).toBe(409);
    expect(two.body).toMatchObject({ error: 'SOLD_OUT', details: { available: 1 } });
    expect((await kit.expectInvariant(id)).get('p1')).toMatchObject({ available: 1, reserved: 1 });
    // The last unit is not refused by this instance's sold-out memory.
    const last = await kit.reserve(accountOnShard('one', 'p1', 2, 1), id, 'p1', 1);
    expect(last.status).toBe(201);
    expect((await kit.expectInvariant(id)).get('p1')).toMatchObject({ available: 0, reserved: 2 });
  });

  it('quantity 5 of 12 units over 3 shards (4 each), limit 10: taken over two shards; the rest sells to the last unit, then SOLD_OUT', async () => {
    const id = activityId('multi');
    await kit.create(activityBody(id, [{ productId: 'p1', stock: 12, shards: 3 }], { perUserLimit: 10 }));
    const five = await kit.reserve('acc_five', id, 'p1', 5, 'tap-5');
    expect([five.status, five.body.quantity, five.body.amount]).toEqual([201, 5, 4950]);
    expect((await kit.expectInvariant(id)).get('p1')).toMatchObject({ available: 7, reserved: 5 });
    // The same request again is that reservation, whole, and takes nothing more.
    const again = await kit.reserve('acc_five', id, 'p1', 5, 'tap-5');
    expect([again.status, again.body.reservationId, again.body.quantity, again.body.orderId]).toEqual([200, five.body.reservationId, 5, five.body.orderId]);
    expect((await kit.user('acc_five').get(rsvPath(five.body.reservationId))).body).toMatchObject({ quantity: 5, state: 'RESERVED' });
    expect((await kit.expectInvariant(id)).get('p1')).toMatchObject({ available: 7, reserved: 5 });
    const seven = await kit.reserve('acc_seven', id, 'p1', 7);
    expect([seven.status, seven.body.quantity]).toEqual([201, 7]);
    const none = await kit.reserve('acc_none', id, 'p1', 1);
    expect(none.body).toMatchObject({ error: 'SOLD_OUT', details: { available: 0 } });
    expect((await kit.expectInvariant(id)).get('p1')).toMatchObject({ available: 0, reserved: 12 });
    // Paid: every part sold.
    expect(await kit.pay('acc_five', five.body.orderId, 4950)).toBe('PAID');
    await waitUntil(
      'it to be SOLD',
      async () => (await kit.user('acc_five').get(rsvPath(five.body.reservationId))).body.state === 'SOLD' || 'not yet',
      10_000,
      20,
    );
    expect((await kit.expectInvariant(id)).get('p1')).toMatchObject({ available: 0, reserved: 7, sold: 5 });
  });

  it('more than one shard can give: asking for more than all shards hold is SOLD_OUT naming what is left, and nothing is held', async () => {
    const id = activityId('more');
    await kit.create(activityBody(id, [{ productId: 'p1', stock: 6, shards: 3 }], { perUserLimit: 10 }));
    expect((await kit.reserve('acc_m1', id, 'p1', 4)).status).toBe(201);
    const over = await kit.reserve('acc_m2', id, 'p1', 3);
    expect(over.body).toMatchObject({ error: 'SOLD_OUT', message: 'Only 2 left', details: { available: 2 } });
    expect((await kit.reserve('acc_m2', id, 'p1', 2)).status).toBe(201);
    expect((await kit.expectInvariant(id)).get('p1')).toMatchObject({ available: 0, reserved: 6 });
  });

  it.each([1, 3, 4, 16])(
    '%i shards: buyers one at a time get every unit (quantity 1, then above one shard’s share); SOLD_OUT only when every shard is empty',
    async (shards) => {
      const id = activityId(`sweep${shards}`);
      const stock = 2 * shards;
      await kit.create(activityBody(id, [{ productId: 'p1', stock, shards }], { perUserLimit: 10 }));
      let left = stock;
      let i = 0;
      // Above one shard's share (2) first, while it can be met, then single units.
      for (const q of [3, 3, 1]) {
        while (left >= q && (q === 1 || left > stock / 2)) {
          const r = await kit.reserve(`acc_s${shards}_${i++}`, id, 'p1', q);
          expect({ left, q, status: r.status, error: r.body.error }).toEqual({ left, q, status: 201, error: undefined });
          left -= q;
        }
      }
      const last = await kit.reserve(`acc_s${shards}_last`, id, 'p1', 1);
      expect(last.body).toMatchObject({ error: 'SOLD_OUT', details: { available: 0 } });
      expect((await kit.expectInvariant(id)).get('p1')).toMatchObject({ available: 0, reserved: stock });
    },
  );

  it('1,000 concurrent reservations with one requestId by a buyer whose home shard is empty: one reservation, taken on another shard', async () => {
    const id = activityId('idemf');
    await kit.create(activityBody(id, [{ productId: 'p1', stock: 8, shards: 4 }]));
    const buyer = accountOnShard('idf', 'p1', 4, 2);
    for (let i = 0; i < 2; i++) expect((await kit.reserve(accountOnShard(`home2x${i}`, 'p1', 4, 2), id, 'p1')).status).toBe(201);
    const all = await Promise.all(Array.from({ length: 1000 }, () => kit.reserve(buyer, id, 'p1', 1, 'tap-f')));
    const statuses = all.map((r) => r.status);
    expect({ created: count(statuses, (x) => x === 201), ok: count(statuses, (x) => x === 200) }).toEqual({ created: 1, ok: 999 });
    expect(new Set(all.map((r) => r.body.reservationId)).size).toBe(1);
    expect((await kit.expectInvariant(id)).get('p1')).toMatchObject({ available: 5, reserved: 3 });
    // Cancelling it gives back one unit and frees the buyer's limit.
    expect((await kit.user(buyer).delete(rsvPath(all[0].body.reservationId))).body.state).toBe('RELEASED');
    expect((await kit.expectInvariant(id)).get('p1')).toMatchObject({ available: 6, reserved: 2, returned: 1 });
    expect((await kit.reserve(buyer, id, 'p1', 1, 'tap-g')).status).toBe(201);
  });

  it('the same requestId with another quantity is 409 REQUEST_REUSED, not the first reservation passed off as this one; nothing more taken', async () => {
    const id = activityId('reuse');
    await kit.create(activityBody(id, [{ productId: 'p1', stock: 10, shards: 2 }], { perUserLimit: 5 }));
    const first = await kit.reserve('acc_reuse', id, 'p1', 1, 'tap-q');
    expect(first.status).toBe(201);
    const other = await kit.reserve('acc_reuse', id, 'p1', 2, 'tap-q');
    expect({ status: other.status, error: other.body.error, details: other.body.details }).toEqual({
      status: 409,
      error: 'REQUEST_REUSED',
      details: { quantity: 1 },
    });
    // The same quantity is still the retry it always was.
    const again = await kit.reserve('acc_reuse', id, 'p1', 1, 'tap-q');
    expect({ status: again.status, id: again.body.reservationId }).toEqual({ status: 200, id: first.body.reservationId });
    // At once, with mixed quantities: one reservation of one quantity; every other answer is that one (200) or 409.
    const all = await Promise.all([1, 2, 3, 1, 2, 3].map((q) => kit.reserve('acc_reuse', id, 'p1', q, 'tap-r')));
    const made = all.find((r) => r.status === 201)!;
    for (const r of all) {
      if (r.body.quantity === made.body.quantity) expect({ status: r.status, id: r.body.reservationId }).toMatchObject({ id: made.body.reservationId });
      else expect({ status: r.status, error: r.body.error }).toEqual({ status: 409, error: 'REQUEST_REUSED' });
    }
    expect((await kit.expectInvariant(id)).get('p1')).toMatchObject({ reserved: 1 + (made.body.quantity as number) });
  });

  it('the same request again after a fall-over reservation was cancelled answers the released reservation, taking nothing', async () => {
    const id = activityId('refo');
    await kit.create(activityBody(id, [{ productId: 'p1', stock: 8, shards: 4 }]));
    const buyer = accountOnShard('refo', 'p1', 4, 1);
    for (const acc of [accountOnShard('refoa', 'p1', 4, 1), accountOnShard('refob', 'p1', 4, 1)]) expect((await kit.reserve(acc, id, 'p1')).status).toBe(201);
    const first = await kit.reserve(buyer, id, 'p1', 1, 'tap-fo');
    expect(first.status).toBe(201);
    expect((await kit.user(buyer).delete(rsvPath(first.body.reservationId))).body.state).toBe('RELEASED');
    expect((await kit.expectInvariant(id)).get('p1')).toMatchObject({ available: 6, reserved: 2, returned: 1 });
    const again = await kit.reserve(buyer, id, 'p1', 1, 'tap-fo');
    expect({ status: again.status, state: again.body.state }).toEqual({ status: 200, state: 'RELEASED' });
    expect(again.body.reservationId).toBe(first.body.reservationId);
    expect((await kit.expectInvariant(id)).get('p1')).toMatchObject({ available: 6, reserved: 2, returned: 1 });
    // The answer held nothing against the buyer's limit (1): a new request reserves.
    expect((await kit.reserve(buyer, id, 'p1', 1, 'tap-fo-2')).status).toBe(201);
    expect((await kit.expectInvariant(id)).get('p1')).toMatchObject({ available: 5, reserved: 3, returned: 1 });
  });

  it('the same request again after a fall-over reservation was cancelled, with a unit back on an earlier shard: still the released reservation', async () => {
    const id = activityId('refo2');
    await kit.create(activityBody(id, [{ productId: 'p1', stock: 8, shards: 4 }]));
    const buyer = accountOnShard('refo2', 'p1', 4, 1);
    for (const acc of [accountOnShard('r2a', 'p1', 4, 1), accountOnShard('r2b', 'p1', 4, 1)]) expect((await kit.reserve(acc, id, 'p1')).status).toBe(201);
    const next = [accountOnShard('r2c', 'p1', 4, 2), accountOnShard('r2d', 'p1', 4, 2)];
    const onNext = [];
    for (const acc of next) onNext.push(await kit.reserve(acc, id, 'p1'));
    const first = await kit.reserve(buyer, id, 'p1', 1, 'tap-fo');
    expect(first.status).toBe(201);
    expect((await kit.user(buyer).delete(rsvPath(first.body.reservationId))).body.state).toBe('RELEASED');
    expect((await kit.user(next[0]).delete(rsvPath(onNext[0].body.reservationId))).body.state).toBe('RELEASED');
    expect((await kit.expectInvariant(id)).get('p1')).toMatchObject({ available: 5, reserved: 3, returned: 2 });
    const again = await kit.reserve(buyer, id, 'p1', 1, 'tap-fo');
    expect({ status: again.status, state: again.body.state, id: again.body.reservationId }).toEqual({
      status: 200,
      state: 'RELEASED',
      id: first.body.reservationId,
    });
    expect((await kit.expectInvariant(id)).get('p1')).toMatchObject({ available: 5, reserved: 3, returned: 2 });
  });
});

describe('seckill reservations: no oversell', () => {
  it.each([
    ['one shard', 1],
    ['4 shards', 4],
  ])('300 accounts race for 50 units on %s: exactly 50 reserved, 250 SOLD_OUT', async (_what, shards) => {
    const id = activityId('race');
    await kit.create(activityBody(id, [{ productId: 'p1', stock: 50, shards }]));
    const all = await Promise.all(Array.from({ length: 300 }, (_, i) => kit.reserve(`acc_race_${i}`, id, 'p1')));
    expect(count(all, (r) => r.status === 201)).toBe(50);
    expect(all.filter((r) => r.status !== 201).map((r) => `${r.status} ${r.body.error}`)).toEqual(Array(250).fill('409 SOLD_OUT'));
    expect(new Set(all.filter((r) => r.status === 201).map((r) => r.body.reservationId)).size).toBe(50);
    expect((await kit.expectInvariant(id)).get('p1')).toMatchObject({ available: 0, reserved: 50, sold: 0 });
    expect((await kit.admin().get(`/admin/seckill/activities/${id}/check`)).body).toMatchObject({ ok: true, problems: [] });
  });
});

describe('seckill reservations: eligibility', () => {
  it('a listed account reserves; another gets NOT_ELIGIBLE and takes nothing', async () => {
    const id = activityId('elig');
    await kit.create(activityBody(id, [{ productId: 'p1', stock: 5, shards: 2 }], { eligibleAccounts: ['acc_vip1', 'acc_vip2'] }));
    const out = await kit.reserve('acc_plain', id, 'p1');
    expect(out.status).toBe(409);
    expect(out.body.error).toBe('NOT_ELIGIBLE');
    expect((await kit.expectInvariant(id)).get('p1')).toMatchObject({ available: 5, reserved: 0 });
    expect((await kit.reserve('acc_vip1', id, 'p1')).status).toBe(201);
    expect((await kit.reserve('acc_vip2', id, 'p1')).status).toBe(201);
    expect((await kit.expectInvariant(id)).get('p1')).toMatchObject({ available: 3, reserved: 2 });
    expect((await kit.user('acc_plain').get('/seckill/reservations')).body.items).toEqual([]);
  });
});

describe('seckill reservations: paid, cancelled and closed', () => {
  const stateOf = async (account: string, rid: string) => (await kit.user(account).get(rsvPath(rid))).body.state as string;

  it('paid → SOLD; cancelling it then → 409 RESERVATION_PAID, still SOLD', async () => {
    const id = activityId('paid');
    await kit.create(activityBody(id, [{ productId: 'p1', stock: 2, price: 1500 }]));
    const r = await kit.reserve('acc_payer', id, 'p1');
    expect(await kit.pay('acc_payer', r.body.orderId, 1500)).toBe('PAID');
    await waitUntil('SOLD', async () => (await stateOf('acc_payer', r.body.reservationId)) === 'SOLD', 10_000);
    const del = await kit.user('acc_payer').delete(rsvPath(r.body.reservationId));
    expect(del.status).toBe(409);
    expect(del.body.error).toBe('RESERVATION_PAID');
    expect(await stateOf('acc_payer', r.body.reservationId)).toBe('SOLD');
    expect((await kit.expectInvariant(id)).get('p1')).toMatchObject({ available: 1, reserved: 0, sold: 1, returned: 0 });
  });

  it('cancel → RELEASED and the unit sells again, even to a buyer this instance saw sold out', async () => {
    const id = activityId('cancel');
    await kit.create(activityBody(id, [{ productId: 'p1', stock: 1 }]));
    const a = await kit.reserve('acc_first', id, 'p1');
    expect(a.status).toBe(201);
    const b = await kit.reserve('acc_second', id, 'p1');
    expect(b.body.error).toBe('SOLD_OUT');
    const del = await kit.user('acc_first').delete(rsvPath(a.body.reservationId));
    expect(del.status).toBe(200);
    expect(del.body.state).toBe('RELEASED');
    expect((await kit.orders.findById(a.body.orderId))?.status).toBe('CLOSED');
    expect((await kit.expectInvariant(id)).get('p1')).toMatchObject({ available: 1, reserved: 0, returned: 1 });
    const again = await kit.reserve('acc_second', id, 'p1');
    expect(again.status).toBe(201);
    expect((await kit.expectInvariant(id)).get('p1')).toMatchObject({ available: 0, reserved: 1, returned: 1 });
  });

  it('cancel twice → 200 both times, the unit returned once', async () => {
    const id = activityId('twice');
    await kit.create(activityBody(id, [{ productId: 'p1', stock: 3, shards: 3 }], { perUserLimit: 2 }));
    const r = await kit.reserve('acc_twice', id, 'p1', 1);
    expect(r.status).toBe(201);
    const d1 = await kit.user('acc_twice').delete(rsvPath(r.body.reservationId));
    const d2 = await kit.user('acc_twice').delete(rsvPath(r.body.reservationId));
    expect([d1.status, d2.status]).toEqual([200, 200]);
    expect([d1.body.state, d2.body.state]).toEqual(['RELEASED', 'RELEASED']);
    expect((await kit.expectInvariant(id)).get('p1')).toMatchObject({ available: 3, reserved: 0, returned: 1 });
    // The limit counts it no more: two more units for the same account.
    expect((await kit.reserve('acc_twice', id, 'p1', 2)).status).toBe(201); // over two shards (one unit each)
    expect((await kit.reserve('acc_twice', id, 'p1', 1)).body.error).toBe('LIMIT_EXCEEDED');
    expect((await kit.expectInvariant(id)).get('p1')).toMatchObject({ available: 1, reserved: 2, returned: 1 });
  });

  it('concurrent cancels (a double tap, and more): each waits for the other and answers 200 RELEASED, the unit returned once', async () => {
    const id = activityId('twin');
    await kit.create(activityBody(id, [{ productId: 'p1', stock: 2 }]));
    const r = await kit.reserve('acc_twin', id, 'p1');
    const all = await Promise.all(Array.from({ length: 5 }, () => kit.user('acc_twin').delete(rsvPath(r.body.reservationId))));
    expect(all.map((d) => [d.status, d.body.state ?? d.body.error])).toEqual(all.map(() => [200, 'RELEASED']));
    expect((await kit.user('acc_twin').delete(rsvPath(r.body.reservationId))).body.state).toBe('RELEASED');
    expect((await kit.expectInvariant(id)).get('p1')).toMatchObject({ available: 2, reserved: 0, returned: 1 });
  });

  it('a cancelled reservation’s order can no longer be paid; the same request again answers the released reservation', async () => {
    const id = activityId('nopay');
    await kit.create(activityBody(id, [{ productId: 'p1', stock: 2, price: 700 }]));
    const r = await kit.reserve('acc_late', id, 'p1', 1, 'tap-late');
    expect((await kit.user('acc_late').delete(rsvPath(r.body.reservationId))).body.state).toBe('RELEASED');
    await expect(kit.pay('acc_late', r.body.orderId, 700)).rejects.toThrow();
    expect((await kit.orders.findById(r.body.orderId))?.status).toBe('CLOSED');
    const again = await kit.reserve('acc_late', id, 'p1', 1, 'tap-late');
    expect(again.status).toBe(200);
    expect(again.body).toMatchObject({ reservationId: r.body.reservationId, state: 'RELEASED' });
    expect((await kit.expectInvariant(id)).get('p1')).toMatchObject({ available: 2, reserved: 0, sold: 0, returned: 1 });
  });

  it('a reservation taken on another shard, paid after the end: SOLD, and the results count it', async () => {
    const id = activityId('fopay');
    await kit.create(activityBody(id, [{ productId: 'p1', stock: 2, shards: 2, price: 400 }]));
    const buyer = 'acc_fo_buyer';
    const home = homeOf(buyer, 'p1', 2);
    let drainer = '';
    for (let i = 0; !drainer; i++) if (homeOf(`acc_fo_${i}`, 'p1', 2) === home) drainer = `acc_fo_${i}`;
    expect((await kit.reserve(drainer, id, 'p1')).status).toBe(201);
    const r = await kit.reserve(buyer, id, 'p1');
    expect(r.status).toBe(201);
    expect((await kit.admin().post(`/admin/seckill/activities/${id}/end`)).status).toBe(200);
    expect(await kit.pay(buyer, r.body.orderId, 400)).toBe('PAID');
    await waitUntil('SOLD', async () => (await stateOf(buyer, r.body.reservationId)) === 'SOLD', 10_000);
    expect((await kit.user(drainer).delete(rsvPath((await kit.user(drainer).get('/seckill/reservations')).body.items[0].reservationId))).status).toBe(200);
    expect((await kit.expectInvariant(id)).get('p1')).toMatchObject({ available: 1, reserved: 0, sold: 1, returned: 1 });
    const results = await kit.admin().get(`/admin/seckill/activities/${id}/results`);
    expect(results.body).toMatchObject({
      final: true,
      products: [{ productId: 'p1', sold: 1, returned: 1, reserved: 0, buyers: 1, revenue: 400 }],
      revenue: { CNY: 400 },
    });
  });

  it('the merchant closes the order → RELEASED, the unit back once', async () => {
    const id = activityId('mclose');
    await kit.create(activityBody(id, [{ productId: 'p1', stock: 2 }]));
    const r = await kit.reserve('acc_closed', id, 'p1');
    expect(r.status).toBe(201);
    // The merchant learns of the order when it is stored (its order.created): at the buyer's first use here.
    expect((await kit.open('acc_closed', r.body.orderId)).status).toBe(200);
    const path = `/merchant/orders/${r.body.reservationId}/close`;
    const closed = await request(ctx.t.server)
      .post(path)
      .set(merchantHeaders('POST', path, ''));
    expect(closed.status).toBe(200);
    await waitUntil('RELEASED', async () => (await stateOf('acc_closed', r.body.reservationId)) === 'RELEASED', 10_000);
    expect((await kit.expectInvariant(id)).get('p1')).toMatchObject({ available: 2, reserved: 0, returned: 1 });
    // The buyer's own cancel afterwards changes nothing.
    expect((await kit.user('acc_closed').delete(rsvPath(r.body.reservationId))).body.state).toBe('RELEASED');
    expect((await kit.expectInvariant(id)).get('p1')).toMatchObject({ available: 2, reserved: 0, returned: 1 });
  });
});

describe('seckill reservations: the list', () => {
  it('of one activity finds its reservations even when the buyer holds more than a page (200) of others', async () => {
    const id = activityId('many');
    await kit.create(activityBody(id, [{ productId: 'p1', stock: 2 }]));
    const r = await kit.reserve('acc_many', id, 'p1');
    expect(r.status).toBe(201);
    // 3,000 reservations of another activity in the buyer's index (as the reservation script's caller records them).
    const other = activityId('other');
    const keepUntil = Date.now() + 3600_000;
    for (let i = 0; i < 3000; i += 500) {
      await Promise.all(
        Array.from({ length: 500 }, (_, j) =>
          kit.store.remember(
            'acc_many',
            `sk_${(i + j).toString(16).padStart(24, '0')}`,
            { activityId: other, productId: 'p1', shard: 0, home: 0, requestId: `x${i + j}` },
            keepUntil,
          ),
        ),
      );
    }
    const list = await kit.user('acc_many').get(`/seckill/reservations?activityId=${id}`);
    expect(list.body.items.map((x: { reservationId: string }) => x.reservationId)).toEqual([r.body.reservationId]);
  });

  it('of every activity is the newest 200 when the buyer holds more', async () => {
    const id = activityId('newest');
    await kit.create(activityBody(id, [{ productId: 'p1', stock: 2 }]));
    // 3,000 older reservations of another activity, made an hour ago.
    const other = activityId('older');
    const keepUntil = Date.now() + 3600_000;
    for (let i = 0; i < 3000; i += 500) {
      await Promise.all(
        Array.from({ length: 500 }, (_, j) =>
          kit.store.remember(
            'acc_newest',
            `sk_${(i + j).toString(16).padStart(24, '0')}`,
            { activityId: other, productId: 'p1', shard: 0, home: 0, requestId: `y${i + j}`, at: Date.now() - 3600_000 + i + j },
            keepUntil,
          ),
        ),
      );
    }
    const r = await kit.reserve('acc_newest', id, 'p1');
    expect(r.status).toBe(201);
    const list = await kit.user('acc_newest').get('/seckill/reservations');
    expect(list.status).toBe(200);
    expect(list.body.items.map((x: { reservationId: string }) => x.reservationId)).toContain(r.body.reservationId);
  });
});

describe('seckill reservations: titles outside the Basic Multilingual Plane', () => {
  it('an order subject cut at 128 units never ends in half an emoji: the reservation is made, its order created', async () => {
    const id = activityId('emoji');
    // 'a' and 127 emoji: 255 UTF-16 units, so the subject's 128th unit is the first half of an emoji.
    await kit.create(activityBody(id, [{ productId: 'p1', stock: 2 }], { title: `a${'😀'.repeat(127)}` }));
    const r = await kit.reserve('acc_emoji', id, 'p1');
    expect(r.status).toBe(201);
    expect((await kit.open('acc_emoji', r.body.orderId)).status).toBe(200);
    const order = await kit.orders.findById(r.body.orderId);
    expect(order?.status).toBe('CREATED');
    expect(order?.subject).toBe(`a${'😀'.repeat(63)}`);
    expect((await kit.expectInvariant(id)).get('p1')).toMatchObject({ available: 1, reserved: 1 });
  });

  it('an activity stored with half a surrogate pair in its title (before titles were checked): its reservations are made and released', async () => {
    const id = activityId('lone');
    await kit.create(activityBody(id, [{ productId: 'p1', stock: 2 }]));
    const stored = (await kit.store.activity(id))!;
    await kit.store.saveActivity({ ...stored, title: 'Sale \ud83d' }, stored.endsAt + 3600_000, false);
    ctx.t.app.get(ActivityCatalog).forget(id);
    const r = await kit.reserve('acc_lone', id, 'p1');
    expect(r.status).toBe(201);
    expect((await kit.open('acc_lone', r.body.orderId)).body.subject).toBe('Sale \ufffd: Product p1');
    expect((await kit.user('acc_lone').delete(rsvPath(r.body.reservationId))).body.state).toBe('RELEASED');
    expect((await kit.expectInvariant(id)).get('p1')).toMatchObject({ available: 2, reserved: 0, returned: 1 });
  });
});

describe('seckill reservations: ids a caller chooses against ids the service makes', () => {
  /** The merchant creates one of its own orders over HTTP. */
  const merchantOrder = (body: Record<string, unknown>) => {
    const path = '/merchant/orders';
    const text = JSON.stringify(body);
    return request(ctx.t.server)
      .post(path)
      .set(merchantHeaders('POST', path, text))
      .set('content-type', 'application/json')
      .send(text);
  };

  it('a merchant cannot number its own order as a reservation will be: 400 naming merchantOrderNo, nothing stored', async () => {
    const id = activityId('clash');
    await kit.create(activityBody(id, [{ productId: 'p1', stock: 2 }]));
    const taken = await kit.reservationId(id, 'p1', 'acc_clash0', 'tap-clash');
    const own = await merchantOrder({ merchantOrderNo: taken, amount: 1, currency: 'CNY', subject: 'the merchant’s own', expireMinutes: 30 });
    expect([own.status, own.body.details?.[0]?.field]).toEqual([400, 'merchantOrderNo']);
    expect(await kit.orders.orderIdOf(CREDS.merchantId, taken)).toBeUndefined();
    // The shape only: a number that merely starts like one is the merchant's to use.
    const near = await merchantOrder({ merchantOrderNo: `${taken}0`, amount: 1, currency: 'CNY', subject: 'near', expireMinutes: 30 });
    expect(near.status).toBe(201);
    const r = await kit.reserve('acc_clash0', id, 'p1', 1, 'tap-clash');
    expect(r.status).toBe(201);
    expect((await kit.open('acc_clash0', r.body.orderId)).status).toBe(200);
    expect(await kit.orders.orderIdOf(CREDS.merchantId, taken)).toBe(r.body.orderId);
  });

  it("an order already stored under a reservation's number (by an earlier version): the reservation's order cannot be opened (404), its units back at once, that order untouched; another requestId works", async () => {
    const id = activityId('clash');
    await kit.create(activityBody(id, [{ productId: 'p1', stock: 2 }]));
    const buyer = 'acc_clash';
    // An order the merchant API of an earlier version let a merchant number as the buyer's request will be.
    const taken = await kit.reservationId(id, 'p1', buyer, 'tap-clash');
    const own = {
      body: (
        await kit.orders.create({
          merchantId: CREDS.merchantId,
          merchantOrderNo: taken,
          amount: 1,
          currency: 'CNY',
          subject: 'the merchant’s own',
          expireMinutes: 30,
        })
      ).order,
    };
    const r = await kit.reserve(buyer, id, 'p1', 1, 'tap-clash');
    expect(r.status).toBe(201);
    expect(r.body.orderId).not.toBe(own.body.orderId);
    // Its order can never be stored: opening it is 404 for the buyer, and (nothing held, nothing stuck) the units are
    // back now rather than at the reservation's expiry; paying it is 404 too.
    expect((await kit.open(buyer, r.body.orderId)).status).toBe(404);
    expect((await kit.expectInvariant(id)).get('p1')).toMatchObject({ available: 2, reserved: 0 });
    expect((await kit.user(buyer).get(rsvPath(r.body.reservationId))).body.state).toBe('RELEASED');
    const plan = await kit.user(buyer).post(`/orders/${r.body.orderId}/payment-plans`, { instructions: [{ method: 'quickpay', amount: 990 }] });
    expect(plan.status).toBe(404);
    expect(await kit.orders.findById(own.body.orderId)).toMatchObject({ status: 'CREATED', amount: 1 });
    const again = await kit.reserve(buyer, id, 'p1', 1, 'tap-other');
    expect(again.status).toBe(201);
    expect(again.body.orderId).not.toBe(own.body.orderId);
    expect((await kit.expectInvariant(id)).get('p1')).toMatchObject({ available: 1, reserved: 1 });
  });

  it('requestIds chosen to collide (the same one by two buyers, in two products, ids that run together) make distinct reservations', async () => {
    const id = activityId('rq');
    await kit.create(
      activityBody(
        id,
        [
          { productId: 'p1', stock: 5 },
          { productId: 'p1_x', stock: 5 },
        ],
        { perUserLimit: 5 },
      ),
    );
    const made = [
      await kit.reserve('acc_a', id, 'p1', 1, 'same'),
      await kit.reserve('acc_b', id, 'p1', 1, 'same'),
      await kit.reserve('acc_a', id, 'p1_x', 1, 'same'),
      // Fields run together differently: (p1, acc_a, "x_same") against (p1_x, acc_a, "same") above.
      await kit.reserve('acc_a', id, 'p1', 1, 'x_same'),
      await kit.reserve('acc_a_', id, 'p1', 1, 'same'),
    ];
    expect(made.map((r) => r.status)).toEqual([201, 201, 201, 201, 201]);
    expect(new Set(made.map((r) => r.body.reservationId)).size).toBe(5);
    expect(new Set(made.map((r) => r.body.orderId)).size).toBe(5);
  });
});
