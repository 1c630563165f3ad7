import { randomPrefix, type RedisServerHandle, startRedisServer } from '../harness/redis-server';
import { activityBody, activityId } from '../support/seckill';
import { type ServiceProcess, startServiceProcess } from '../support/service-process';
import { CREDS, userToken } from '../support/test-app';

/**
 * Many requests taken over several shards at once, on two instances of the built service (dist/main.js: run
 * `npx nest build` first) on one Redis: they make progress (exactly as many succeed as the stock can serve), a
 * SOLD_OUT always says what is left and that is less than the quantity asked, and the stock adds up:
 * initial = available + reserved + sold.
 */

const ADMIN = { 'x-admin-key': CREDS.adminKey, 'content-type': 'application/json' };

let redis: RedisServerHandle;
let instances: ServiceProcess[] = [];
beforeAll(async () => {
  redis = await startRedisServer();
  const prefix = randomPrefix();
  instances = await Promise.all([0, 1].map(() => startServiceProcess(redis.url, prefix)));
}, 60_000);
afterAll(async () => {
  await Promise.all(instances.map((s) => s.kill()));
  await redis?.destroy();
});

type Answer = { status: number; body: Record<string, unknown> };
const json = async (r: Response): Promise<Answer> => ({ status: r.status, body: (await r.json().catch(() => ({}))) as Record<string, unknown> });
const reserve = (i: number, id: string, buyer: string, quantity: number) =>
  instances[i % 2]
    .call(`/seckill/activities/${id}/products/p/reservations`, {
      method: 'POST',
      headers: { authorization: `Bearer ${userToken(buyer)}`, 'content-type': 'application/json' },
      body: JSON.stringify({ quantity, requestId: 'r' }),
    })
    .then(json);
const cancel = (i: number, buyer: string, rsvId: string) =>
  instances[i % 2].call(`/seckill/reservations/${rsvId}`, { method: 'DELETE', headers: { authorization: `Bearer ${userToken(buyer)}` } }).then(json);
const stockOf = async (id: string) =>
  ((await json(await instances[0].call(`/admin/seckill/activities/${id}`, { headers: ADMIN }))).body.products as Record<string, number>[])[0];

/** An open sale of product p: `stock` units over `shards` shards, a buyer may hold 10. */
async function sale(stock: number, shards: number) {
  const id = activityId('gather');
  const body = activityBody(id, [{ productId: 'p', stock, shards }], { perUserLimit: 10 });
  expect((await json(await instances[0].call('/admin/seckill/activities', { method: 'POST', headers: ADMIN, body: JSON.stringify(body) }))).status).toBe(201);
  return id;
}

/** Exactly `served` answers 201; every other one SOLD_OUT with less than `quantity` available; the stock adds up. */
async function expectServed(id: string, answers: Answer[], quantity: number, served: number, initial: number) {
  const outcomes = answers.map((a) => (a.status === 201 ? 'RESERVED' : `${a.status} ${String(a.body.error)}`));
  expect(outcomes.filter((o) => o === 'RESERVED')).toHaveLength(served);
  expect(outcomes.filter((o) => o !== 'RESERVED')).toEqual(Array(answers.length - served).fill('409 SOLD_OUT'));
  const available = answers.filter((a) => a.status === 409).map((a) => (a.body.details as { available: number }).available);
  expect(available.filter((n) => n >= quantity)).toEqual([]);
  const s = await stockOf(id);
  expect(s.available + s.reserved + s.sold).toBe(initial);
  expect(s).toMatchObject({ stock: initial, reserved: served * quantity, available: initial - served * quantity });
}

describe('seckill: concurrent requests taken over several shards make progress', () => {
  it.each([1, 2, 3, 4, 5])(
    'run %i: 20 buyers at once over two instances, 3 each, of 10 units over 5 shards: exactly 3 reserve, the rest SOLD_OUT with under 3 left',
    async () => {
      const id = await sale(10, 5);
      const buyers = Array.from({ length: 20 }, (_, k) => `acc_g${k}_${id}`);
      const answers = await Promise.all(buyers.map((b, k) => reserve(k, id, b, 3)));
      await expectServed(id, answers, 3, 3, 10);
    },
    60_000,
  );

  it.each([1, 2, 3])(
    'run %i: after reservations cancelled on every shard, 3 buyers at once asking for all 10: exactly one gets them',
    async () => {
      const id = await sale(10, 5);
      // Single units reserved and cancelled by several buyers: the stock comes back to each shard it was taken from.
      const early = Array.from({ length: 6 }, (_, k) => `acc_e${k}_${id}`);
      const taken = await Promise.all(early.map((b, k) => reserve(k, id, b, 1)));
      expect(taken.map((t) => t.status)).toEqual(Array(6).fill(201));
      const cancelled = await Promise.all(early.map((b, k) => cancel(k, b, taken[k].body.reservationId as string)));
      expect(cancelled.map((c) => c.status)).toEqual(Array(6).fill(200));
      const buyers = [0, 1, 2].map((k) => `acc_w${k}_${id}`);
      const answers = await Promise.all(buyers.map((b, k) => reserve(k, id, b, 10)));
      await expectServed(id, answers, 10, 1, 10);
    },
    60_000,
  );
});
