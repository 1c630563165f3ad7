import type { OrderEvent } from '../../src/features/orders';
import { SeckillModule } from '../../src/features/seckill';
import { ActivitiesService, type ProductStock } from '../../src/features/seckill/seckill-activities.service';
import { EVENTS_GROUP, ReservationsService, type ReservationView } from '../../src/features/seckill/reservations.service';
import type { ActivityCommand, ReserveCommand } from '../../src/features/seckill/seckill.commands';
import { SeckillConflictError, SeckillNotFoundError, SeckillTryAgainError } from '../../src/features/seckill/seckill.errors';
import { buildModule, CollaboratorDown, FakeOrders, fakeOrdersModule, rejection, uid, useModuleRedis } from '../support/module-tier';

/**
 * The seckill module alone on a real Redis, the orders module replaced by a fake at its public interface (the
 * OrdersService calls seckill makes, the order events it consumes, the pending-order registry). Through the module's
 * services: reserve, release (the buyer's cancel, an order closed), sell (an order paid), with the stock invariant
 * initial = available + reserved + sold on every shard.
 */
const MERCHANT = 'm_seckill';
const redis = useModuleRedis();

async function setup() {
  const orders = new FakeOrders();
  const m = await buildModule(redis, { feature: SeckillModule, fakes: [fakeOrdersModule(orders)] });
  const activities = m.get(ActivitiesService);
  const reservations = m.get(ReservationsService);

  const openSale = async (products: { productId: string; stock: number; shards?: number }[], perUserLimit = 1): Promise<string> => {
    const activityId = uid('a');
    const now = Date.now();
    const cmd: ActivityCommand = {
      activityId,
      merchantId: MERCHANT,
      title: 'Module tier sale',
      startsAt: now - 1000,
      endsAt: now + 3_600_000,
      payWindowMinutes: 15,
      perUserLimit,
      products: products.map((p) => ({ title: p.productId, price: 990, currency: 'CNY', shards: 1, ...p })),
    };
    expect((await activities.create(cmd)).created).toBe(true);
    return activityId;
  };

  /** The invariant on every shard (the activity check), and the product's totals. */
  const expectInvariant = async (activityId: string, productId: string, want: Partial<ProductStock>): Promise<void> => {
    const check = await activities.check(activityId);
    expect(check.problems).toEqual([]);
    const s = (await activities.stockOf(await activities.mustRead(activityId))).get(productId)!;
    expect(s.available + s.reserved + s.sold).toBe(s.initial);
    expect(s).toMatchObject(want);
  };

  /** Reserves, retrying the same request while the module answers TRY_AGAIN (as a client does); the refusal otherwise. */
  const reserve = async (cmd: ReserveCommand): Promise<ReservationView | Error> => {
    for (let i = 0; ; i++) {
      try {
        return (await reservations.reserve(cmd)).view;
      } catch (err) {
        if (!(err instanceof SeckillTryAgainError) || i > 50) return err as Error;
        await new Promise((r) => setTimeout(r, 20));
      }
    }
  };

  /** An order.paid or order.closed of the orders module, delivered to the module's consumer. */
  const deliver = (e: OrderEvent) => orders.events.deliver(EVENTS_GROUP, e);
  return { orders, activities, reservations, openSale, expectInvariant, reserve, deliver };
}

const code = (err: unknown) => (err instanceof SeckillConflictError ? err.code : (err as Error).message);

