import { Injectable, Logger } from '@nestjs/common';
import { DelayQueueService } from '../../engines/delay-queue/delay-queue.service';
import type { Delivery } from '../../engines/delay-queue/delay-queue.types';
import { DelayQueueHandler } from '../../engines/workers/worker-declarations';
import { LockService } from '../../engines/locks/lock.service';
import type { LockHandle } from '../../engines/locks/lock.types';
import type { CheckoutOrderDto, OrderDto } from './dto/order.dto';
import { type CreateOrderCommand, type CreateOrderForBuyerCommand, DEFAULT_EXPIRE_MINUTES } from './order.commands';
import { OrderCommandDto } from './dto/create-order.dto';
import { validateCommand } from '../../platform/http/validation';
import { expectWritten, orderConflict, orderNotFound, refusalError } from './order.errors';
import { crashPoint } from '../../platform/core/crash-points';
import { sha256Hex } from '../../platform/core/digest';
import { ORDER_ID_RE } from '../../platform/core/ids';
import { orderIdFor, orderNumberKeyOf } from './order.keys';
import { ORDER_LOCK, orderLockName } from './order-locks';
import { EXPIRY_QUEUE } from './order-queues';
import { expiryStepOf, orderTransition, planTransition, type Refusal } from './order-state';
import { checkoutView, merchantView, type OrderSummary, orderView, type OrderView, payableBy, SUMMARY_FIELDS } from './order.views';
import type { OrderRecord } from './order.types';
import { OrdersMetrics } from './orders.metrics';
import { createdOrder, OrdersStore, serverNow } from './orders.store';
import { PendingOrders } from './pending-orders';

export type CloseReason = 'MERCHANT' | 'EXPIRED';

/**
 * An order whose caller closes it once `expiresAt` has passed, from a due entry of its own written before the order
 * (a seckill reservation's, in the step that takes its units): no `order-expiry` entry is armed for it. The order
 * cannot be paid from `expiresAt` on whoever closes it (plans and payments check it on the Redis clock). Epoch ms.
 */
export interface CallerExpiry {
  createdAt: number;
  expiresAt: number;
  /**
   * The order's id when the caller drew it (newOrderId of the same merchant and number) and answered it before the
   * order was stored (a pending order: see PendingOrders); absent, a fresh one is drawn.
   */
  orderId?: string;
}

/** The payload an order number is bound to, as a digest: another payload under the number is ORDER_NO_REUSED. */
function fingerprintOf(command: CreateOrderCommand): string {
  const payer = command.payerAccountId ?? '';
  // The payer joins the payload only when named, so orders created without one keep their fingerprint.
  const payload: unknown[] = [command.amount, command.currency, command.subject, command.expireMinutes ?? DEFAULT_EXPIRE_MINUTES, ...(payer ? [payer] : [])];
  return sha256Hex(JSON.stringify(payload));
}

const numberReused = (command: CreateOrderCommand) =>
  orderConflict(
    'ORDER_NO_REUSED',
    `merchantOrderNo ${command.merchantOrderNo} is already used by an order with another amount, currency, subject, expiry or payer`,
  );

/** No Redis read happened (a malformed id): the local clock stands in. */
const serverTimeUnknown = () => Date.now();

/** What closing an order came to, as a domain result: the caller decides what it means. */
type CloseOutcome = { kind: 'closed' | 'unchanged'; order: OrderRecord } | { kind: 'refused'; refusal: Refusal } | { kind: 'not-found' };

/**
 * Master orders: created idempotently by merchants or, for
 * a known payer, by other modules in process; read, closed by the merchant or
 * at their expiry. Every state write is the write-4 compare-and-set, under the
 * order lock with its fencing token.
 *
 * The one owner of the order expiry: the `order-expiry` delay-queue entry is
 * scheduled, re-armed, cancelled and handled here and nowhere else (the payment
 * runner asks through armExpiry / disarmExpiry).
 */
@Injectable()
export class OrdersService {
  private readonly logger = new Logger(OrdersService.name);

