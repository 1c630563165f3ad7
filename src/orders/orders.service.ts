import { Injectable, Logger, OnApplicationBootstrap } from '@nestjs/common';
import { createHash } from 'node:crypto';
import { DelayQueueService } from '../delay-queue/delay-queue.service';
import { ApiError } from '../http/api-error';
import { LockService } from '../locks/lock.service';
import type { LockHandle } from '../locks/lock.types';
import { CreateOrderDto, DEFAULT_EXPIRE_MINUTES } from './dto/create-order.dto';
import type { CheckoutOrderDto, OrderDto } from './dto/order.dto';
import { expectWritten, orderConflict, orderNotFound } from './order-errors';
import { orderIdFor } from './order-keys';
import { EXPIRY_QUEUE } from './order-queues';
import { checkoutView, merchantView, payableBy } from './order-views';
import type { OrderRecord } from './order.types';
import { OrdersMetrics } from './orders.metrics';
import { OrdersStore, serverNow } from './orders.store';

export type CloseReason = 'MERCHANT' | 'EXPIRED';

/** The lock guarding one master order (plan creation, close). */
export const orderLockName = (orderId: string) => `order:${orderId}`;

/**
 * Master orders (seed 000 §2.2.1.1): created idempotently by merchants,
 * read, closed by the merchant or at their expiry. Every state write is the
 * write-3 compare-and-set, under the order lock with its fencing token.
 */
@Injectable()
export class OrdersService implements OnApplicationBootstrap {
  private readonly logger = new Logger(OrdersService.name);

  constructor(
    private readonly store: OrdersStore,
    private readonly locks: LockService,
    private readonly queue: DelayQueueService,
    private readonly metrics: OrdersMetrics,
  ) {}

  async onApplicationBootstrap(): Promise<void> {
    await this.queue.process<{ orderId: string }>(EXPIRY_QUEUE, (d) => this.expire(d.payload.orderId), {
      concurrency: 20,
      maxAttempts: 50,
      backoff: { initialMs: 5000, maxMs: 5 * 60_000 },
    });
  }

  /**
   * Creates the order once per (merchant, merchantOrderNo): `created` false when it existed with the
   * same payload (its current state is returned); another payload under the same number is a 409.
   */
  async create(merchantId: string, dto: CreateOrderDto): Promise<{ order: OrderDto; created: boolean }> {
    const orderId = orderIdFor(merchantId, dto.merchantOrderNo);
    const expireMinutes = dto.expireMinutes ?? DEFAULT_EXPIRE_MINUTES;
    const fingerprint = createHash('sha256').update(JSON.stringify([dto.amount, dto.currency, dto.subject, expireMinutes])).digest('hex');
    const r = await this.store.write({
      orderId,
      order: {
        version: 0,
        set: {
          orderId,
          merchantId,
          merchantOrderNo: dto.merchantOrderNo,
          amount: dto.amount,
          currency: dto.currency,
          subject: dto.subject,
          expireMinutes,
          fingerprint,
          status: 'CREATED',
          createdAt: serverNow(),
          expiresAt: serverNow(expireMinutes * 60_000),
          accountId: '',
          activePlan: '',
          planSeq: 0,
        },
      },
      event: 'order.created',
    });
    if (r.status !== 'VERSION') expectWritten(r);
    const created = r.status === 'OK';
    const { order } = await this.store.read(orderId);
    if (!order) throw orderConflict('ORDER_CHANGED', 'The order changed while this request ran; retry');
    if (!created && order.fingerprint !== fingerprint) {
      throw orderConflict('ORDER_NO_REUSED', `merchantOrderNo ${dto.merchantOrderNo} is already used by an order with another amount, currency, subject or expiry`);
    }
    if (created) this.metrics.ordersCreated.inc();
    // Also on a duplicate: a create answered 503 after its write may have missed this step.
    if (order.status === 'CREATED' || order.status === 'PAYING') {
      await this.queue.schedule(EXPIRY_QUEUE, orderId, { dueAt: order.expiresAt }, { orderId }, { ifExists: 'keep' });
    }
    return { order: merchantView(order), created };
  }

  async get(merchantId: string, merchantOrderNo: string): Promise<OrderDto> {
    const { order } = await this.store.read(orderIdFor(merchantId, merchantOrderNo));
    if (!order || order.merchantId !== merchantId) throw orderNotFound();
    return merchantView(order);
  }

  /** Closes an unpaid order (idempotent: a closed order is returned as it is). Paid or being paid: 409. */
  async close(merchantId: string, merchantOrderNo: string): Promise<OrderDto> {
    const orderId = orderIdFor(merchantId, merchantOrderNo);
    // An order that does not exist gets its 404 before any lock is taken, so it leaves no lock state behind.
    const { order: seen } = await this.store.read(orderId);
    if (!seen || seen.merchantId !== merchantId) throw orderNotFound();
    const order = await this.locks.withLock(orderLockName(orderId), { policy: 'order' }, (lock) => this.closeLocked(orderId, lock, 'MERCHANT', merchantId));
    await this.queue.cancel(EXPIRY_QUEUE, orderId).catch((err: Error) => this.logger.warn({ orderId, err: err.message }, 'could not cancel the expiry'));
    return merchantView(order);
  }

  /** The order as an app user sees it at checkout; bound to another account: 404. */
  async checkout(accountId: string, orderId: string): Promise<CheckoutOrderDto> {
    const { order } = await this.store.read(orderId);
    if (!payableBy(order, accountId)) throw orderNotFound();
    return checkoutView(order);
  }

  /** The expiry's handler: closes the order unless it is paid; while it is being paid, later (the queue retries). */
  async expire(orderId: string): Promise<void> {
    try {
      await this.locks.withLock(orderLockName(orderId), { policy: 'order' }, (lock) => this.closeLocked(orderId, lock, 'EXPIRED'));
    } catch (err) {
      if (err instanceof ApiError && ['NOT_FOUND', 'ORDER_PAID'].includes(err.code)) return;
      throw err;
    }
  }

  private async closeLocked(orderId: string, lock: LockHandle, reason: CloseReason, merchantId?: string): Promise<OrderRecord> {
    const s = await this.store.readWithActivePlan(orderId);
    const o = s.order;
    if (!o || (merchantId !== undefined && o.merchantId !== merchantId)) throw orderNotFound();
    if (o.status === 'CLOSED') return o;
    if (o.status === 'PAID') throw orderConflict('ORDER_PAID', 'The order is paid; it cannot be closed');
    if (o.status === 'PAYING') throw orderConflict('ORDER_PAYING', 'A payment of this order is under way; it cannot be closed now');
    const pending = s.plan?.status === 'PENDING' ? s.plan : null;
    const r = await this.store.write({
      orderId,
      planId: pending?.planId,
      guard: { lock: 'order', token: lock.fencingToken },
      order: { version: o.version, set: { status: 'CLOSED', closedAt: serverNow(), closeReason: reason, activePlan: '' } },
      ...(pending ? { plan: { version: pending.version, set: { status: 'CANCELLED' } } } : {}),
      event: 'order.closed',
    });
    expectWritten(r);
    this.metrics.ordersClosed.inc({ reason });
    return { ...o, status: 'CLOSED', closedAt: r.now, closeReason: reason, activePlan: '', version: r.orderVersion, updatedAt: r.now };
  }
}
