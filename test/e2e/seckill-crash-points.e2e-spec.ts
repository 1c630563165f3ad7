import { rawConnection, waitUntil } from '../harness/redis-process';
import { randomPrefix } from '../harness/redis-server';
import { expectInvariants } from '../support/invariants';
import { activityBody, activityId } from '../support/seckill';
import { diedAtCrashPoint, type ServiceProcess, useServicesOnOwnRedis } from '../support/service-process';
import { CREDS, merchantHeaders, userToken } from '../support/test-app';

/**
 * The reservation sequences killed (SIGKILL) at every step boundary of the built service (dist/main.js: run
 * `npx nest build` first), then a fresh instance on the same Redis: reserve (units taken → order and buyer index),
 * a reservation over several shards (claim → each part → order), and its settling (each part → the master record).
 * Each converges, left alone, within the pay window + SECKILL_SAFETY_NET_GRACE_SECONDS + one sweep
 * (SECKILL_SAFETY_NET_SWEEP_MS): the test moves the due entries to now instead of waiting the pay window out, then
 * gives the net 10 s. Afterwards: initial = available + reserved + sold, nothing reserved, and the reservation's
 * order (past its due time) CLOSED, so it can never be paid. Retried instead, the request answers one reservation
 * holding exactly its quantity.
 */

const ADMIN = { 'x-admin-key': CREDS.adminKey, 'content-type': 'application/json' };
const ENV = { SECKILL_SAFETY_NET_GRACE_SECONDS: '5', SECKILL_SAFETY_NET_SWEEP_MS: '200', SECKILL_SOLD_OUT_MEMORY_MS: '0' };
const BUYER = 'acc_crash';

const services = useServicesOnOwnRedis();
const start = (prefix: string, crashAt?: string) => services.start(prefix, crashAt, ENV);

const json = async (r: Response) => ({ status: r.status, body: (await r.json().catch(() => ({}))) as Record<string, unknown> });
const reserve = (svc: ServiceProcess, id: string, quantity: number, requestId: string) =>
  svc
    .call(`/seckill/activities/${id}/products/p/reservations`, {
      method: 'POST',
      headers: { authorization: `Bearer ${userToken(BUYER)}`, 'content-type': 'application/json' },
      body: JSON.stringify({ quantity, requestId }),
    })
    .then(json);
const stockOf = async (svc: ServiceProcess, id: string) =>
  ((await json(await svc.call(`/admin/seckill/activities/${id}`, { headers: ADMIN }))).body.products as Record<string, number>[])[0];
const orderOf = async (svc: ServiceProcess, merchantOrderNo: string) => {
  const path = `/merchant/orders/${merchantOrderNo}`;
  return json(await svc.call(path, { headers: merchantHeaders('GET', path, '') }));
};

/** An open sale of product p: 6 units over 3 shards (2 each), a buyer may hold 5; the other shards emptied of none. */
async function sale(svc: ServiceProcess) {
  const id = activityId('crash');
  const body = activityBody(id, [{ productId: 'p', stock: 6, shards: 3 }], { perUserLimit: 5, payWindowMinutes: 1 });
  expect((await json(await svc.call('/admin/seckill/activities', { method: 'POST', headers: ADMIN, body: JSON.stringify(body) }))).status).toBe(201);
  return id;
}

/** Makes every due entry of the prefix due now (the pay window passed), and waits for the net to empty the due sets. */
async function netSettles(prefix: string) {
  const raw = rawConnection(services.redis);
  try {
    const dueKeys = await raw.keys(`${prefix}:seckill:*:due`);
    for (const k of dueKeys) for (const m of await raw.zrange(k, '0', '-1')) await raw.zadd(k, 'XX', '0', m);
    await waitUntil(
      'the safety net to settle every due entry',
      async () => {
        for (const k of dueKeys) if ((await raw.zcard(k)) > 0) return 'not yet';
        return true;
      },
      10_000,
      50,
    );
  } finally {
    raw.disconnect();
  }
}

async function expectConverged(svc: ServiceProcess, prefix: string, id: string, rsvId: string | undefined) {
  const raw = rawConnection(services.redis);
  try {
    // Every module's law over the whole deployment: stock, money, and orders past expiry (none is, yet).
    await expectInvariants({ nodes: raw, prefix, base: svc.base });
  } finally {
    raw.disconnect();
  }
  const s = await stockOf(svc, id);
  expect(s.available + s.reserved + s.sold).toBe(s.stock);
  expect(s.reserved).toBe(0);
  expect(s.available).toBe(6);
  if (rsvId) {
    const order = await orderOf(svc, rsvId);
    // Made (or made closed by the net) and closed: nothing can pay it.
    expect({ status: order.status, state: order.body.status }).toEqual({ status: 200, state: 'CLOSED' });
  }
}

/** The reserve boundaries, each with a quantity that reaches it (5: over several shards). */
const RESERVE_POINTS: [string, number][] = [
  ['seckill.reserve.after-take', 1],
  ['seckill.reserve.after-index', 1],
  ['seckill.reserve.after-claim', 5],
  ['seckill.reserve.after-part', 5],
];

/** A sale on an instance that dies at `point` while reserving `quantity`, and a fresh instance on the same Redis. */
async function reserveKilledAt(point: string, quantity: number) {
  const prefix = randomPrefix();
  const doomed = await start(prefix, point);
  const id = await sale(doomed);
  await reserve(doomed, id, quantity, 'tap').catch(() => null);
  await diedAtCrashPoint(doomed, point);
  return { prefix, id, fresh: await start(prefix) };
}

