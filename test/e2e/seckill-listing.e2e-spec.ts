import { activityBody, activityId, seckillKit, type SeckillKit } from '../support/seckill';
import { useAppOnOwnRedis } from '../support/test-app';

const ctx = useAppOnOwnRedis({ RATE_LIMIT_ENABLED: 'false' });
let kit: SeckillKit;
beforeAll(() => (kit = seckillKit(ctx.t)));

const N = 30;
interface Page {
  page: number;
  size: number;
  total: number;
  items: { productId: string; available: number; soldOut: boolean }[];
}
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe('seckill listing', () => {
  let id: string;
  const ids = Array.from({ length: N }, (_, i) => `p${String(i).padStart(2, '0')}`);
  const page = async (account: string, p: number, size: number): Promise<Page> => {
    const res = await kit.user(account).get(`/seckill/activities/${id}/products?page=${p}&size=${size}`);
    expect(res.status).toBe(200);
    return res.body as Page;
  };
  const allPages = async (account: string, size: number) => {
    const out: string[] = [];
    for (let p = 1; p <= Math.ceil(N / size) + 1; p++) out.push(...(await page(account, p, size)).items.map((x) => x.productId));
    return out;
  };

  beforeAll(async () => {
    id = activityId('list');
    await kit.create(
      activityBody(
        id,
        ids.map((productId, i) => ({ productId, stock: 5 + i, shards: 1 + (i % 3) })),
      ),
    );
  });

  it('pages cover every product exactly once, in one order per visitor whatever the page size', async () => {
    const by8 = await allPages('acc_v1', 8);
    expect([...by8].sort()).toEqual(ids);
    expect(await allPages('acc_v1', 7)).toEqual(by8);
    expect((await page('acc_v1', 1, 50)).items.map((x) => x.productId)).toEqual(by8);
    const last = await page('acc_v1', 4, 8);
    expect({ total: last.total, n: last.items.length }).toEqual({ total: N, n: 6 });
    expect((await page('acc_v1', 5, 8)).items).toEqual([]);
  });

  it('the same visitor gets the same order on a later call (after the cache has expired)', async () => {
    const first = (await page('acc_v2', 1, 50)).items.map((x) => x.productId);
    await sleep(2300);
    const again = await page('acc_v2', 1, 50);
    expect(again.items.map((x) => x.productId)).toEqual(first);
  });

  it('two visitors get different orders', async () => {
    const a = (await page('acc_v3', 1, 50)).items.map((x) => x.productId);
    const b = (await page('acc_v4', 1, 50)).items.map((x) => x.productId);
    expect([...a].sort()).toEqual([...b].sort());
    expect(a).not.toEqual(b);
    // Not merely a rotation either: the first page of each differs.
    expect(a.slice(0, 8)).not.toEqual(b.slice(0, 8));
  });

  it('available drops after a reservation within the cache window (may be stale before)', async () => {
    const target = 'p07'; // 12 units, 2 shards
    const before = (await page('acc_v5', 1, 50)).items.find((x) => x.productId === target)!;
    expect(before.available).toBe(12);
    const reservedAt = Date.now();
    expect((await kit.reserve('acc_buyer', id, target, 1)).status).toBe(201);
    await kit.expectInvariant(id);
    let seen = before.available;
    while (seen === before.available && Date.now() - reservedAt < 2500) {
      seen = (await page('acc_v5', 1, 50)).items.find((x) => x.productId === target)!.available;
      if (seen === before.available) await sleep(100);
    }
    expect({ available: seen, withinMs: Date.now() - reservedAt <= 2500 }).toEqual({ available: 11, withinMs: true });
  });

  it('a sold-out product is listed as such', async () => {
    const target = 'p00'; // 5 units, 1 shard
    for (let i = 0; i < 5; i++) expect((await kit.reserve(`acc_so${i}`, id, target)).status).toBe(201);
    await kit.expectInvariant(id);
    const fresh = (await page('acc_v6', 1, 50)).items.find((x) => x.productId === target)!;
    expect(fresh).toMatchObject({ available: 0, soldOut: true });
  });

  it('an unknown activity: 404', async () => {
    const res = await kit.user('acc_v1').get(`/seckill/activities/${activityId('none')}/products`);
    expect(res.status).toBe(404);
  });
});
