import { KeyBuilder } from '../../src/platform/redis/key-builder';
import { buyerIndexKey } from '../../src/features/seckill/seckill.keys';
import { waitUntil } from '../harness/redis-process';
import { activityBody, activityId, seckillKit, type SeckillKit } from '../support/seckill';
import { useAppOnOwnRedis } from '../support/test-app';

const ctx = useAppOnOwnRedis();
let kit: SeckillKit;
beforeAll(() => (kit = seckillKit(ctx.t)));

describe('flash sale over HTTP', () => {
  it('creates an activity, lists it, reserves, pays, cancels, and keeps the stock invariant', async () => {
    const id = activityId();
    const created = await kit.create(
      activityBody(
        id,
        [
          { productId: 'p1', stock: 3 },
          { productId: 'p2', stock: 2, shards: 2 },
        ],
        { perUserLimit: 2 },
      ),
    );
    expect(created.products.map((p) => p.available)).toEqual([3, 2]);
    // The same body again: 200, the same activity.
    expect((await kit.admin().post('/admin/seckill/activities', activityBody(id, [{ productId: 'p1', stock: 3 }]))).status).toBe(409);

    const list = await kit.user('acc_a').get('/seckill/activities');
    expect(list.status).toBe(200);
    expect(list.body.items.map((a: { activityId: string }) => a.activityId)).toContain(id);
    const page = await kit.user('acc_a').get(`/seckill/activities/${id}/products?page=1&size=8`);
    expect(page.status).toBe(200);
    expect(page.body.items).toHaveLength(2);

    const r1 = await kit.reserve('acc_a', id, 'p1', 1, 'req-1');
    expect(r1.status).toBe(201);
    expect(r1.body).toMatchObject({ state: 'RESERVED', quantity: 1, amount: 990 });
    const again = await kit.reserve('acc_a', id, 'p1', 1, 'req-1');
    expect(again.status).toBe(200);
    expect(again.body.reservationId).toBe(r1.body.reservationId);
    expect((await kit.reserve('acc_a', id, 'p1', 2, 'req-2')).body.error).toBe('LIMIT_EXCEEDED');

    expect(await kit.pay('acc_a', r1.body.orderId, 990)).toBe('PAID');
    await waitUntil(
      'the reservation to be sold',
      async () => (await kit.user('acc_a').get(`/seckill/reservations/${r1.body.reservationId}`)).body.state === 'SOLD',
      10_000,
    );

    const r2 = await kit.reserve('acc_b', id, 'p1', 2, 'x');
    expect(r2.status).toBe(201);
    const cancelled = await kit.user('acc_b').delete(`/seckill/reservations/${r2.body.reservationId}`);
    expect(cancelled.status).toBe(200);
    expect(cancelled.body.state).toBe('RELEASED');
    expect((await kit.user('acc_a').get(`/seckill/reservations/${r2.body.reservationId}`)).status).toBe(404);

    // Sharded product: 2 units over 2 shards; three buyers; the third is refused SOLD_OUT after fall-over.
    const s = await Promise.all(['acc_c', 'acc_d', 'acc_e'].map((acc) => kit.reserve(acc, id, 'p2', 1, 'y')));
    expect(s.map((r) => r.status).sort()).toEqual([201, 201, 409]);
    const stock = await kit.expectInvariant(id);
    expect(stock.get('p1')).toMatchObject({ available: 2, reserved: 0, sold: 1, returned: 2 });
    expect(stock.get('p2')).toMatchObject({ available: 0, reserved: 2, sold: 0 });
    expect((await kit.admin().get(`/admin/seckill/activities/${id}/check`)).body).toMatchObject({ ok: true, problems: [] });
  });

  it("a buyer's reservation index expires with the activity's live keys (never kept for good)", async () => {
    const id = activityId('ttl');
    await kit.create(activityBody(id, [{ productId: 'p1', stock: 2 }]));
    expect((await kit.reserve('acc_ttl', id, 'p1', 1, 'r1')).status).toBe(201);
    const ttl = await ctx.raw.pttl(buyerIndexKey(ctx.t.app.get(KeyBuilder), 'acc_ttl'));
    expect(ttl).toBeGreaterThan(3600_000);
  });
});
