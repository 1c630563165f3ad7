import { setTimeout as sleep } from 'node:timers/promises';
import { Injectable, Logger, type OnModuleInit } from '@nestjs/common';
import { crashPoint } from '../../platform/core/crash-points';
import { clipUnits } from '../../platform/core/text';
import type { DomainError } from '../../platform/core/domain.error';
import { LockContendedError } from '../../engines/locks/lock.errors';
import { LockService } from '../../engines/locks/lock.service';
import {
  newOrderId,
  OrderConflictError,
  type OrderEvent,
  ORDER_EVENTS,
  OrderEventsService,
  OrdersService,
  type OrderView,
  type PendingOrderSource,
  PendingOrders,
} from '../orders';
import { stockMap } from '../../engines/sharded-pool/fall-over';
import { homeOf } from '../../engines/sharded-pool/home';
import { StreamConsumer } from '../../engines/workers/worker-declarations';
import { type Activity, ActivityCatalog } from './activity-catalog';
import { RESERVATION_ID_RE, reservationIdIn } from './seckill.keys';
import type { ReserveCommand } from './seckill.commands';
import { SeckillConfig } from './seckill.config';
import { REFUSALS, seckillConflict, SeckillNotFoundError } from './seckill.errors';
import { SeckillMetrics } from './seckill.metrics';
import { type ReleaseReply, type ReserveReply, SeckillStore } from './seckill.store';
import { type ProductRecord, type ReservationLocation, type ReservationRecord, type ReservationState, unitsOf } from './seckill.types';
import { ProductSoldOutMemory, productTopic } from './product-sold-out';

/** How long closing a reservation's order waits for the order's lock when another request holds it (a double tap of cancel). */
const CLOSE_WAIT_MS = 3000;
/**
 * The gather lock: one request of a product taken over several shards at a time (its lease and wait; the lease is
 * renewed while held). Attempts of one request under it before TRY_AGAIN, and the Retry-After then.
 */
export const GATHER_LOCK = { policy: 'seckill-gather' } as const;
const gatherLockName = (activityId: string, productId: string) => `seckill-gather:${activityId}:${productId}`;
const GATHER_ATTEMPTS = 3;
const GATHER_RETRY_AFTER_MS = 200;
/** The orders module's refusal of an order number already used with another payload. */
const numberTaken = (err: unknown): boolean => err instanceof OrderConflictError && err.code === 'ORDER_NO_REUSED';
/** The consumer group of the order events. */
export const EVENTS_GROUP = 'seckill';

/**
 * The first `max` UTF-16 units of `text` as well-formed text: never half of a surrogate pair (the scripts' JSON
 * refuses a lone half), an unpaired one (in titles stored before they were checked for it) replaced by U+FFFD.
 */
const clip = (text: string, max: number) => clipUnits(text.toWellFormed(), max);

/** A reservation as its buyer sees it. */
export interface ReservationView {
  reservationId: string;
  activityId: string;
  productId: string;
  quantity: number;
  /** Minor units: price × quantity. */
  amount: number;
  currency: string;
  orderId: string;
  state: ReservationState;
  /** Epoch ms. */
  expiresAt: number;
  createdAt: number;
}

/**
 * Reservations: one script on the product's shard takes the stock (window, eligibility, per-user limit, stock),
 * then the master order is created through the orders module. The order's outcome settles the reservation:
 * paid → SOLD; closed (expired, closed, cancelled by the buyer) → RELEASED, its units back in stock exactly once.
 *
 * No stock is lost between the two steps: the script puts the reservation in its shard's due set in the same step
 * that takes the units, and the safety net's sweep releases whatever is still there a little after its expiry
 * (unless its order is paid); a failed order creation releases it at once. Releasing always closes the order first
 * (creating it when it is missing), so a released reservation's order can never be paid.
 */
@Injectable()
export class ReservationsService implements PendingOrderSource, OnModuleInit {
  private readonly logger = new Logger(ReservationsService.name);

  constructor(
    private readonly store: SeckillStore,
    private readonly catalog: ActivityCatalog,
    private readonly soldOut: ProductSoldOutMemory,
    private readonly orders: OrdersService,
    private readonly events: OrderEventsService,
    private readonly metrics: SeckillMetrics,
    private readonly config: SeckillConfig,
    private readonly locks: LockService,
    private readonly pendingOrders: PendingOrders,
  ) {}