  constructor(
    private readonly store: OrdersStore,
    private readonly locks: LockService,
    private readonly queue: DelayQueueService,
    private readonly metrics: OrdersMetrics,
    private readonly pending: PendingOrders,
  ) {}

  /** An order's expiry came due: it is closed unless paid or being paid (see expire). */
  @DelayQueueHandler({
    queue: EXPIRY_QUEUE,
    retry: { attempts: 50, backoff: { initialMs: 5000, maxMs: 5 * 60_000 } },
    options: () => ({ concurrency: 20 }),
    metric: 'orders_closed_total{reason}',
  })
  onExpiryDue(d: Delivery<{ orderId: string }>): Promise<void> {
    return this.expire(d.payload.orderId);
  }

  /**
   * Creates the order once per (merchant, merchantOrderNo): `created` false when it existed with the
   * same payload (its current state is returned); another payload under the same number is a 409.
   * With `payerAccountId`, only that account may pay the order.
   */
  async create(command: CreateOrderCommand): Promise<{ order: OrderDto; created: boolean }> {
    const { order, created } = await this.createOrder(command);
    return { order: merchantView(order), created };
  }

  /**
   * For other modules, in process: the order of a known payer, created on behalf of `command.merchantId`
   * with the same idempotency rules as `create` (the payer is part of the payload). Only the payer may
   * see and pay it. A command that breaks the HTTP create's rules is refused (400 naming the field) before
   * anything is stored.
   */
  async createForBuyer(command: CreateOrderForBuyerCommand, closedBy?: CallerExpiry): Promise<{ order: OrderView; created: boolean }> {
    // The payer is required here (optional on the HTTP create): absent, it is checked as the empty string.
    const { order, created } = await this.createOrder({ ...command, payerAccountId: command.payerAccountId ?? '' }, closedBy);
    return { order: orderView(order), created };
  }

  /** For other modules, in process: the order by id, with no merchant or account scope; undefined when there is none (a malformed id included). */
  async findById(orderId: string): Promise<OrderView | undefined> {
    if (!ORDER_ID_RE.test(orderId)) return undefined;
    const order = await this.store.readOrder(orderId);
    return order ? orderView(order) : undefined;
  }

  /** As findById, only the fields of an OrderSummary (one HMGET): for callers on a hot path. */
  async findSummaryById(orderId: string): Promise<OrderSummary | undefined> {
    if (!ORDER_ID_RE.test(orderId)) return undefined;
    const o = await this.store.readOrderFields(orderId, SUMMARY_FIELDS);
    if (!o) return undefined;
    return {
      orderId: o.orderId,
      merchantId: o.merchantId,
      amount: o.amount,
      currency: o.currency,
      subject: o.subject,
      status: o.status,
      version: o.version,
      expiresAt: o.expiresAt,
      ...(o.accountId ? { accountId: o.accountId } : {}),
    };
  }

  /** As findById, with the Redis clock at the read (epoch ms), for callers that decide on the order's times. */
  async readById(orderId: string): Promise<{ order: OrderView | undefined; now: number }> {
    if (!ORDER_ID_RE.test(orderId)) return { order: undefined, now: serverTimeUnknown() };
    const { order, now } = await this.store.read(orderId);
    return { order: order ? orderView(order) : undefined, now };
  }

  /**
   * For other modules, in process: the id of the order (merchant, merchantOrderNo) names, undefined when there is
   * none. Order ids are random: this is the only way from a number to its order.
   */
  async orderIdOf(merchantId: string, merchantOrderNo: string): Promise<string | undefined> {
    const orderId = await this.store.orderIdOf({ merchantId, merchantOrderNo });
    const order = await this.store.readOrderFields(orderId, ['orderId', 'merchantId', 'merchantOrderNo']);
    return order?.merchantId === merchantId && order.merchantOrderNo === merchantOrderNo ? orderId : undefined;
  }