describe('seckill crash points: a reservation killed at each step boundary converges', () => {
  it.each(RESERVE_POINTS)(
    '%s (quantity %i), left alone: the safety net gives every unit back once and closes its order',
    async (point, quantity) => {
      const { prefix, id, fresh } = await reserveKilledAt(point, quantity);
      const before = await stockOf(fresh, id);
      expect(before.reserved + before.available).toBe(6);
      await netSettles(prefix);
      const rsvId = await idOf(id);
      await expectConverged(fresh, prefix, id, rsvId);
    },
    60_000,
  );

  it.each(RESERVE_POINTS)(
    '%s (quantity %i), retried on a fresh instance: one reservation of exactly its quantity; cancelled, every unit back',
    async (point, quantity) => {
      const { prefix, id, fresh } = await reserveKilledAt(point, quantity);
      const again = await reserve(fresh, id, quantity, 'tap');
      expect([again.status, again.body.quantity, again.body.state]).toEqual([expect.any(Number), quantity, 'RESERVED']);
      expect([200, 201]).toContain(again.status);
      expect(await stockOf(fresh, id)).toMatchObject({ reserved: quantity, available: 6 - quantity });
      // The buyer can pay at once: the answer's order id opens its order (stored now, at its first use).
      const opened = await json(await fresh.call(`/orders/${again.body.orderId as string}`, { headers: { authorization: `Bearer ${userToken(BUYER)}` } }));
      expect([opened.status, opened.body.status, opened.body.amount]).toEqual([200, 'CREATED', 990 * quantity]);
      expect((await orderOf(fresh, again.body.reservationId as string)).body).toMatchObject({ orderId: again.body.orderId, status: 'CREATED' });
      const cancel = await json(
        await fresh.call(`/seckill/reservations/${again.body.reservationId as string}`, {
          method: 'DELETE',
          headers: { authorization: `Bearer ${userToken(BUYER)}` },
        }),
      );
      expect([cancel.status, cancel.body.state]).toEqual([200, 'RELEASED']);
      await netSettles(prefix);
      await expectConverged(fresh, prefix, id, again.body.reservationId as string);
    },
    60_000,
  );

  it('seckill.settle.after-part: a cancel of a reservation over three shards killed after its first part; the next cancel, or the net, finishes it once', async () => {
    const prefix = randomPrefix();
    const doomed = await start(prefix, 'seckill.settle.after-part');
    const id = await sale(doomed);
    const r = await reserve(doomed, id, 5, 'tap');
    expect([r.status, r.body.quantity]).toEqual([201, 5]);
    const rsvPath = `/seckill/reservations/${r.body.reservationId as string}`;
    await doomed.call(rsvPath, { method: 'DELETE', headers: { authorization: `Bearer ${userToken(BUYER)}` } }).catch(() => null);
    await diedAtCrashPoint(doomed, 'seckill.settle.after-part');
    // Half settled, read in Redis before any instance runs (a fresh one's consumers may finish it at once from the
    // order.closed event the close left): its order closed, one part back, the rest still held.
    const raw = rawConnection(services.redis);
    let held = 0;
    try {
      for (const k of await raw.keys(`${prefix}:seckill:*stock*`)) held += Number((await raw.hget(k, 'reserved')) ?? 0);
    } finally {
      raw.disconnect();
    }
    expect(held).toBeGreaterThan(0);
    expect(held).toBeLessThan(5);
    const fresh = await start(prefix);
    const cancel = await json(await fresh.call(rsvPath, { method: 'DELETE', headers: { authorization: `Bearer ${userToken(BUYER)}` } }));
    expect([cancel.status, cancel.body.state, cancel.body.quantity]).toEqual([200, 'RELEASED', 5]);
    await netSettles(prefix);
    await expectConverged(fresh, prefix, id, r.body.reservationId as string);
    expect((await stockOf(fresh, id)).returned).toBe(5);
  }, 60_000);
});

describe('seckill crash points: an unpaid reservation expiring through the safety net', () => {
  it('seckill.settle.after-close: the sweep killed after closing the order, before the units; the next sweep (or the order.closed event) gives them back once', async () => {
    const prefix = randomPrefix();
    const doomed = await start(prefix, 'seckill.settle.after-close');
    const id = await sale(doomed);
    const r = await reserve(doomed, id, 1, 'tap');
    expect([r.status, r.body.state]).toEqual([201, 'RESERVED']);
    // Its pay window passed: the due entry, the order's only expiry, comes due and the doomed instance's sweep takes it.
    const raw = rawConnection(services.redis);
    try {
      for (const k of await raw.keys(`${prefix}:seckill:*:due`)) for (const m of await raw.zrange(k, '0', '-1')) await raw.zadd(k, 'XX', '0', m);
      expect(await raw.keys(`${prefix}:delay-queue:*order-expiry*:payload`)).toEqual([]);
    } finally {
      raw.disconnect();
    }
    await diedAtCrashPoint(doomed, 'seckill.settle.after-close');
    const fresh = await start(prefix);
    expect((await orderOf(fresh, r.body.reservationId as string)).body).toMatchObject({ status: 'CLOSED' });
    await netSettles(prefix);
    await expectConverged(fresh, prefix, id, r.body.reservationId as string);
    expect((await stockOf(fresh, id)).returned).toBe(1);
  }, 60_000);
});

/** The buyer's reservation id of the sale (from the reservation records: the buyer's index may not have it). */
async function idOf(id: string): Promise<string | undefined> {
  const raw = rawConnection(services.redis);
  try {
    for (const k of await raw.keys(`*:seckill:{p:${id}:p:*}:rsv`)) {
      const ids = await raw.hkeys(k);
      if (ids.length) return ids[0];
    }
    return undefined;
  } finally {
    raw.disconnect();
  }
}