  /** Reserves units for the buyer; the same (account, requestId) again answers the same reservation (`created` false). */
  async reserve(cmd: ReserveCommand): Promise<{ view: ReservationView; created: boolean }> {
    const a = await this.activity(cmd.activityId);
    const p = a.productsById.get(cmd.productId);
    if (!p) throw new SeckillNotFoundError('product');
    if (this.soldOut.isSoldOut(productTopic(a.activityId, p.productId))) {
      this.metrics.refused.inc({ reason: 'SOLD_OUT_LOCAL' });
      throw REFUSALS.soldOut(0);
    }
    const rsvId = reservationIdIn(a, p.productId, cmd.accountId, cmd.requestId);
    const home = homeOf(cmd.accountId, p.productId, p.shards);
    const loc: ReservationLocation = { activityId: a.activityId, productId: p.productId, shard: home, home, requestId: cmd.requestId };
    const payWindowMs = a.payWindowMinutes * 60_000;
    const eligible = !a.restricted || (await this.store.isEligible(a.activityId, cmd.accountId));
    // The script also puts the reservation in its shard's due set: a process killed anywhere after it leaves nothing
    // the safety net's sweep does not find. A refusal leaves nothing behind. The order's id is drawn here and recorded
    // with the reservation (a copy of the request answers the first copy's); the order is stored when its buyer first
    // opens or pays it, or when the reservation is released (storePending, closeOrder).
    const taken = await this.take(a, p, loc, rsvId, cmd, eligible, payWindowMs, newOrderId(a.merchantId, rsvId));
    // The same requestId is the same request: another quantity under it is a mistake, not a retry.
    if (!taken.created && unitsOf(taken.record) !== cmd.quantity) throw this.refused(REFUSALS.requestReused(unitsOf(taken.record)));
    crashPoint('seckill.reserve.after-take');
    // The buyer's index names the reservation and its order before the answer: the order can be found (and stored)
    // from its id alone. A process killed before this leaves a reservation nobody was answered; the safety net's
    // sweep releases it (its order stored closed) a grace after its expiry, or a retry of the request indexes it.
    await this.store.remember(cmd.accountId, rsvId, { ...loc, at: taken.record.c }, a.endsAt + this.config.liveRetentionMs, taken.record.o);
    crashPoint('seckill.reserve.after-index');
    const view = viewOf(a, p, rsvId, taken.record, await this.orderIdOf(a, rsvId, taken.record));
    if (taken.created) this.metrics.reserved.inc();
    return { view, created: taken.created };
  }

  /** One of the buyer's reservations (another account's: 404). */
  async get(accountId: string, rsvId: string): Promise<ReservationView> {
    const found = await this.find(accountId, rsvId);
    if (!found) throw new SeckillNotFoundError('reservation');
    return viewOf(found.a, found.p, rsvId, found.record, await this.orderIdOf(found.a, rsvId, found.record));
  }

  /** The buyer's reservations, of one activity or all. */
  async list(accountId: string, activityId?: string): Promise<ReservationView[]> {
    const located = await this.store.located(accountId, 200, activityId);
    const views = await Promise.all(
      located.map(async ([rsvId, loc]) => {
        const found = await this.found(loc, rsvId);
        return found ? viewOf(found.a, found.p, rsvId, found.record, await this.orderIdOf(found.a, rsvId, found.record)) : null;
      }),
    );
    return views.filter((v): v is ReservationView => v !== null).sort((x, y) => y.createdAt - x.createdAt);
  }

  /** The buyer cancels before paying: the order is closed and the units go back. Paid or being paid: 409. */
  async cancel(accountId: string, rsvId: string): Promise<ReservationView> {
    const loc = await this.store.locate(accountId, rsvId);
    if (!loc) throw new SeckillNotFoundError('reservation');
    const state = await this.settle(accountId, rsvId, loc, 'close');
    if (state === 'SOLD') throw seckillConflict('RESERVATION_PAID', 'The reservation is paid');
    return this.get(accountId, rsvId);
  }

