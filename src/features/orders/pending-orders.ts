import { Injectable } from '@nestjs/common';
import { ORDER_ID_RE } from '../../platform/core/ids';
import type { OrderRecord } from './order.types';
import { OrdersStore } from './orders.store';

/**
 * A module whose own records stand for orders until they are touched: its record carries the order's id (answered to
 * the payer already) and everything the order is made of, and the order is stored the first time its payer opens or
 * pays it, or when the module closes it.
 */
export interface PendingOrderSource {
  /**
   * Stores the order `orderId` when this source stands for it and `accountId` is its payer (idempotent: an order stored
   * already is left as it is). Answers the id of the order stored for it (another id only when an order of the same
   * number was stored under another id, by an earlier version); undefined when the source knows no such order.
   */
  storePending(accountId: string, orderId: string): Promise<string | undefined>;
}

/**
 * The registry of pending-order sources, and the payer's read of an order that stores a pending one first: checkout
 * and plan creation read through it, so an order answered by another module can be paid at once.
 */
@Injectable()
export class PendingOrders {
  private readonly sources: PendingOrderSource[] = [];

  constructor(private readonly orders: OrdersStore) {}

  register(source: PendingOrderSource): void {
    this.sources.push(source);
  }

  /**
   * The order as `accountId` (its payer) reads it, a pending order stored first: the order hash alone (one HGETALL; its
   * plan and the Redis clock are for the writes under the order's lock, which read again).
   */
  async readForPayer(accountId: string, orderId: string): Promise<OrderRecord | null> {
    const order = await this.orders.readOrder(orderId);
    if (order || !ORDER_ID_RE.test(orderId)) return order;
    for (const source of this.sources) {
      const stored = await source.storePending(accountId, orderId);
      if (stored) return this.orders.readOrder(stored);
    }
    return null;
  }
}
