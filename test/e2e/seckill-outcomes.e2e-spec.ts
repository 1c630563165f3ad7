import { EXPIRY_QUEUE } from '../../src/features/orders/order-queues';
import { newOrderId } from '../../src/features/orders/order.keys';
import { productTopic } from '../../src/features/seckill/sold-out-memory';
import { homeOf } from '../../src/engines/sharded-pool/home';
import type { OrderEvent } from '../../src/features/orders/order-event';
import { OrdersService } from '../../src/features/orders/orders.service';
import { RedisUnavailableError } from '../../src/platform/redis/redis-unavailable.error';
import { ReservationsService } from '../../src/features/seckill/reservations.service';
import { SAFETY_NET_QUEUE } from '../../src/features/seckill/safety-net';
import { activityIndexKey } from '../../src/features/seckill/seckill.keys';
import { KeyBuilder } from '../../src/platform/redis/key-builder';
import { rawConnection, waitUntil } from '../harness/redis-process';
import { activityBody, activityId, seckillKit, type SeckillKit } from '../support/seckill';
import { CREDS, useAppOnOwnRedis } from '../support/test-app';
import { orderIdOf } from '../support/orders-fixture';

/**
 * What settles a reservation, on a real Redis: an order creation that fails after the script (the units back at
 * once, the error answered), a process that dies between the script and the order (the safety net's sweep finds
 * the reservation in its shard's due set, releases the units when it comes due and closes the order, so it can never
 * be paid), a fall-over claim whose reservation was never taken (freed by the sweep), and the order events (paid →
 * SOLD, closed by the merchant or by expiry → RELEASED), delivered twice, out of order, or for another merchant's
 * order. After every test, each product's stock still adds up: initial = available + reserved + sold.
 */

const ctx = useAppOnOwnRedis({
  RATE_LIMIT_ENABLED: 'false',
  SECKILL_SAFETY_NET_GRACE_SECONDS: '5',
  SECKILL_SAFETY_NET_SWEEP_MS: '200',
  CHANNEL_LATENCY_MS: '2',
});
let kit: SeckillKit;
const touched: string[] = [];
beforeAll(() => (kit = seckillKit(ctx.t)));
afterEach(async () => {
  jest.restoreAllMocks();
  for (const id of touched.splice(0)) await kit.expectInvariant(id);
});

async function sale(products: Parameters<typeof activityBody>[1], over: Parameters<typeof activityBody>[2] = {}) {
  const id = activityId('o');
  await kit.create(activityBody(id, products, { payWindowMinutes: 1, ...over }));
  touched.push(id);
  return id;
}

const stateOf = async (account: string, rsvId: string) => (await kit.user(account).get(`/seckill/reservations/${rsvId}`)).body.state as string;
const waitState = (account: string, rsvId: string, state: string) =>
  waitUntil(`${rsvId} to be ${state}`, async () => (await stateOf(account, rsvId)) === state || 'not yet', 10_000, 20);
/** Every member of the shard's due set (reservations and claims), soonest first. */
const dueOf = (k: Parameters<SeckillKit['store']['due']>[0]) => kit.store.due(k, Number.MAX_SAFE_INTEGER, 1000);
/** Makes a due-set member come due now (rather than a minute and the grace after it was made). */
async function dueNow(k: { due: string }, member: string): Promise<void> {
  const raw = rawConnection(ctx.redis);
  try {
    expect(await raw.zadd(k.due, 'XX', 'CH', 0, member)).toBe(1);
  } finally {
    raw.disconnect();
  }
}
const orderStatus = async (orderId: string) => (await kit.orders.findById(orderId))?.status;
/** Pays, answering the plan's status or the refusal's code. */
const tryPay = (payer: string, orderId: string, amount: number) => kit.pay(payer, orderId, amount).catch((e: { code?: string }) => e.code ?? 'ERROR');