  /**
   * The pending order of one of the buyer's reservations (its id was answered with the reservation), stored when the
   * buyer first opens or pays it: only while the reservation is held; a settled reservation's order was stored when it
   * was settled (closed before its units went back, or paid). Answers the stored order's id.
   */
  async storePending(accountId: string, orderId: string): Promise<string | undefined> {
    const indexed = await this.store.reservationOfOrder(accountId, orderId);
    if (!indexed) return undefined;
    const { rsvId, loc } = indexed;
    const found = await this.found(loc, rsvId);
    if (found?.record.o !== orderId || found.record.s !== 'RESERVED') return undefined;
    try {
      return (await this.storeOrder(found.a, found.p, rsvId, found.record)).order.orderId;
    } catch (err) {
      if (!numberTaken(err)) throw err;
      // An order an earlier version let the merchant number as this reservation holds the number: this reservation's
      // order can never be stored, so nothing could pay it; its units go back now rather than at its expiry.
      await this.settle(accountId, rsvId, loc, 'close');
      return undefined;
    }
  }

  onModuleInit(): void {
    this.pendingOrders.register(this);
  }

  /** An order event: paid → SOLD; closed → RELEASED. Only the orders of reservations count. */
  @StreamConsumer({
    stream: ORDER_EVENTS,
    group: EVENTS_GROUP,
    options: (get) => ({ concurrency: get(SeckillConfig).eventConcurrency, batchSize: 100 }),
    metric: 'seckill_sold_total, seckill_released_total',
  })
  async onEvent(e: OrderEvent): Promise<void> {
    if ((e.type !== 'order.paid' && e.type !== 'order.closed') || !RESERVATION_ID_RE.test(e.merchantOrderNo) || !e.accountId) return;
    const loc = await this.store.locate(e.accountId, e.merchantOrderNo);
    if (!loc) return;
    const a = await this.catalog.get(loc.activityId);
    if (!a || a.merchantId !== e.merchantId || (await this.orders.orderIdOf(a.merchantId, e.merchantOrderNo)) !== e.orderId) return;
    await this.settle(e.accountId, e.merchantOrderNo, loc, e.type === 'order.paid' ? 'paid' : 'closed');
  }

  /**
   * Settles a reservation from its order, once:
   * - `paid`: its order is paid → SOLD;
   * - `closed`: its order is closed → RELEASED;
   * - `close`: closes the order (creating it first when it is missing, so that it can never be paid later), then
   *   RELEASED; an order found paid makes it SOLD instead.
   * Returns the state it ends in ('NONE' when the reservation was never made).
   */
  async settle(accountId: string, rsvId: string, loc: ReservationLocation, how: 'paid' | 'closed' | 'close'): Promise<ReservationState | 'NONE'> {
    const a = await this.catalog.get(loc.activityId);
    const p = a?.productsById.get(loc.productId);
    if (!a || !p) return 'NONE';
    const home = this.store.shard(a.activityId, p, loc.home);
    const shard = this.store.shard(a.activityId, p, loc.shard);
    const record = await this.store.record(shard, rsvId);
    if (!record) {
      // The script never took the units here: free a claim the home shard may hold for it.
      if (await this.store.hasClaim(home, rsvId)) await this.store.release(home, rsvId, accountId, productTopic(a.activityId, p.productId));
      return 'NONE';
    }
    if (record.n !== undefined) return this.settleParts(a, p, accountId, rsvId, loc.home, how);
    // Released before, taken whole on its home shard (no claim to free): nothing is left to do, and no script runs for
    // it (the order.closed of a reservation the buyer's cancel or the safety net released).
    if (record.s === 'RELEASED' && loc.shard === loc.home && how !== 'paid') return 'RELEASED';
    let sell = how === 'paid';
    if (how === 'close' && record.s === 'RESERVED') {
      const order = await this.closeOrder(a, p, rsvId, record);
      crashPoint('seckill.settle.after-close');
      sell = order === 'PAID';
    }
    if (sell) {
      const r = await this.store.sell(shard, rsvId);
      if (r === 'SOLD') this.metrics.sold.inc({});
      if (r === 'RELEASED') this.logger.error({ rsvId }, 'a paid order’s reservation was released before: its units were sold again');
      return r === 'RELEASED' ? 'RELEASED' : 'SOLD';
    }
    const topic = productTopic(a.activityId, p.productId);
    const r = await this.store.release(shard, rsvId, accountId, topic);
    // A sold reservation keeps its claim: its units count against the buyer's limit for good.
    if (loc.shard !== loc.home && r.stock !== 'SOLD') await this.store.release(home, rsvId, accountId, topic);
    if (r.stock === 'RELEASED') {
      this.metrics.released.inc();
      this.soldOut.forget(productTopic(a.activityId, p.productId));
    }
    return r.stock === 'SOLD' ? 'SOLD' : 'RELEASED';
  }