describe('SeckillModule alone (orders faked)', () => {
  it('concurrent reserves never oversell: exactly the stock is reserved, the rest refused SOLD_OUT, the invariant holds on every shard', async () => {
    const { openSale, reserve, reservations, expectInvariant } = await setup();
    const activityId = await openSale([
      { productId: 'one', stock: 12 },
      { productId: 'spread', stock: 12, shards: 4 },
    ]);
    for (const productId of ['one', 'spread']) {
      const answers = await Promise.all(
        Array.from({ length: 30 }, (_, i) => reserve({ accountId: `u${i}`, activityId, productId, quantity: 1, requestId: `r-${productId}-${i}` })),
      );
      const made = answers.filter((a): a is ReservationView => !(a instanceof Error));
      const refused = answers.filter((a): a is Error => a instanceof Error);
      expect(made).toHaveLength(12);
      expect(new Set(made.map((v) => v.reservationId)).size).toBe(12);
      for (const err of refused) expect(err).toBeInstanceOf(SeckillConflictError);
      expect(refused.map(code)).toEqual(Array(18).fill('SOLD_OUT'));
      await expectInvariant(activityId, productId, { initial: 12, available: 0, reserved: 12, sold: 0 });
    }
    // Sold out, asked again: refused (SOLD_OUT), nothing taken.
    expect(code(await reserve({ accountId: 'late', activityId, productId: 'spread', quantity: 1, requestId: 'late-1' }))).toBe('SOLD_OUT');
    expect(await rejection(reservations.reserve({ accountId: 'x', activityId, productId: 'nope', quantity: 1, requestId: 'x' }))).toBeInstanceOf(
      SeckillNotFoundError,
    );
  });

  it('the same (account, requestId) is one reservation, however many copies race; another quantity under it, or past the limit, is refused', async () => {
    const { openSale, reservations, expectInvariant } = await setup();
    const activityId = await openSale([{ productId: 'p', stock: 10, shards: 2 }], 2);
    const copies = await Promise.all(
      Array.from({ length: 8 }, () => reservations.reserve({ accountId: 'u1', activityId, productId: 'p', quantity: 2, requestId: 'req-1' })),
    );
    expect(new Set(copies.map((c) => c.view.reservationId)).size).toBe(1);
    expect(copies.filter((c) => c.created)).toHaveLength(1);
    expect(new Set(copies.map((c) => c.view.orderId)).size).toBe(1);
    await expectInvariant(activityId, 'p', { available: 8, reserved: 2 });

    const reused = await rejection(reservations.reserve({ accountId: 'u1', activityId, productId: 'p', quantity: 1, requestId: 'req-1' }));
    expect(reused).toBeInstanceOf(SeckillConflictError);
    expect(code(reused)).toBe('REQUEST_REUSED');
    const over = await rejection(reservations.reserve({ accountId: 'u1', activityId, productId: 'p', quantity: 1, requestId: 'req-2' }));
    expect(over).toBeInstanceOf(SeckillConflictError);
    expect(code(over)).toBe('LIMIT_EXCEEDED');
    await expectInvariant(activityId, 'p', { available: 8, reserved: 2 });
  });

  it('sells on the order paid and releases on the buyer’s cancel, each once (redelivered events change nothing)', async () => {
    const { orders, openSale, reservations, expectInvariant, deliver } = await setup();
    const activityId = await openSale([{ productId: 'p', stock: 5, shards: 2 }]);
    const a = (await reservations.reserve({ accountId: 'buyer', activityId, productId: 'p', quantity: 1, requestId: 'b-1' })).view;
    const b = (await reservations.reserve({ accountId: 'other', activityId, productId: 'p', quantity: 1, requestId: 'o-1' })).view;
    await expectInvariant(activityId, 'p', { available: 3, reserved: 2, sold: 0 });

    // The buyer opens the order (the orders module asks its pending-order sources), then pays it.
    expect(orders.sources).toHaveLength(1);
    expect(await orders.sources[0].storePending('buyer', a.orderId)).toBe(a.orderId);
    const paidEvent = orders.pay(a.orderId);
    await deliver(paidEvent);
    // Delivered again (at least once): the sale is counted once.
    await deliver(paidEvent);
    expect((await reservations.get('buyer', a.reservationId)).state).toBe('SOLD');
    await expectInvariant(activityId, 'p', { available: 3, reserved: 1, sold: 1 });
    const paid = await rejection(reservations.cancel('buyer', a.reservationId));
    expect(paid).toBeInstanceOf(SeckillConflictError);
    expect(code(paid)).toBe('RESERVATION_PAID');

    // The other buyer cancels: the order is stored closed (it can never be paid), the unit goes back once.
    expect((await reservations.cancel('other', b.reservationId)).state).toBe('RELEASED');
    expect([...orders.orders.values()].find((o) => o.merchantOrderNo === b.reservationId)?.status).toBe('CLOSED');
    await deliver(orders.eventOf('order.closed', b.orderId));
    expect((await reservations.cancel('other', b.reservationId)).state).toBe('RELEASED');
    await expectInvariant(activityId, 'p', { available: 4, reserved: 0, sold: 1, released: 1 });
    // Another account's reservation is not found.
    expect(await rejection(reservations.get('other', a.reservationId))).toBeInstanceOf(SeckillNotFoundError);
  });

  it('when the orders module fails (down before closing, or its reply lost after storing), the cancel fails and the reservation keeps its units; the retry releases them once', async () => {
    const { orders, openSale, reservations, expectInvariant } = await setup();
    const activityId = await openSale([{ productId: 'p', stock: 3 }]);
    const r = (await reservations.reserve({ accountId: 'u', activityId, productId: 'p', quantity: 1, requestId: 'u-1' })).view;

    orders.failures.fail('createForBuyer', 'after');
    expect(await rejection(reservations.cancel('u', r.reservationId))).toBeInstanceOf(CollaboratorDown);
    orders.failures.fail('close', 'before');
    expect(await rejection(reservations.cancel('u', r.reservationId))).toBeInstanceOf(CollaboratorDown);
    expect((await reservations.get('u', r.reservationId)).state).toBe('RESERVED');
    await expectInvariant(activityId, 'p', { available: 2, reserved: 1, released: 0 });
    expect([...orders.orders.values()].map((o) => [o.orderId, o.status])).toEqual([[r.orderId, 'CREATED']]);

    expect((await reservations.cancel('u', r.reservationId)).state).toBe('RELEASED');
    expect((await reservations.cancel('u', r.reservationId)).state).toBe('RELEASED');
    await expectInvariant(activityId, 'p', { available: 3, reserved: 0, released: 1 });
    expect([...orders.orders.values()].map((o) => [o.orderId, o.status])).toEqual([[r.orderId, 'CLOSED']]);
  });

  it('an order paid whose event fails to be handled (the orders module down) changes nothing; its redelivery sells it once', async () => {
    const { orders, openSale, reservations, expectInvariant, deliver } = await setup();
    const activityId = await openSale([{ productId: 'p', stock: 2 }]);
    const r = (await reservations.reserve({ accountId: 'u', activityId, productId: 'p', quantity: 1, requestId: 'u-1' })).view;
    await orders.sources[0].storePending('u', r.orderId);
    const paid = orders.pay(r.orderId);
    orders.failures.fail('orderIdOf');
    // The handler throws: the stream keeps the event pending and delivers it again.
    expect(await rejection(deliver(paid))).toBeInstanceOf(CollaboratorDown);
    expect((await reservations.get('u', r.reservationId)).state).toBe('RESERVED');
    await expectInvariant(activityId, 'p', { available: 1, reserved: 1, sold: 0 });
    await deliver(paid);
    await deliver(paid);
    expect((await reservations.get('u', r.reservationId)).state).toBe('SOLD');
    await expectInvariant(activityId, 'p', { available: 1, reserved: 0, sold: 1 });
  });

  it('a sold-out product comes back when a reservation is released: the instance forgets it and the next buyer gets the unit', async () => {
    const { openSale, reserve, reservations, expectInvariant } = await setup();
    const activityId = await openSale([{ productId: 'p', stock: 2, shards: 2 }]);
    const held = await Promise.all(
      ['u1', 'u2'].map((u) => reservations.reserve({ accountId: u, activityId, productId: 'p', quantity: 1, requestId: `${u}-1` })),
    );
    const refused = await rejection(reservations.reserve({ accountId: 'u3', activityId, productId: 'p', quantity: 1, requestId: 'u3-1' }));
    expect(code(refused)).toBe('SOLD_OUT');
    // Refused again at once (the instance's sold-out memory, without Redis), then released by u1's cancel.
    expect(code(await rejection(reservations.reserve({ accountId: 'u3', activityId, productId: 'p', quantity: 1, requestId: 'u3-2' })))).toBe('SOLD_OUT');
    await reservations.cancel('u1', held[0].view.reservationId);
    const again = await reserve({ accountId: 'u3', activityId, productId: 'p', quantity: 1, requestId: 'u3-3' });
    expect(again).toMatchObject({ state: 'RESERVED', quantity: 1 });
    await expectInvariant(activityId, 'p', { available: 0, reserved: 2, released: 1 });
  });
});