describe("a reservation's order: stored at its first use", () => {
  it('answered with the reservation, stored when its buyer first opens it, with the reservation’s times; a failing store is the error, retried', async () => {
    const id = await sale([{ productId: 'p', stock: 2 }]);
    const created = await kit.metric('orders_created_total');
    const r = await kit.reserve('acc_first', id, 'p', 1, 'req-first');
    expect(r.status).toBe(201);
    const orderId = r.body.orderId as string;
    // Nothing of the order is written by the reservation: the reservation's record and the buyer's index name it.
    expect(await kit.orders.findById(orderId)).toBeUndefined();
    expect(await kit.metric('orders_created_total')).toBe(created);
    expect((await kit.user('acc_first').get(`/seckill/reservations/${r.body.reservationId as string}`)).body.orderId).toBe(orderId);
    // Storing it fails (Redis unavailable, then anything else): the error is the answer, nothing changes, and the
    // next use stores it.
    jest
      .spyOn(OrdersService.prototype, 'createForBuyer')
      .mockRejectedValueOnce(new RedisUnavailableError())
      .mockRejectedValueOnce(new Error('orders exploded'));
    expect((await kit.open('acc_first', orderId)).status).toBe(503);
    expect((await kit.open('acc_first', orderId)).status).toBe(500);
    expect(await kit.orders.findById(orderId)).toBeUndefined();
    expect((await kit.stock(id)).get('p')).toMatchObject({ available: 1, reserved: 1 });
    const opened = await kit.open('acc_first', orderId);
    expect(opened.body).toMatchObject({ orderId, status: 'CREATED', amount: 990, expiresAt: r.body.expiresAt });
    expect(await kit.metric('orders_created_total')).toBe(created + 1);
    // It expires with its reservation (the reservation's due entry is its expiry): no expiry entry of its own.
    expect(await kit.queue.get(EXPIRY_QUEUE, orderId)).toBeNull();
    expect(await kit.pay('acc_first', orderId, 990)).toBe('PAID');
    await waitState('acc_first', r.body.reservationId as string, 'SOLD');
  });

  it('paid at once from the answer, without opening it first: the plan stores it', async () => {
    const id = await sale([{ productId: 'p', stock: 1 }]);
    const r = await kit.reserve('acc_quick', id, 'p');
    expect(await kit.pay('acc_quick', r.body.orderId as string, 990)).toBe('PAID');
    await waitState('acc_quick', r.body.reservationId as string, 'SOLD');
    expect((await kit.stock(id)).get('p')).toMatchObject({ available: 0, reserved: 0, sold: 1 });
  });

  it('a request made again after its earlier attempt over several shards was given back: the answer, the record and the index name one order id, which opens', async () => {
    const id = await sale([{ productId: 'p', stock: 4, shards: 2 }], { perUserLimit: 10 });
    const { keys } = await kit.shards(id, 'p');
    const buyer = 'acc_renew';
    const h = homeOf(buyer, 'p', 2);
    const topic = productTopic(id, 'p');
    const rsvId = await kit.reservationId(id, 'p', buyer, 'req-renew');
    const [atHome] = await kit.store.availableOn([keys[h]]);
    // Another buyer holds a unit of the home shard, so the request is claimed over both shards (order id X) ...
    const other = await kit.reservationId(id, 'p', 'acc_other', 'x');
    const base = { eligible: true, payWindowMs: 60_000 };
    expect((await kit.store.reserve(keys[h], { ...base, rsvId: other, account: 'acc_other', qty: 1, canFallOver: false })).outcome).toBe('RESERVED');
    const X = newOrderId(CREDS.merchantId, rsvId);
    expect((await kit.store.reserve(keys[h], { ...base, rsvId, account: buyer, qty: atHome, canFallOver: true, plan: [1 - h], orderId: X })).outcome).toBe(
      'CLAIM',
    );
    // ... its parts fall short and are given back, as takeParts does; then the home shard has the quantity again.
    await kit.store.release(keys[1 - h], rsvId, buyer, topic, true);
    await kit.store.release(keys[h], rsvId, buyer, topic, true);
    expect((await kit.store.record(keys[h], rsvId))?.f).toBe(1);
    await kit.store.release(keys[h], other, 'acc_other', topic);
    // The client makes the request again: a fresh attempt taken whole on the home shard.
    const r = await kit.reserve(buyer, id, 'p', atHome, 'req-renew');
    expect(r.status).toBe(201);
    const recorded = (await kit.store.record(keys[h], rsvId))?.o;
    expect({ answered: r.body.orderId, listed: (await kit.user(buyer).get(`/seckill/reservations/${rsvId}`)).body.orderId }).toEqual({
      answered: recorded,
      listed: recorded,
    });
    expect((await kit.open(buyer, r.body.orderId as string)).body).toMatchObject({ orderId: recorded, status: 'CREATED' });
  });

  it('another account, a made-up id and an id of another buyer’s reservation: 404, nothing stored', async () => {
    const id = await sale([{ productId: 'p', stock: 2 }]);
    const r = await kit.reserve('acc_mine', id, 'p');
    const other = await kit.reserve('acc_yours', id, 'p');
    for (const [account, orderId] of [
      ['acc_yours', r.body.orderId],
      ['acc_mine', other.body.orderId],
      ['acc_mine', `${(r.body.orderId as string).slice(0, 12)}0123456789abcdef`],
    ] as [string, string][]) {
      expect((await kit.open(account, orderId)).status).toBe(404);
      expect((await kit.user(account).post(`/orders/${orderId}/payment-plans`, { instructions: [{ method: 'quickpay', amount: 990 }] })).status).toBe(404);
    }
    expect(await kit.orders.findById(r.body.orderId as string)).toBeUndefined();
    expect(await kit.orders.findById(other.body.orderId as string)).toBeUndefined();
  });

  it('left alone, never opened: the safety net stores its order closed when the reservation expires, under the answered id, and it can never be paid', async () => {
    const id = await sale([{ productId: 'p', stock: 1 }]);
    const { keys } = await kit.shards(id, 'p');
    const r = await kit.reserve('acc_idle', id, 'p');
    const orderId = r.body.orderId as string;
    expect(await kit.orders.findById(orderId)).toBeUndefined();
    await dueNow(keys[0], r.body.reservationId as string);
    await waitState('acc_idle', r.body.reservationId as string, 'RELEASED');
    // One order for the reservation: the answered id, found by its number as well; stored closed, never payable.
    expect(await kit.orders.findById(orderId)).toMatchObject({ status: 'CLOSED', merchantOrderNo: r.body.reservationId });
    expect(await orderIdOf(kit.orders, CREDS.merchantId, r.body.reservationId as string)).toBe(orderId);
    expect(await tryPay('acc_idle', orderId, 990)).not.toBe('PAID');
    expect((await kit.stock(id)).get('p')).toMatchObject({ available: 1, reserved: 0, sold: 0, returned: 1 });
  });

  it('a released reservation’s order is stored closed: opening it shows CLOSED, paying it is refused', async () => {
    const id = await sale([{ productId: 'p', stock: 1 }]);
    const r = await kit.reserve('acc_gone', id, 'p');
    expect((await kit.user('acc_gone').delete(`/seckill/reservations/${r.body.reservationId as string}`)).body.state).toBe('RELEASED');
    expect((await kit.open('acc_gone', r.body.orderId as string)).body).toMatchObject({ status: 'CLOSED' });
    expect(await tryPay('acc_gone', r.body.orderId as string, 990)).not.toBe('PAID');
    expect((await kit.stock(id)).get('p')).toMatchObject({ available: 1, reserved: 0, sold: 0 });
  });
});