  /**
   * Settles a reservation taken over several shards, as `settle`: its order first (for `close`), then every part (on
   * the shards its master record names), then the master record on the home shard, which frees the claim. A crash
   * in between leaves the master RESERVED and its claim due: the next settle (the safety net's, a retried cancel,
   * a redelivered event) does the rest, each part once.
   */
  private async settleParts(a: Activity, p: ProductRecord, accountId: string, rsvId: string, home: number, how: 'paid' | 'closed' | 'close') {
    const homeKeys = this.store.shard(a.activityId, p, home);
    const master = await this.store.record(homeKeys, rsvId);
    if (!master) return 'NONE';
    let sell = how === 'paid' || master.s === 'SOLD';
    if (how === 'close' && master.s === 'RESERVED') sell = (await this.closeOrder(a, p, rsvId, master)) === 'PAID';
    const parts = [...partShards(master).map((k) => this.store.shard(a.activityId, p, k)), homeKeys];
    if (sell) {
      let released = false;
      for (const k of parts) {
        // A part left on a shard by an earlier attempt (given back) is not this reservation's: only this attempt's sell.
        released = (await this.store.sell(k, rsvId, k === homeKeys ? undefined : (master.g ?? 0))) === 'RELEASED' || released;
        crashPoint('seckill.settle.after-part');
      }
      if (released) this.logger.error({ rsvId }, 'a paid order’s reservation was released before: its units were sold again');
      else if (master.s === 'RESERVED') this.metrics.sold.inc({});
      return released ? 'RELEASED' : 'SOLD';
    }
    const topic = productTopic(a.activityId, p.productId);
    let stock: ReleaseReply['stock'] = 'NONE';
    for (const k of parts) {
      stock = (await this.store.release(k, rsvId, accountId, topic)).stock;
      crashPoint('seckill.settle.after-part');
    }
    if (stock === 'RELEASED') {
      this.metrics.released.inc();
      this.soldOut.forget(productTopic(a.activityId, p.productId));
    }
    return stock === 'SOLD' ? 'SOLD' : 'RELEASED';
  }

  /**
   * The script step: the home shard takes the whole quantity when it has it. When it has too little (sharded
   * products), the other shards' stock is read at once: less than the quantity in all is SOLD_OUT (nothing written);
   * otherwise the home shard claims the quantity and names the shards that have stock, and the parts are taken there.
   */
  private async take(
    a: Activity,
    p: ProductRecord,
    loc: ReservationLocation,
    rsvId: string,
    cmd: ReserveCommand,
    eligible: boolean,
    payWindowMs: number,
    orderId: string,
  ): Promise<{ record: ReservationRecord; created: boolean }> {
    const homeKeys = this.store.shard(a.activityId, p, loc.home);
    const args = { rsvId, account: cmd.accountId, qty: cmd.quantity, eligible, payWindowMs, canFallOver: p.shards > 1, orderId };
    const r = await this.store.reserve(homeKeys, args);
    // Too little on the home shard, or a request given back to make again: gathered under the product's gather lock.
    // Everything else is answered from this one script (a copy of a request claimed over several shards walks the
    // same parts as the copy that claimed it, without waiting its turn; fallen short, it is gathered as well).
    if (r.outcome === 'SHORT' || (r.outcome === 'EXISTING' && r.record.f)) return this.gather(a, p, loc, rsvId, cmd, args);
    return (await this.outcome(a, p, loc, rsvId, cmd, r, args)) ?? this.gather(a, p, loc, rsvId, cmd, args);
  }

