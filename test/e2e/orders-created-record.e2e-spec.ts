import { orderView } from '../../src/features/orders/order.views';
import { useOrdersApp } from '../support/orders-app';

const app = useOrdersApp({});
let seq = 0;

describe('a created order, as the create answers it without reading it back', () => {
  it('is field for field the order stored (times on the Redis clock, version, payer), with and without a payer', async () => {
    for (const payer of ['acc_created', undefined]) {
      const merchantOrderNo = `created-${process.pid}-${++seq}`;
      const command = { merchantId: 'm_test', merchantOrderNo, amount: 4200, currency: 'CNY', subject: 'Tea', expireMinutes: 7 };
      const made = payer ? (await app.orders.createForBuyer({ ...command, payerAccountId: payer })).order : (await app.orders.create(command)).order;
      const { order: stored } = await app.store.read(made.orderId);
      expect(stored).not.toBeNull();
      if (payer) expect(made).toEqual(orderView(stored!));
      else expect(made).toEqual((await app.orders.create(command)).order);
      expect(stored!.expiresAt - stored!.createdAt).toBe(7 * 60_000);
      // Its life counts from the arming of its expiry, a moment before the write.
      expect(stored!.updatedAt - stored!.createdAt).toBeGreaterThanOrEqual(0);
      expect(stored!.updatedAt - stored!.createdAt).toBeLessThan(1000);
    }
  });
});