describe('the safety net', () => {
  it('a process killed between the script and the order: the sweep finds it in the due set, releases the units when due and closes the order', async () => {
    const id = await sale([{ productId: 'p', stock: 2 }], { perUserLimit: 2 });
    const { p, keys } = await kit.shards(id, 'p');
    const account = 'acc_killed';
    const rsvId = await kit.reservationId(id, 'p', account, 'req-k');
    const home = homeOf(account, 'p', 1);
    // What reserve() does before it dies: the script alone; no order, no buyer index, nothing scheduled.
    expect(
      (await kit.store.reserve(kit.store.shard(id, p, home), { rsvId, account, qty: 2, eligible: true, payWindowMs: 60_000, canFallOver: false })).outcome,
    ).toBe('RESERVED');
    expect((await kit.stock(id)).get('p')).toMatchObject({ available: 0, reserved: 2 });
    expect((await kit.reserve('acc_other', id, 'p')).status).toBe(409);
    expect(await orderStatus(await orderIdOf(kit.orders, CREDS.merchantId, rsvId))).toBeUndefined();
    expect(await kit.queue.get(SAFETY_NET_QUEUE, rsvId)).toBeNull();
    // The script put it in the shard's due set, in the same step that took the units.
    expect(await dueOf(keys[0])).toEqual([rsvId]);

    const before = await kit.metrics();
    // Not due yet (a minute and the grace away): sweeps, every 200 ms here, leave it alone.
    await new Promise((r) => setTimeout(r, 700));
    expect(await kit.store.record(keys[0], rsvId)).toMatchObject({ s: 'RESERVED' });
    // Due now rather than in 65 s.
    await dueNow(keys[0], rsvId);
    await waitUntil('the net to release the units', async () => (await kit.store.record(keys[0], rsvId))?.s === 'RELEASED' || 'not yet', 10_000, 20);
    expect((await kit.stock(id)).get('p')).toMatchObject({ available: 2, reserved: 0, sold: 0, returned: 2 });
    expect(await orderStatus(await orderIdOf(kit.orders, CREDS.merchantId, rsvId))).toBe('CLOSED');
    expect(await tryPay(account, await orderIdOf(kit.orders, CREDS.merchantId, rsvId), 1980)).not.toBe('PAID');
    expect((await kit.metrics()).seckill_safety_net_releases_total - (before.seckill_safety_net_releases_total ?? 0)).toBe(1);
    expect(await dueOf(keys[0])).toEqual([]);
  });

  it('reservations it cannot settle now do not hold up the others behind them, however many', async () => {
    const n = 250;
    const id = await sale([{ productId: 'p', stock: n }]);
    const { p, keys } = await kit.shards(id, 'p');
    const ids = await Promise.all(Array.from({ length: n }, (_, i) => kit.reservationId(id, 'p', `acc_q${i}`, 'req-q')));
    for (const [i, rsvId] of ids.entries()) {
      const r = await kit.store.reserve(kit.store.shard(id, p, 0), {
        rsvId,
        account: `acc_q${i}`,
        qty: 1,
        eligible: true,
        payWindowMs: 60_000,
        canFallOver: false,
      });
      expect(r.outcome).toBe('RESERVED');
    }
    // The first 150 (more than one read of the due set) cannot be settled: closing their orders fails.
    const stuck = new Set(ids.slice(0, 150));
    type CloseOrder = (this: unknown, ...args: unknown[]) => Promise<unknown>;
    const proto = ReservationsService.prototype as unknown as { closeOrder: CloseOrder };
    const closeOrder = proto.closeOrder;
    jest.spyOn(proto, 'closeOrder').mockImplementation(function (this: unknown, ...args: unknown[]) {
      if (stuck.has(args[2] as string)) return Promise.reject(new Error('the order is locked'));
      return closeOrder.apply(this, args);
    });
    // All due now, the stuck ones soonest.
    await ctx.raw.zadd(keys[0].due, 'XX', ...ids.flatMap((rsvId, i) => [i, rsvId]));
    const released = async () => (await Promise.all(ids.map((rsvId) => kit.store.record(keys[0], rsvId)))).filter((r) => r?.s === 'RELEASED').length;
    await waitUntil('the net to release the 100 behind the stuck ones', async () => (await released()) === n - stuck.size || 'not yet', 10_000, 50);
    for (const rsvId of stuck) expect(await kit.store.record(keys[0], rsvId)).toMatchObject({ s: 'RESERVED' });
    expect((await kit.stock(id)).get('p')).toMatchObject({ available: n - stuck.size, reserved: stuck.size, sold: 0 });
    // They stay due, for the next rounds.
    expect((await dueOf(keys[0])).length).toBe(stuck.size);
  });

  it('reaches activities past the first page of the index (a week can hold more than 1,000 activities)', async () => {
    const id = await sale([{ productId: 'p', stock: 1 }]);
    const { p, keys } = await kit.shards(id, 'p');
    const indexKey = activityIndexKey(ctx.t.app.get(KeyBuilder));
    // 1,000 other activities ending before this one: listed first, so this one is on the index's second page.
    const others = Array.from({ length: 1000 }, (_, i) => `${id}-other-${i}`);
    const soon = Date.now() + 1000;
    await ctx.raw.zadd(indexKey, ...others.flatMap((o) => [soon, o]));
    try {
      const rsvId = await kit.reservationId(id, 'p', 'acc_paged', 'req-p');
      const reserved = await kit.store.reserve(kit.store.shard(id, p, 0), {
        rsvId,
        account: 'acc_paged',
        qty: 1,
        eligible: true,
        payWindowMs: 60_000,
        canFallOver: false,
      });
      expect(reserved.outcome).toBe('RESERVED');
      await dueNow(keys[0], rsvId);
      await waitUntil('the net to release the units', async () => (await kit.store.record(keys[0], rsvId))?.s === 'RELEASED' || 'not yet', 15_000, 50);
      expect((await kit.stock(id)).get('p')).toMatchObject({ available: 1, reserved: 0 });
    } finally {
      await ctx.raw.zrem(indexKey, ...others);
    }
  });

  it('a process killed after a claim over several shards and before its parts: the sweep settles it whole, so the buyer may buy again', async () => {
    const id = await sale([{ productId: 'p', stock: 2, shards: 2 }], { perUserLimit: 1 });
    const { p, keys } = await kit.shards(id, 'p');
    const account = 'acc_claimed';
    const home = homeOf(account, 'p', 2);
    const k = kit.store.shard(id, p, home);
    // The home shard emptied by another buyer, then the script claims the unit there, naming the other shard; no part is taken.
    const filler = await kit.store.reserve(k, {
      rsvId: await kit.reservationId(id, 'p', 'acc_fill', 'f'),
      account: 'acc_fill',
      qty: 1,
      eligible: true,
      payWindowMs: 60_000,
      canFallOver: true,
    });
    expect(filler.outcome).toBe('RESERVED');
    const rsvId = await kit.reservationId(id, 'p', account, 'req-c');
    const claim = await kit.store.reserve(k, { rsvId, account, qty: 1, eligible: true, payWindowMs: 60_000, canFallOver: true, plan: [1 - home] });
    expect(claim).toMatchObject({ outcome: 'CLAIM', record: { s: 'RESERVED', q: 0, n: 1, h: home, p: String(1 - home) } });
    const member = `c|${rsvId}|${account}`;
    expect(await dueOf(keys[home])).toContain(member);
    // The claim holds the buyer's one unit: another request is over the limit.
    expect((await kit.reserve(account, id, 'p', 1, 'req-c2')).body.error).toBe('LIMIT_EXCEEDED');

    await dueNow(keys[home], member);
    await waitUntil('the net to free the claim', async () => !(await kit.store.hasClaim(k, rsvId)) || 'not yet', 10_000, 20);
    expect(await dueOf(keys[home])).not.toContain(member);
    expect(await kit.store.record(k, rsvId)).toMatchObject({ s: 'RELEASED' });
    // Its order was made unpayable (created closed), nothing was taken for it anywhere, and the buyer's limit is free again.
    expect(await orderStatus(await orderIdOf(kit.orders, CREDS.merchantId, rsvId))).toBe('CLOSED');
    expect((await kit.stock(id)).get('p')).toMatchObject({ available: 1, reserved: 1, sold: 0 });
    expect((await kit.reserve(account, id, 'p', 1, 'req-c3')).status).toBe(201);
  });

  it('a process killed after the parts of a reservation over several shards and before its order: the sweep gives back every part once', async () => {
    const id = await sale([{ productId: 'p', stock: 6, shards: 3 }], { perUserLimit: 5 });
    const { keys } = await kit.shards(id, 'p');
    const account = 'acc_parts';
    const home = homeOf(account, 'p', 3);
    const plan = [(home + 1) % 3, (home + 2) % 3];
    const rsvId = await kit.reservationId(id, 'p', account, 'req-r');
    const claim = await kit.store.reserve(keys[home], { rsvId, account, qty: 5, eligible: true, payWindowMs: 60_000, canFallOver: true, plan });
    expect(claim).toMatchObject({ outcome: 'CLAIM', record: { q: 2, n: 5 } });
    const e = claim.outcome === 'CLAIM' ? claim.record.e : 0;
    for (const [k, need, got] of [
      [plan[0], 3, 2],
      [plan[1], 1, 1],
    ]) {
      expect(await kit.store.take(keys[k], { rsvId, account, need, expiresAt: e, home, total: 5 })).toMatchObject({ outcome: 'TAKEN', units: got });
    }
    expect((await kit.stock(id)).get('p')).toMatchObject({ available: 1, reserved: 5 });
    // The parts come due with the claim (one expiry for the whole reservation).
    expect(await dueOf(keys[plan[0]])).toEqual([rsvId]);
    await dueNow(keys[plan[0]], rsvId);
    await waitUntil('the net to settle it', async () => (await kit.store.record(keys[home], rsvId))?.s === 'RELEASED' || 'not yet', 10_000, 20);
    for (const k of keys) expect(await kit.store.record(k, rsvId)).toMatchObject({ s: 'RELEASED' });
    expect(await kit.store.hasClaim(keys[home], rsvId)).toBe(false);
    expect(await orderStatus(await orderIdOf(kit.orders, CREDS.merchantId, rsvId))).toBe('CLOSED');
    await waitUntil('the due sets to be empty', async () => (await Promise.all(keys.map(dueOf))).flat().length === 0 || 'not yet', 10_000, 20);
    expect((await kit.stock(id)).get('p')).toMatchObject({ available: 6, reserved: 0, sold: 0, returned: 5 });
  });

  // A reservation made by an earlier release (its only safety net an entry of the former queue, no due-set entry) is
  // still settled: the sweep job drains the former queue, at the entry's due time, now that no processor consumes it.
  it('a reservation whose only net is an entry left in the former safety-net queue is released when the entry comes due', async () => {
    const id = await sale([{ productId: 'p', stock: 2 }], { perUserLimit: 2 });
    const r = await kit.reserve('acc_legacy', id, 'p', 2, 'req-l');
    expect(r.status).toBe(201);
    const rsvId = r.body.reservationId as string;
    const { keys } = await kit.shards(id, 'p');
    // As an earlier release left it: no due-set entry, an entry in the former queue instead.
    await kit.store.forgetDue(keys[0], rsvId);
    expect(await dueOf(keys[0])).toEqual([]);
    const loc = { activityId: id, productId: 'p', shard: 0, home: 0, accountId: 'acc_legacy', requestId: 'req-l' };
    // Not due yet: left alone.
    await kit.queue.schedule(SAFETY_NET_QUEUE, rsvId, { delayMs: 60_000 }, loc);
    await new Promise((res) => setTimeout(res, 700));
    expect(await stateOf('acc_legacy', rsvId)).toBe('RESERVED');
    expect((await kit.queue.get(SAFETY_NET_QUEUE, rsvId))?.state).toBe('pending');
    // Due: released (its order closed first), and the entry acknowledged.
    await kit.queue.reschedule(SAFETY_NET_QUEUE, rsvId, { dueAt: Date.now() });
    await waitState('acc_legacy', rsvId, 'RELEASED');
    await waitUntil('the entry to be acked', async () => (await kit.queue.get(SAFETY_NET_QUEUE, rsvId)) === null || 'not yet', 10_000, 20);
    expect(await orderStatus(r.body.orderId)).toBe('CLOSED');
    expect((await kit.stock(id)).get('p')).toMatchObject({ available: 2, reserved: 0, sold: 0, returned: 2 });
  });

  // Entries of the former safety-net queue (scheduled per reservation before the sweep) are still handled.
  it('a net entry for a paid reservation leaves it SOLD; one for a refused request finds nothing and changes nothing', async () => {
    const id = await sale([{ productId: 'p', stock: 1 }]);
    const r = await kit.reserve('acc_paid', id, 'p', 1, 'req-p');
    expect(r.status).toBe(201);
    expect(await kit.pay('acc_paid', r.body.orderId, 990)).toBe('PAID');
    await waitState('acc_paid', r.body.reservationId, 'SOLD');
    const loc = { activityId: id, productId: 'p', shard: 0, home: 0, accountId: 'acc_paid' };
    await kit.queue.schedule(SAFETY_NET_QUEUE, r.body.reservationId, { dueAt: Date.now() }, { ...loc, requestId: 'req-p' });
    const ghost = await kit.reservationId(id, 'p', 'acc_ghost', 'never');
    await kit.queue.schedule(SAFETY_NET_QUEUE, ghost, { dueAt: Date.now() }, { ...loc, accountId: 'acc_ghost', requestId: 'never' });
    await waitUntil(
      'both entries to be handled',
      async () => (await kit.queue.get(SAFETY_NET_QUEUE, r.body.reservationId)) === null && (await kit.queue.get(SAFETY_NET_QUEUE, ghost)) === null,
      10_000,
    );
    expect(await stateOf('acc_paid', r.body.reservationId)).toBe('SOLD');
    expect((await kit.stock(id)).get('p')).toMatchObject({ available: 0, reserved: 0, sold: 1 });
    expect(await orderStatus(await orderIdOf(kit.orders, CREDS.merchantId, ghost))).toBeUndefined();
  });
});