  /**
   * A request the home shard cannot serve alone, taken over several shards, one gatherer of the product at a time
   * (the gather lock; single-shard takes never take it and take whole or nothing, so they cannot starve a gatherer
   * for good). Each attempt re-reads the request's state and every shard: less than the quantity in all is SOLD_OUT
   * with what is left (read after any give-back); otherwise the home shard claims it and the parts are taken. Parts
   * that fall short (single-shard takes got there first) all go back and a fresh attempt follows, at most
   * GATHER_ATTEMPTS; then a retryable 503 TRY_AGAIN, never SOLD_OUT while the quantity is there.
   */
  private async gather(
    a: Activity,
    p: ProductRecord,
    loc: ReservationLocation,
    rsvId: string,
    cmd: ReserveCommand,
    args: { rsvId: string; account: string; qty: number; eligible: boolean; payWindowMs: number; canFallOver: boolean; orderId: string },
  ): Promise<{ record: ReservationRecord; created: boolean }> {
    const homeKeys = this.store.shard(a.activityId, p, loc.home);
    // Where the stock is: every shard read at once (the sharded-pool engine's map), the plan naming each that has some.
    const readLeft = (shards: readonly number[]) => this.store.availableOn(shards.map((k) => this.store.shard(a.activityId, p, k)));
    const run = () =>
      this.locks.withLock(gatherLockName(a.activityId, p.productId), GATHER_LOCK, async () => {
        for (let attempt = 0; attempt < GATHER_ATTEMPTS; attempt++) {
          let r = await this.store.reserve(homeKeys, args);
          const redo = r.outcome === 'EXISTING' && r.record.f ? r.record : null;
          if (redo && unitsOf(redo) !== cmd.quantity) return { record: redo, created: false };
          if (r.outcome === 'SHORT' || redo) {
            const { total, plan } = await stockMap(loc.home, p.shards, readLeft);
            if (total < cmd.quantity) return this.refuseSoldOut(a, p, total);
            r = await this.store.reserve(homeKeys, { ...args, plan, attempt: redo ? (redo.g ?? 0) + 1 : undefined });
          }
          if (r.outcome === 'SHORT' || (r.outcome === 'EXISTING' && r.record.f)) continue;
          const taken = await this.outcome(a, p, loc, rsvId, cmd, r, args);
          if (taken) return taken;
        }
        return null;
      });
    const taken = await run().catch((err: Error) => {
      if (err instanceof LockContendedError) throw this.refused(REFUSALS.tryAgain(GATHER_RETRY_AFTER_MS));
      throw err;
    });
    if (taken) return taken;
    // Every attempt fell short: SOLD_OUT only when what is left now cannot serve the quantity.
    const { total } = await stockMap(loc.home, p.shards, readLeft);
    if (total < cmd.quantity) return this.refuseSoldOut(a, p, total, true);
    throw this.refused(REFUSALS.tryAgain(GATHER_RETRY_AFTER_MS));
  }

  /** What reserve-5.lua answered, as the reservation (null: its parts fell short and went back, try again). */
  private async outcome(
    a: Activity,
    p: ProductRecord,
    loc: ReservationLocation,
    rsvId: string,
    cmd: ReserveCommand,
    r: ReserveReply,
    args: { payWindowMs: number; orderId: string },
  ): Promise<{ record: ReservationRecord; created: boolean } | null> {
    switch (r.outcome) {
      case 'RESERVED':
        // The id the script recorded: this request's, or the one an earlier attempt under the same id recorded.
        return { record: { ...recordOf(cmd, r.expiresAt, loc.home, args.payWindowMs), ...(r.orderId ? { o: r.orderId } : {}) }, created: true };
      case 'EXISTING':
        return { record: r.record, created: false };
      case 'SHORT':
      case 'SOLD_OUT':
        return this.refuseSoldOut(a, p, r.available);
      case 'LIMIT_EXCEEDED':
        throw this.refused(REFUSALS.limit(r.held, r.limit));
      case 'NOT_STARTED':
        throw this.refused(REFUSALS.notStarted());
      case 'ENDED':
        throw this.refused(REFUSALS.ended());
      case 'NOT_ELIGIBLE':
        throw this.refused(REFUSALS.notEligible());
      case 'NO_PRODUCT':
        throw new SeckillNotFoundError('product');
      case 'CLAIM':
        crashPoint('seckill.reserve.after-claim');
        return this.takeParts(a, p, rsvId, r.record, true);
      case 'CLAIMED':
        if (r.record) return this.takeParts(a, p, rsvId, r.record, false);
        return this.claimedBefore(a, p, loc, rsvId, cmd);
    }
  }