  async get(merchantId: string, merchantOrderNo: string): Promise<OrderDto> {
    const { order } = await this.store.read(await this.store.orderIdOf({ merchantId, merchantOrderNo }));
    if (!order || order.merchantId !== merchantId) throw orderNotFound();
    return merchantView(order);
  }

  /**
   * Closes an unpaid order (idempotent: a closed order is returned as it is). Paid or being paid: 409. `disarm`
   * false leaves its expiry entry alone (an order its caller closes has none, or one a failed plan re-armed, which
   * finds it closed).
   */
  async close(merchantId: string, merchantOrderNo: string, { disarm = true } = {}): Promise<OrderDto> {
    const orderId = await this.store.orderIdOf({ merchantId, merchantOrderNo });
    // An order that does not exist gets its 404 before any lock is taken, so it leaves no lock state behind.
    const { order: seen } = await this.store.read(orderId);
    if (!seen || seen.merchantId !== merchantId) throw orderNotFound();
    const r = await this.locks.withLock(orderLockName(orderId), ORDER_LOCK, (lock) => this.closeLocked(orderId, lock, 'MERCHANT', merchantId));
    if (r.kind === 'not-found') throw orderNotFound();
    if (r.kind === 'refused') throw refusalError(r.refusal, 'close');
    if (r.kind === 'closed') crashPoint('orders.close.after-write');
    if (disarm) await this.disarmExpiry(orderId);
    return merchantView(r.order);
  }

  /** The order as an app user sees it at checkout; bound to another account: 404. */
  async checkout(accountId: string, orderId: string): Promise<CheckoutOrderDto> {
    const order = await this.pending.readForPayer(accountId, orderId);
    if (!payableBy(order, accountId)) throw orderNotFound();
    return checkoutView(order);
  }

  /**
   * The expiry's handler: closes the order unless it is paid, closed or gone; while it is being paid, throws
   * so that the queue tries again later.
   */
  async expire(orderId: string): Promise<void> {
    // Paid, closed or gone: nothing to do, and no lock is taken for it.
    const { order } = await this.store.read(orderId);
    if (expiryStepOf(order?.status) === 'done') return;
    const r = await this.locks.withLock(orderLockName(orderId), ORDER_LOCK, (lock) => this.closeLocked(orderId, lock, 'EXPIRED'));
    // The entry is acked only once this returns: a death here has it delivered again, to find the order closed.
    if (r.kind === 'closed') crashPoint('orders.expire.after-write');
    if (r.kind === 'refused' && r.refusal === 'ORDER_PAYING') throw new Error(`order ${orderId} is being paid; its expiry tries again later`);
  }

  /**
   * (Re)arms the order's expiry at its `expiresAt` (due in the past: now), or after a delay on the Redis clock
   * (before the order is written); answers the entry's due time. `replace` also restarts the entry's attempts
   * (an expiry that gave up while the order was being paid); `keep` leaves a queued one.
   */
  async armExpiry(orderId: string, due: number | { delayMs: number }, ifExists: 'keep' | 'replace'): Promise<number> {
    const when = typeof due === 'number' ? { dueAt: due } : due;
    return (await this.queue.schedule(EXPIRY_QUEUE, orderId, when, { orderId }, { ifExists })).dueAt;
  }

  /** Cancels the order's expiry (the order is paid or closed). Best effort: a leftover entry finds nothing to do. */
  async disarmExpiry(orderId: string): Promise<void> {
    await this.queue.cancel(EXPIRY_QUEUE, orderId).catch((err: Error) => this.logger.warn({ orderId, err: err.message }, 'could not cancel the expiry'));
  }