describe('outcomes from order events', () => {
  it('paid → SOLD; merchant close → RELEASED; expiry → RELEASED; each once', async () => {
    const id = await sale([{ productId: 'p', stock: 3 }]);
    const { keys } = await kit.shards(id, 'p');
    const [paid, closed, expired] = await Promise.all(['acc_e1', 'acc_e2', 'acc_e3'].map((acc) => kit.reserve(acc, id, 'p')));
    expect([paid.status, closed.status, expired.status]).toEqual([201, 201, 201]);
    // The order expires with its reservation, and its expiry is the reservation's due entry: no entry of its own.
    for (const [r, account] of [
      [paid, 'acc_e1'],
      [closed, 'acc_e2'],
      [expired, 'acc_e3'],
    ] as const) {
      expect((await kit.open(account, r.body.orderId)).status).toBe(200);
      expect((await kit.orders.findById(r.body.orderId))?.expiresAt).toBe(Date.parse(r.body.expiresAt));
      expect(await kit.queue.get(EXPIRY_QUEUE, r.body.orderId)).toBeNull();
    }
    expect(await kit.pay('acc_e1', paid.body.orderId, 990)).toBe('PAID');
    await kit.orders.close(CREDS.merchantId, closed.body.reservationId);
    await dueNow(keys[0], expired.body.reservationId);
    await waitState('acc_e1', paid.body.reservationId, 'SOLD');
    await waitState('acc_e2', closed.body.reservationId, 'RELEASED');
    await waitState('acc_e3', expired.body.reservationId, 'RELEASED');
    expect(await orderStatus(expired.body.orderId)).toBe('CLOSED');
    expect((await kit.stock(id)).get('p')).toMatchObject({ available: 2, reserved: 0, sold: 1, returned: 2 });
    expect(await tryPay('acc_e3', expired.body.orderId, 990)).not.toBe('PAID');
    // DELETE of a paid reservation: 409, nothing released.
    const del = await kit.user('acc_e1').delete(`/seckill/reservations/${paid.body.reservationId}`);
    expect([del.status, del.body.error]).toEqual([409, 'RESERVATION_PAID']);
    expect((await kit.stock(id)).get('p')).toMatchObject({ available: 2, sold: 1 });
    // What came back sells again, all of it and no more: 6 new buyers race for the 2 units.
    const again = await Promise.all(Array.from({ length: 6 }, (_, i) => kit.reserve(`acc_e_new${i}`, id, 'p')));
    expect(again.map((r) => r.status).sort()).toEqual([201, 201, 409, 409, 409, 409]);
    expect((await kit.expectInvariant(id)).get('p')).toMatchObject({ available: 0, reserved: 2, sold: 1 });
  });

  it('the same event twice, and closed before paid: units back once, a released reservation never sold', async () => {
    const id = await sale([{ productId: 'p', stock: 2 }]);
    const r = await kit.reserve('acc_dup', id, 'p');
    const rsvId = r.body.reservationId as string;
    expect((await kit.open('acc_dup', r.body.orderId)).status).toBe(200);
    await kit.orders.close(CREDS.merchantId, rsvId);
    await waitState('acc_dup', rsvId, 'RELEASED');
    const base: OrderEvent = {
      id: '1-0',
      stream: 'test',
      type: 'order.closed',
      at: Date.now(),
      orderId: r.body.orderId,
      merchantId: CREDS.merchantId,
      merchantOrderNo: rsvId,
      amount: 990,
      currency: 'CNY',
      status: 'CLOSED',
      version: 2,
      expiresAt: Date.now(),
      accountId: 'acc_dup',
    };
    const before = await kit.metrics();
    const release = jest.spyOn(kit.store, 'release');
    await kit.reservations.onEvent(base);
    await kit.reservations.onEvent(base);
    // Released already (by the first delivery): later ones run no script.
    expect(release).not.toHaveBeenCalled();
    // A paid event arriving after the close (out of order): refused, the units stay in stock.
    await kit.reservations.onEvent({ ...base, type: 'order.paid', status: 'PAID', version: 1 });
    const after = await kit.metrics();
    expect((after.seckill_released_total ?? 0) - (before.seckill_released_total ?? 0)).toBe(0);
    expect((after.seckill_sold_total ?? 0) - (before.seckill_sold_total ?? 0)).toBe(0);
    expect(await stateOf('acc_dup', rsvId)).toBe('RELEASED');
    expect((await kit.stock(id)).get('p')).toMatchObject({ available: 2, reserved: 0, sold: 0, returned: 1 });

    // Paid, then a stale closed event twice: it stays SOLD.
    const s = await kit.reserve('acc_dup2', id, 'p');
    expect(await kit.pay('acc_dup2', s.body.orderId, 990)).toBe('PAID');
    await waitState('acc_dup2', s.body.reservationId, 'SOLD');
    const stale = { ...base, orderId: s.body.orderId, merchantOrderNo: s.body.reservationId, accountId: 'acc_dup2' };
    await kit.reservations.onEvent(stale);
    await kit.reservations.onEvent({ ...stale, type: 'order.paid', status: 'PAID' });
    expect(await stateOf('acc_dup2', s.body.reservationId)).toBe('SOLD');
    expect((await kit.stock(id)).get('p')).toMatchObject({ available: 1, reserved: 0, sold: 1 });
  });

  it("another merchant's order under a reservation's number is ignored, from the stream and called directly", async () => {
    const id = await sale([{ productId: 'p', stock: 1 }]);
    const r = await kit.reserve('acc_x', id, 'p');
    const rsvId = r.body.reservationId as string;
    const before = await kit.metrics();
    // A real order of the other merchant with the same number and payer, paid and closed events on the stream.
    const { order } = await kit.orders.createForBuyer({
      merchantId: CREDS.otherMerchantId,
      merchantOrderNo: rsvId,
      amount: 990,
      currency: 'CNY',
      subject: 'Not a flash sale',
      expireMinutes: 1,
      payerAccountId: 'acc_x',
    });
    await kit.orders.close(CREDS.otherMerchantId, rsvId);
    const event: OrderEvent = {
      id: '1-0',
      stream: 'test',
      type: 'order.closed',
      at: Date.now(),
      orderId: order.orderId,
      merchantId: CREDS.otherMerchantId,
      merchantOrderNo: rsvId,
      amount: 990,
      currency: 'CNY',
      status: 'CLOSED',
      version: 2,
      expiresAt: Date.now(),
      accountId: 'acc_x',
    };
    await kit.reservations.onEvent(event);
    await kit.reservations.onEvent({ ...event, type: 'order.paid', status: 'PAID' });
    // The right merchant but another order id (not the reservation's): ignored too.
    await kit.reservations.onEvent({ ...event, merchantId: CREDS.merchantId });
    // Let the consumer see the real events of the other merchant's order.
    await new Promise((res) => setTimeout(res, 500));
    expect(await stateOf('acc_x', rsvId)).toBe('RESERVED');
    expect((await kit.stock(id)).get('p')).toMatchObject({ available: 0, reserved: 1, sold: 0 });
    const after = await kit.metrics();
    expect((after.seckill_released_total ?? 0) - (before.seckill_released_total ?? 0)).toBe(0);
    // The reservation's own order is untouched by all that: stored at its first use, as created.
    expect((await kit.open('acc_x', r.body.orderId)).body.status).toBe('CREATED');
  });

  it('a fall-over reservation that is paid keeps counting against the per-user limit after a cancel attempt', async () => {
    const id = await sale([{ productId: 'p', stock: 2, shards: 2 }], { perUserLimit: 1 });
    // Two buyers whose home is shard 0: the first takes its unit, the second falls over to shard 1.
    const onZero = Array.from({ length: 200 }, (_, i) => `acc_h${i}`).filter((a) => homeOf(a, 'p', 2) === 0);
    const [first, second] = onZero;
    const a = await kit.reserve(first, id, 'p');
    const b = await kit.reserve(second, id, 'p');
    expect([a.status, b.status]).toEqual([201, 201]);
    expect((await kit.user(second).get(`/seckill/reservations/${b.body.reservationId}`)).body.state).toBe('RESERVED');
    expect(await kit.pay(second, b.body.orderId, 990)).toBe('PAID');
    await waitState(second, b.body.reservationId, 'SOLD');
    expect((await kit.user(second).delete(`/seckill/reservations/${b.body.reservationId}`)).status).toBe(409);
    // The first buyer gives their unit back: shard 0 has stock again.
    expect((await kit.user(first).delete(`/seckill/reservations/${a.body.reservationId}`)).body.state).toBe('RELEASED');
    const again = await kit.reserve(second, id, 'p', 1, 'second-try');
    expect([again.status, again.body.error]).toEqual([409, 'LIMIT_EXCEEDED']);
  });
});
