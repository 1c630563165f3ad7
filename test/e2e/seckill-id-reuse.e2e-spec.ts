import { GEN_IDS, reservationIdFor } from '../../src/features/seckill/seckill.keys';
import { waitUntil } from '../harness/redis-process';
import { activityBody, activityId, seckillKit, type SeckillKit } from '../support/seckill';
import { useAppOnOwnRedis } from '../support/test-app';

const ctx = useAppOnOwnRedis();
let kit: SeckillKit;
beforeAll(() => (kit = seckillKit(ctx.t)));

/** Every key of the activity, as the live retention leaves it once it has run out (the keys expire; orders stay 90 days). */
async function expireActivityKeys(id: string, accounts: string[]): Promise<void> {
  const patterns = [`*seckill:{a:${id}}:*`, `*seckill:{p:${id}:*`, ...accounts.map((a) => `*seckill:{u:${a}}:*`)];
  for (const match of patterns) {
    const keys = await ctx.raw.keys(match);
    if (keys.length) await ctx.raw.del(...keys);
  }
}

describe('an activity id used again after its live keys expired', () => {
  it.each([1, 3])('never hands a unit out against the earlier sale’s paid order (%i shard(s))', async (shards) => {
    const id = activityId('reuse');
    const body = () => activityBody(id, [{ productId: 'p1', stock: 3, shards }]);
    await kit.create(body());
    const first = await kit.reserve('acc_reuse', id, 'p1', 1, 'req-1');
    expect(first.status).toBe(201);
    expect(await kit.pay('acc_reuse', first.body.orderId, 990)).toBe('PAID');
    await waitUntil(
      'the reservation to be sold',
      async () => (await kit.user('acc_reuse').get(`/seckill/reservations/${first.body.reservationId}`)).body.state === 'SOLD',
      10_000,
    );

    await expireActivityKeys(id, ['acc_reuse']);
    // Ops load next week's sale under the same id (the same products and price).
    const again = await kit.admin().post('/admin/seckill/activities', body());
    // Refusing the id (as rains do) is an acceptable answer; accepting it must not tie the new sale to the old orders.
    if (again.status !== 409) {
      expect(again.status).toBe(201);
      const second = await kit.reserve('acc_reuse', id, 'p1', 1, 'req-1');
      expect(second.status).toBe(201);
      const order = await kit.user('acc_reuse').get(`/orders/${second.body.orderId}`);
      // Seen: the new reservation answers the earlier sale's order, already PAID: the safety net then makes it SOLD
      // without the buyer paying for it.
      expect({ orderId: second.body.orderId, status: order.body.status }).not.toEqual({ orderId: first.body.orderId, status: 'PAID' });
      expect(order.body.status).not.toBe('PAID');
    }
  });

  it('an activity recorded before reservation ids carried the load (no `ids`) keeps its ids: a request retried across the deploy finds its reservation', async () => {
    const id = activityId('before');
    await kit.create(activityBody(id, [{ productId: 'p1', stock: 3 }]));
    const a = await kit.store.activity(id);
    expect(a?.ids).toBe(GEN_IDS);
    const { ids: _ids, ...before } = a!;
    await kit.store.saveActivity(before, before.endsAt + 86_400_000, false);
    const r = await kit.reserve('acc_before', id, 'p1', 1, 'req-b');
    expect(r.status).toBe(201);
    expect(r.body.reservationId).toBe(reservationIdFor(id, 'p1', 'acc_before', 'req-b'));
    // And one loaded now: the load's generation is part of the id.
    const now = activityId('now');
    await kit.create(activityBody(now, [{ productId: 'p1', stock: 3 }]));
    const n = await kit.reserve('acc_before', now, 'p1', 1, 'req-b');
    expect(n.body.reservationId).toBe(reservationIdFor(now, 'p1', 'acc_before', 'req-b', (await kit.store.activity(now))!.gen));
    expect(n.body.reservationId).not.toBe(reservationIdFor(now, 'p1', 'acc_before', 'req-b'));
  });
});