  /**
   * The parts of a reservation claimed on the home shard (its master record `master`): each shard the claim names,
   * in order, gives what it has of the units still needed, until the quantity is met. Every copy of the request walks
   * the same shards in the same order, and a shard's first visit decides its part (take-3.lua), so copies add up the
   * same parts and make one reservation. The quantity not met: every part goes back (once: release-5.lua) and the
   * answer is SOLD_OUT with what there was, as it is to every later copy.
   */
  private async takeParts(
    a: Activity,
    p: ProductRecord,
    rsvId: string,
    master: ReservationRecord,
    created: boolean,
  ): Promise<{ record: ReservationRecord; created: boolean } | null> {
    const total = unitsOf(master);
    const plan = partShards(master);
    const attempt = master.g ?? 0;
    let got = master.q;
    let settled = master.s !== 'RESERVED';
    for (const k of plan) {
      if (got >= total || settled) break;
      const args = { rsvId, account: master.a, need: total - got, expiresAt: master.e, home: master.h, total, attempt };
      const t = await this.store.take(this.store.shard(a.activityId, p, k), args);
      if (t.outcome === 'TAKEN') got += t.units;
      else if (t.outcome === 'EXISTING' && (t.record.g ?? 0) === attempt) {
        got += t.record.q;
        settled = t.record.s !== 'RESERVED';
      } else if (t.outcome !== 'EXISTING') break;
      crashPoint('seckill.reserve.after-part');
    }
    if (settled) {
      // Given back or settled since (by another copy, a cancel, the safety net): answer as its master record says.
      const now = await this.store.record(this.store.shard(a.activityId, p, master.h), rsvId);
      if (!now) throw this.refused(REFUSALS.tryAgain(GATHER_RETRY_AFTER_MS));
      if (now.f) return null;
      return { record: now, created: false };
    }
    if (got >= total) {
      if (created) this.metrics.fallOvers.inc();
      return { record: master, created };
    }
    const topic = productTopic(a.activityId, p.productId);
    for (const k of plan) await this.store.release(this.store.shard(a.activityId, p, k), rsvId, master.a, topic, true);
    await this.store.release(this.store.shard(a.activityId, p, master.h), rsvId, master.a, topic, true);
    return null;
  }

  /**
   * A claim made before master records were written (its reservation taken whole on one other shard): that
   * reservation, when one of the other shards holds it; else the claim is freed and the request made anew.
   */
  private async claimedBefore(
    a: Activity,
    p: ProductRecord,
    loc: ReservationLocation,
    rsvId: string,
    cmd: ReserveCommand,
  ): Promise<{ record: ReservationRecord; created: boolean }> {
    const topic = productTopic(a.activityId, p.productId);
    const homeKeys = this.store.shard(a.activityId, p, loc.home);
    for (let k = 0; k < p.shards; k++) {
      const record = k === loc.home ? null : await this.store.record(this.store.shard(a.activityId, p, k), rsvId);
      if (!record) continue;
      loc.shard = k;
      if (record.s === 'RELEASED') await this.store.release(homeKeys, rsvId, cmd.accountId, topic);
      return { record, created: false };
    }
    await this.store.release(homeKeys, rsvId, cmd.accountId, topic);
    throw this.refused(REFUSALS.soldOut(0));
  }

  /** SOLD_OUT with what is left; 0 read from every shard (not `partial`): this instance remembers the product as sold out. */
  private refuseSoldOut(a: Activity, p: ProductRecord, available: number, partial = false): never {
    // Every shard was seen empty: this instance refuses the product without Redis until stock comes back.
    if (available === 0 && !partial) this.soldOut.remember(productTopic(a.activityId, p.productId));
    throw this.refused(REFUSALS.soldOut(available));
  }

  private refused<E extends DomainError>(err: E): E {
    this.metrics.refused.inc({ reason: err.code });
    return err;
  }

  private async activity(activityId: string): Promise<Activity> {
    const a = await this.catalog.get(activityId);
    if (!a) throw new SeckillNotFoundError('activity');
    return a;
  }

  private async find(accountId: string, rsvId: string) {
    const loc = await this.store.locate(accountId, rsvId);
    return loc ? this.found(loc, rsvId) : null;
  }

  /** The reservation at `loc` with its activity and product, or null. */
  private async found(loc: ReservationLocation, rsvId: string) {
    const a = await this.catalog.get(loc.activityId);
    const p = a?.productsById.get(loc.productId);
    const record = a && p ? await this.store.record(this.store.shard(a.activityId, p, loc.shard), rsvId) : null;
    return a && p && record ? { a, p, record } : null;
  }