  private async createOrder(command: CreateOrderCommand, closedBy?: CallerExpiry): Promise<{ order: OrderRecord; created: boolean }> {
    // The HTTP create has been validated by the pipe already; an in-process caller has not: the same rules, once more.
    await validateCommand(OrderCommandDto, command);
    const { merchantId } = command;
    const expireMinutes = command.expireMinutes ?? DEFAULT_EXPIRE_MINUTES;
    const payer = command.payerAccountId ?? '';
    const fingerprint = fingerprintOf(command);
    // The expiry is armed first, for a fresh random id, and the order written second with the entry's due time as
    // its expiresAt: a process that dies between the two leaves an entry that finds no order, never an order that
    // does not expire. A duplicate cancels its entry and keeps the existing order's.
    // An order its caller closes (closedBy) takes the caller's times and gets no expiry entry: the caller's own due
    // entry, written before this, closes it.
    const numberKey = orderNumberKeyOf(merchantId, command.merchantOrderNo);
    const orderId = closedBy?.orderId ?? orderIdFor(numberKey);
    // A caller's id must be of this number (its shard, so the index and the order share a slot) and well formed.
    if (!ORDER_ID_RE.test(orderId) || orderId.slice(0, 12) !== numberKey.slice(0, 12)) throw new Error(`order id ${orderId} is not one of its number`);
    const expiresAt = closedBy ? closedBy.expiresAt : await this.armExpiry(orderId, { delayMs: expireMinutes * 60_000 }, 'keep');
    if (!closedBy) crashPoint('orders.create.after-expiry');
    const set = {
      orderId,
      merchantId,
      merchantOrderNo: command.merchantOrderNo,
      amount: command.amount,
      currency: command.currency,
      subject: command.subject,
      expireMinutes,
      fingerprint,
      status: 'CREATED',
      // Its life is counted from the expiry's arming, a moment before the write.
      createdAt: closedBy ? closedBy.createdAt : expiresAt - expireMinutes * 60_000,
      expiresAt,
      // A named payer binds the order from the start, as a first plan binds it otherwise.
      accountId: payer,
      payerAccountId: payer,
      activePlan: '',
      planSeq: 0,
    };
    const r = await this.store.create(orderId, numberKey, set);
    crashPoint('orders.create.after-write');
    const { created } = r;
    if (!created && !closedBy) await this.disarmExpiry(orderId);
    // Created now: the order is what was written (no read back). Otherwise it existed: read it.
    const order = created ? createdOrder(set, r) : (await this.store.read(r.orderId)).order;
    if (!order) throw orderConflict('ORDER_CHANGED', 'The order changed while this request ran; retry');
    if (!created && order.fingerprint !== fingerprint) throw numberReused(command);
    if (created) this.metrics.ordersCreated.inc();
    // An order stored before its expiry was armed first (an earlier version) gets it here on a repeated create.
    else if (!closedBy && expiryStepOf(order.status) !== 'done') await this.armExpiry(order.orderId, order.expiresAt, 'keep');
    return { order, created };
  }

  private async closeLocked(orderId: string, lock: LockHandle, reason: CloseReason, merchantId?: string): Promise<CloseOutcome> {
    const s = await this.store.readWithActivePlan(orderId);
    const o = s.order;
    if (!o || (merchantId !== undefined && o.merchantId !== merchantId)) return { kind: 'not-found' };
    const t = orderTransition(o.status, 'close');
    if (!t.ok) return { kind: 'refused', refusal: t.refusal };
    if (!t.changed) return { kind: 'unchanged', order: o };
    const cancel = s.plan ? planTransition(s.plan.status, 'cancel') : undefined;
    const pending = cancel?.ok && cancel.changed ? s.plan : null;
    const r = await this.store.write({
      orderId,
      number: o,
      planId: pending?.planId,
      guard: { lock: 'order', token: lock.fencingToken },
      order: { version: o.version, set: { status: t.to, closedAt: serverNow(), closeReason: reason, activePlan: '' } },
      ...(pending && cancel?.ok ? { plan: { version: pending.version, set: { status: cancel.to } } } : {}),
      event: 'order.closed',
    });
    expectWritten(r);
    this.metrics.ordersClosed.inc({ reason });
    return { kind: 'closed', order: { ...o, status: t.to, closedAt: r.now, closeReason: reason, activePlan: '', version: r.orderVersion, updatedAt: r.now } };
  }
}
