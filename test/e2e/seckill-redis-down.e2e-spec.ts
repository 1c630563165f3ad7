import { waitUntil } from '../harness/redis-process';
import { activityBody, activityId, seckillKit, type SeckillKit } from '../support/seckill';
import { useAppOnOwnRedis } from '../support/test-app';

const ctx = useAppOnOwnRedis({ RATE_LIMIT_ENABLED: 'false' });
let kit: SeckillKit;
beforeAll(() => (kit = seckillKit(ctx.t)));

/** A call's status and how long it took; supertest's own timeout turns a hang into a failure. */
async function timed(call: () => PromiseLike<{ status: number; body: { error?: string } }>) {
  const t0 = Date.now();
  const res = await call();
  return { status: res.status, error: res.body?.error, ms: Date.now() - t0 };
}

describe('seckill with Redis down', () => {
  let id: string;
  const reserve = (account: string, requestId: string) => () => kit.reserve(account, id, 'p1', 1, requestId).timeout(8000);
  const listing = (account: string, page: number) => () => kit.user(account).get(`/seckill/activities/${id}/products?page=${page}&size=1`).timeout(8000);

  beforeAll(async () => {
    id = activityId('down');
    await kit.create(
      activityBody(id, [
        { productId: 'p1', stock: 10, shards: 2 },
        { productId: 'p2', stock: 10 },
        { productId: 'p3', stock: 10 },
      ]),
    );
    // The activity is known to the app (its catalog) before Redis goes.
    expect((await kit.reserve('acc_warm', id, 'p1')).status).toBe(201);
    await kit.expectInvariant(id);
  });

  it.each([
    ['stopped', 'stop'],
    ['frozen (SIGSTOP)', 'freeze'],
  ])('Redis %s: reservation and a cold listing page answer a prompt 503; afterwards both work again', async (_what, how) => {
    const tag = how;
    if (how === 'stop') await ctx.redis.stop();
    else process.kill(ctx.redis.pid!, 'SIGSTOP');
    try {
      const results = [await timed(reserve(`acc_${tag}_1`, 'r1')), await timed(listing(`acc_${tag}_cold`, 2)), await timed(listing(`acc_${tag}_cold`, 3))];
      const concurrent = await Promise.all([1, 2, 3, 4, 5].map((i) => timed(reserve(`acc_${tag}_c${i}`, 'r1'))));
      for (const r of [...results, ...concurrent]) {
        expect({ status: r.status, prompt: r.ms < 3000 }).toEqual({ status: 503, prompt: true });
      }
    } finally {
      if (how === 'stop') await ctx.redis.start();
      else process.kill(ctx.redis.pid!, 'SIGCONT');
    }
    await waitUntil('reservations to work again', async () => (await kit.reserve(`acc_${tag}_after`, id, 'p1', 1, 'r-after')).status === 201, 15_000, 200);
    // The first buyer's 503 may hide a reservation: a frozen Redis runs the script it had already received once it
    // resumes (no order was made for it). Their retry (the same requestId) answers it with its order (200), or makes it
    // now (201) when the script never ran; left alone, the safety net's sweep would give its unit back.
    const retried = await kit.reserve(`acc_${tag}_1`, id, 'p1', 1, 'r1');
    expect([200, 201]).toContain(retried.status);
    expect((await kit.open(`acc_${tag}_1`, retried.body.orderId)).body.status).toBe('CREATED');
    expect((await kit.user(`acc_${tag}_1`).get('/seckill/reservations')).body.items).toHaveLength(1);
    const page = await kit.user(`acc_${tag}_cold`).get(`/seckill/activities/${id}/products?page=2&size=1`);
    expect(page.status).toBe(200);
    expect(page.body.items).toHaveLength(1);
    // Nothing was taken by the other refused requests (they never reached the script); the invariant holds.
    for (let i = 1; i <= 5; i++) expect((await kit.user(`acc_${tag}_c${i}`).get('/seckill/reservations')).body.items).toEqual([]);
    await kit.expectInvariant(id);
  });

  it('the stock after both outages: the warm-up, the two later reservations and the two retried ones, nothing else', async () => {
    const p1 = (await kit.expectInvariant(id)).get('p1')!;
    expect(p1).toMatchObject({ available: 5, reserved: 5, sold: 0 });
  });
});