  /**
   * Stores the reservation's order unless it is stored already (create-4 finds it by its number and answers it). It
   * takes the id the reservation recorded, expires with the reservation (the record's times) and gets no expiry entry of its own: the
   * reservation's due entry, written with its units, is its expiry (the safety net's sweep closes it).
   */
  private storeOrder(a: Activity, p: ProductRecord, rsvId: string, r: ReservationRecord): Promise<{ order: OrderView; created: boolean }> {
    const command = {
      merchantId: a.merchantId,
      merchantOrderNo: rsvId,
      amount: p.price * unitsOf(r),
      currency: p.currency,
      subject: clip(`${a.title}: ${p.title}`, 128),
      expireMinutes: a.payWindowMinutes,
      payerAccountId: r.a,
    };
    return this.orders.createForBuyer(command, { createdAt: r.c, expiresAt: r.e, ...(r.o ? { orderId: r.o } : {}) });
  }

  /** The id of the reservation's order: recorded with it (looked up by its number for a reservation made before that). */
  private async orderIdOf(a: Activity, rsvId: string, r: ReservationRecord): Promise<string> {
    return r.o ?? (await this.orders.orderIdOf(a.merchantId, rsvId)) ?? '';
  }

  /** Makes sure the reservation's order can no longer be paid: created if missing, then closed. Answers PAID or CLOSED. */
  private async closeOrder(a: Activity, p: ProductRecord, rsvId: string, r: ReservationRecord): Promise<'PAID' | 'CLOSED'> {
    // Most often the order is not stored yet (the reservation expired never opened): stored now, then closed.
    const made = await this.storeOrder(a, p, rsvId, r).catch((err: unknown) => {
      if (!numberTaken(err)) throw err;
      // The merchant's own order holds the reservation's number (another payload): the reservation has no order and
      // none can be made, so nothing can pay it; that order is the merchant's and is left alone.
      this.logger.warn({ rsvId, merchantId: a.merchantId }, 'a merchant order holds a reservation’s order number; the reservation is released');
      return null;
    });
    if (!made) return 'CLOSED';
    const { order } = made;
    if (order.status === 'PAID') return 'PAID';
    if (order.status === 'CLOSED') return 'CLOSED';
    // Another request holding the order's lock is most often a second tap of the same cancel (or the safety net, or
    // the order's own expiry) closing it too: wait for it briefly, then answer the outcome.
    const until = Date.now() + CLOSE_WAIT_MS;
    for (;;) {
      try {
        // The order has no expiry entry to cancel (the reservation's due entry is its expiry).
        await this.orders.close(a.merchantId, rsvId, { disarm: false });
        return 'CLOSED';
      } catch (err) {
        if (err instanceof OrderConflictError && err.code === 'ORDER_PAID') return 'PAID';
        if (err instanceof OrderConflictError && err.code === 'ORDER_PAYING')
          throw seckillConflict('RESERVATION_PAYING', 'The reservation’s order is being paid');
        if (!(err instanceof LockContendedError) || Date.now() >= until) throw err;
        await sleep(20 + Math.floor(Math.random() * 30));
      }
    }
  }
}

/** The shards (other than the home shard) a reservation taken over several shards takes its parts from, in order. */
export function partShards(master: ReservationRecord): number[] {
  return master.p ? master.p.split(',').map(Number) : [];
}

function recordOf(cmd: ReserveCommand, expiresAt: number, home: number, payWindowMs: number): ReservationRecord {
  return { s: 'RESERVED', a: cmd.accountId, q: cmd.quantity, e: expiresAt, h: home, c: expiresAt - payWindowMs, t: 0 };
}

/** `orderId`: the reservation's order ('' while it has none); order ids are random, so it comes from the orders module. */
function viewOf(a: Activity, p: ProductRecord, rsvId: string, r: ReservationRecord, orderId: string): ReservationView {
  return {
    reservationId: rsvId,
    activityId: a.activityId,
    productId: p.productId,
    quantity: unitsOf(r),
    amount: p.price * unitsOf(r),
    currency: p.currency,
    orderId,
    state: r.s,
    expiresAt: r.e,
    createdAt: r.c,
  };
}
