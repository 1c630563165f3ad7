import { Injectable, Logger } from '@nestjs/common';
import { crashPoint } from '../../platform/core/crash-points';
import { DelayQueueService } from '../../engines/delay-queue/delay-queue.service';
import type { Delivery, When } from '../../engines/delay-queue/delay-queue.types';
import { configured, DelayQueueHandler, type RetryDeclaration } from '../../engines/workers/worker-declarations';
import { LockLostError } from '../../engines/locks/lock.errors';
import { LockService } from '../../engines/locks/lock.service';
import type { LockHandle } from '../../engines/locks/lock.types';
import { ChannelGateway } from './channels/channel-gateway';
import type { Payer } from './channels/payment-channel';
import type { PayPlanCommand } from './order.commands';
import { expectWritten, planNotFound, refusalError } from './order.errors';
import { PLAN_LOCK, planLockName } from './order-locks';
import {
  isSelfSufficient,
  LegRef,
  legId,
  legReference,
  PlanRef,
  QUERY_QUEUE,
  RESUME_QUEUE,
  REVERSAL_QUEUE,
  reversalOf,
  type ReversalRef,
  type SelfSufficientReversal,
} from './order-queues';
import { followUpOf, orderTransition, orderTransitionAt, planTransition, type OrderAction, type PlanAction, type Transition } from './order-state';
import type { Instruction, OrderEventType, OrderRecord, PlanRecord } from './order.types';
import { OrdersMetrics } from './orders.metrics';
import { OrdersConfig } from './orders.config';
import { OrdersService } from './orders.service';
import { FieldUpdates, OrdersStore, ServerClock, serverNow } from './orders.store';

/** One run over a plan under its lock: the records as last written, and the lock's fencing token. */
interface Run {
  order: OrderRecord;
  plan: PlanRecord;
  lock: LockHandle;
}

/** Retries of queries and reversals: the first after ORDERS_QUERY_DELAY_MS, growing to 10 minutes; then dead-letter for ops. */
const FOLLOW_UP_ATTEMPTS = 30;
const FOLLOW_UP_MAX_BACKOFF_MS = 10 * 60_000;
/** The three follow-up queues' policy: the first retry after the query delay, doubling up to ten minutes. */
const FOLLOW_UP_RETRY: RetryDeclaration = {
  attempts: FOLLOW_UP_ATTEMPTS,
  backoff: { initialMs: configured('ORDERS_QUERY_DELAY_MS', (get) => get(OrdersConfig).queryDelayMs), maxMs: FOLLOW_UP_MAX_BACKOFF_MS },
};

/**
 * Runs payment plans (no remote call inside a state write): the instructions in order, each a channel
 * call made outside Redis between two state writes. Success moves on; failure
 * fails the plan, reverses what was paid and makes the order payable again;
 * unknown parks the instruction on a de-duplicated query queue whose handler
 * carries on or fails the plan once the channel knows. Everything that writes
 * a plan holds the plan lock, and every write carries its fencing token.
 *
 * Recovery: whatever a run owes is queued before the write that makes it owed.
 * The plan's resume entry is armed before every write that leaves the plan
 * PAYING with a leg to run (start, each SENT), the reversals and the order's
 * expiry before the FAILED write. A delay-queue entry is acked only when its
 * handler returns, and a handler returns only once the plan has left PAYING or
 * after queueing the query that will carry it on; so while a plan is PAYING
 * some entry of it is always queued (or dead-lettered for ops), and every
 * handler carries a PAYING plan on from wherever it stopped.
 *
 * Recovery is timed from the run's own hold on the plan lock: an entry that
 * stands in for a run fires once that hold's lease (plus the query delay) is
 * over. The order's expiry belongs to OrdersService, which this asks to re-arm
 * or cancel it.
 */
@Injectable()
export class PaymentRunner {
  private readonly logger = new Logger(PaymentRunner.name);

  constructor(
    private readonly store: OrdersStore,
    private readonly orders: OrdersService,
    private readonly locks: LockService,
    private readonly queue: DelayQueueService,
    private readonly channels: ChannelGateway,
    private readonly metrics: OrdersMetrics,
    private readonly config: OrdersConfig,
  ) {}

  @DelayQueueHandler({ queue: QUERY_QUEUE, retry: FOLLOW_UP_RETRY, options: () => ({ concurrency: 20 }), metric: 'payment_queries_total{outcome}' })
  onQueryDue(d: Delivery<LegRef>): Promise<void> {
    return this.resolveQuery(d.payload);
  }

  @DelayQueueHandler({ queue: REVERSAL_QUEUE, retry: FOLLOW_UP_RETRY, options: () => ({ concurrency: 20 }) })
  onReversalDue(d: Delivery<ReversalRef>): Promise<void> {
    return this.retryReversal(d.payload, d.attempt);
  }

  @DelayQueueHandler({ queue: RESUME_QUEUE, retry: FOLLOW_UP_RETRY, options: () => ({ concurrency: 20 }) })
  onResumeDue(d: Delivery<PlanRef>): Promise<void> {
    return this.resume(d.payload);
  }

  /**
   * Pays the account's plan under the plan lock: of concurrent calls one runs, the others get 409
   * (or wait, when the payment-plan policy has a wait). A finished plan is returned as it is.
   */
  async pay({ accountId, planId }: PayPlanCommand): Promise<PlanRecord> {
    const pre = await this.store.readPlan(planId);
    if (!pre.plan || pre.plan.accountId !== accountId) throw planNotFound();
    return this.locks.withLock(planLockName(planId), PLAN_LOCK, async (lock) => {
      const s = await this.store.readPlan(planId);
      if (!s.plan || !s.order || s.plan.accountId !== accountId) throw planNotFound();
      const run: Run = { order: s.order, plan: s.plan, lock };
      const { status } = s.plan;
      const t = planTransition(status, 'pay');
      if (!t.ok) throw refusalError(t.refusal, 'pay', { planStatus: status });
      if (followUpOf(t.to) !== 'carry-on') {
        // Finished (PAID or FAILED): returned as it is; a FAILED plan's owed reversals are queued again.
        if (followUpOf(t.to) === 'reversals') await this.requeueReversals(run);
        this.metrics.pays.inc({ outcome: 'done' });
        return s.plan;
      }
      if (t.changed) await this.start(run, s.now);
      return this.proceed(run);
    });
  }

  /** PENDING → PAYING for plan and order together, while the order is still open, unexpired and this is its plan. */
  private async start(run: Run, now: number): Promise<void> {
    const o = run.order;
    const order = o.activePlan === run.plan.planId ? orderTransitionAt(o, 'startPayment', now) : orderTransition(o.status, 'startPayment');
    if (!order.ok) throw refusalError(order.refusal, 'startPayment');
    if (o.activePlan !== run.plan.planId) throw refusalError('PLAN_NOT_PAYABLE', 'startPayment');
    // Should this run stop anywhere from here on, the resume entry carries the PAYING plan on.
    await this.armResume(run);
    crashPoint('orders.pay.after-arm-resume');
    await this.commit(run, { order: { status: order.to }, plan: { status: allowed(planTransition(run.plan.status, 'pay'), 'pay') }, deadline: o.expiresAt });
    crashPoint('orders.pay.after-start');
  }

  /** Runs the instructions not yet done, in order, until the plan is paid, fails, or waits for a query. */
  private async proceed(run: Run): Promise<PlanRecord> {
    const { planId } = run.plan;
    for (const [i, ins] of run.plan.instructions.entries()) {
      if (ins.status === 'SUCCEEDED') continue;
      if (ins.status === 'UNKNOWN') return this.awaitQuery(run, i, 'keep');
      let outcome;
      if (ins.status === 'SENT') {
        // An earlier run stopped during this call: never pay twice, ask the channel what happened.
        outcome = await this.channels.query(ins.method, legReference(run.plan, i), payerOf(run.plan));
      } else {
        if (run.lock.signal.aborted) throw run.lock.signal.reason ?? new LockLostError(run.lock.name, run.lock.owner);
        // Should this run stop during the call or after it, the resume entry finds the plan once the lock's lease is over.
        await this.armResume(run);
        crashPoint('orders.pay.leg.after-arm');
        await this.commitLeg(run, i, { status: 'SENT' });
        crashPoint('orders.pay.leg.after-sent');
        outcome = await this.channels.pay(ins.method, legReference(run.plan, i), ins.amount, payerOf(run.plan));
      }
      crashPoint('orders.pay.leg.after-call');
      if (outcome === 'unknown') {
        await this.commitLeg(run, i, { status: 'UNKNOWN' });
        crashPoint('orders.pay.leg.after-unknown');
        return this.awaitQuery(run, i, 'replace');
      }
      if (outcome === 'failure') return this.fail(run, i, `${ins.method} declined the payment`);
      await this.commitLeg(run, i, { status: 'SUCCEEDED' });
      crashPoint('orders.pay.leg.after-outcome');
    }
    await this.commit(run, {
      order: {
        status: allowed(orderTransition(run.order.status, 'paymentSucceeded'), 'paymentSucceeded'),
        paidAt: serverNow(),
        paidPlan: planId,
        activePlan: '',
      },
      plan: { status: allowed(planTransition(run.plan.status, 'succeed'), 'succeed') },
      event: 'order.paid',
    });
    crashPoint('orders.pay.after-paid');
    this.metrics.pays.inc({ outcome: 'paid' });
    this.metrics.ordersPaid.inc();
    await this.disarmResume(planId);
    await this.orders.disarmExpiry(run.order.orderId);
    return run.plan;
  }

  /**
   * The plan fails at instruction `index`: the order is payable again, and what was paid is given back.
   * Every reversal is queued (and the order's expiry re-armed) before the FAILED write, so neither a death
   * nor a Redis error after it can lose one; the reversals are then tried at once.
   */
  private async fail(run: Run, index: number, reason: string): Promise<PlanRecord> {
    const { planId } = run.plan;
    const { orderId, expiresAt } = run.order;
    const orderTo = allowed(orderTransition(run.order.status, 'paymentFailed'), 'paymentFailed');
    const planTo = allowed(planTransition(run.plan.status, 'fail'), 'fail');
    const instructions = run.plan.instructions.map((ins, j): Instruction => {
      if (j === index) return { ...ins, status: 'FAILED' };
      if (ins.status === 'SUCCEEDED') return { ...ins, reversal: 'PENDING' };
      return j > index ? { ...ins, status: 'SKIPPED' } : ins;
    });
    const owed = [...instructions.keys()].filter((j) => instructions[j].reversal === 'PENDING');
    for (const j of owed) await this.queue.schedule(REVERSAL_QUEUE, legId(planId, j), this.recoveryDue(run), reversalOf(run.plan, j), { ifExists: 'keep' });
    crashPoint('orders.pay.fail.after-reversals');
    // The expiry may have given up (dead-lettered) while the plan was PAYING: an order payable again past its
    // expiresAt must still close. Replacing the entry also restarts its attempts; due in the past means now.
    await this.orders.armExpiry(orderId, expiresAt, 'replace');
    crashPoint('orders.pay.fail.after-expiry');
    await this.commit(run, { order: { status: orderTo, activePlan: '' }, plan: { status: planTo, failureReason: reason, instructions } });
    crashPoint('orders.pay.fail.after-write');
    this.metrics.pays.inc({ outcome: 'failed' });
    await this.disarmResume(planId);
    for (const j of owed) await this.reverse(run, j);
    return run.plan;
  }

  /** One reversal tried inline; its queued entry is cancelled once confirmed, or brought forward to retry soon. */
  private async reverse(run: Run, index: number): Promise<void> {
    const ins = run.plan.instructions[index];
    const id = legId(run.plan.planId, index);
    const outcome = await this.channels.reverse(ins.method, legReference(run.plan, index), ins.amount, payerOf(run.plan));
    crashPoint('orders.reverse.after-call');
    if (outcome === 'success') {
      await this.commitLeg(run, index, { reversal: 'REVERSED' });
      crashPoint('orders.reverse.after-write');
      this.metrics.reversals.inc({ outcome: 'reversed' });
      // Left behind, the entry would only find the reversal done.
      await this.queue.cancel(REVERSAL_QUEUE, id).catch(() => undefined);
      return;
    }
    this.metrics.reversals.inc({ outcome: 'retry' });
    await this.queue.reschedule(REVERSAL_QUEUE, id, { delayMs: this.config.queryDelayMs }).catch(() => undefined);
  }

  /** Queues (if not queued) every reversal a FAILED plan still owes: a lost or cancelled entry is recreated by the next look at the plan. */
  private async requeueReversals(run: Run): Promise<void> {
    const { planId } = run.plan;
    for (const [index, ins] of run.plan.instructions.entries()) {
      if (ins.reversal !== 'PENDING') continue;
      await this.queue.schedule(REVERSAL_QUEUE, legId(planId, index), { delayMs: this.config.queryDelayMs }, reversalOf(run.plan, index), { ifExists: 'keep' });
    }
  }

  /** (Re)arms the plan's resume entry for when this run's lease is over: it finds work only if this run stops. */
  private async armResume(run: Run): Promise<void> {
    const { planId } = run.plan;
    await this.queue.schedule(RESUME_QUEUE, planId, this.recoveryDue(run), { planId });
  }

  /** The plan has left PAYING. Left behind, the entry would only find the plan finished. */
  private async disarmResume(planId: string): Promise<void> {
    await this.queue.cancel(RESUME_QUEUE, planId).catch((err: Error) => this.logger.warn({ planId, err: err.message }, 'could not cancel the resume entry'));
  }

  /** Parks instruction `index` on the query queue: `replace` brings a recovery entry forward, `keep` leaves a queued query as it is. */
  private async awaitQuery(run: Run, index: number, ifExists: 'keep' | 'replace'): Promise<PlanRecord> {
    const { planId } = run.plan;
    await this.queue.schedule(QUERY_QUEUE, legId(planId, index), { delayMs: this.config.queryDelayMs }, { planId, index }, { ifExists });
    this.metrics.pays.inc({ outcome: 'pending' });
    return run.plan;
  }

  /**
   * The query queue's handler: asks the channel, then carries on or fails the plan. Still unknown: throws, so it
   * is retried with backoff. Already settled (an earlier delivery stopped after settling it): carries the plan on.
   */
  private async resolveQuery({ planId, index }: LegRef): Promise<void> {
    await this.underPlanLock(planId, async (run) => {
      const ins = run.plan.instructions[index];
      if (!ins) return;
      const next = followUpOf(run.plan.status);
      if (next === 'reversals') return this.requeueReversals(run);
      if (next !== 'carry-on') return;
      if (ins.status !== 'UNKNOWN' && ins.status !== 'SENT') {
        await this.proceed(run);
        return;
      }
      const outcome = await this.channels.query(ins.method, legReference(run.plan, index), payerOf(run.plan));
      crashPoint('orders.query.after-call');
      this.metrics.queries.inc({ outcome });
      if (outcome === 'unknown') throw new Error(`${ins.method} still reports ${legId(planId, index)} as unknown`);
      if (outcome === 'failure') {
        await this.fail(run, index, `${ins.method} reported the payment failed`);
        return;
      }
      await this.commitLeg(run, index, { status: 'SUCCEEDED' });
      await this.proceed(run);
    });
  }

  /** The resume queue's handler: carries a PAYING plan on from where its run stopped (a FAILED one: its reversals). */
  private async resume({ planId }: PlanRef): Promise<void> {
    await this.underPlanLock(planId, async (run) => {
      const next = followUpOf(run.plan.status);
      if (next === 'reversals') return this.requeueReversals(run);
      if (next === 'carry-on') await this.proceed(run);
    });
  }

  /**
   * The reversal queue's handler: reverses again until the channel confirms. The item carries the leg's channel
   * call, so it gives the money back whether or not the plan is still stored (a dead letter re-driven after the
   * order's retention ended); REVERSED is written only on a plan that is still there, and is the same life (its leg
   * reference). An item of an earlier version (the leg only) needs its plan: without one it cannot advance, so it
   * fails (retried, then dead-lettered) and is logged at error, for ops to reverse by hand.
   */
  private async retryReversal(item: ReversalRef, attempt: number): Promise<void> {
    const { planId, index } = item;
    await this.locks.withLock(planLockName(planId), PLAN_LOCK, async (lock) => {
      const s = await this.store.readPlan(planId);
      const ins = s.plan?.instructions[index];
      const sameLife = s.plan && ins && (!isSelfSufficient(item) || legReference(s.plan, index) === item.ref);
      if (s.plan && s.order && ins && sameLife) {
        const run: Run = { order: s.order, plan: s.plan, lock };
        if (ins.reversal !== 'PENDING') return;
        await this.reverseOrThrow(item, ins.method, legReference(run.plan, index), ins.amount, payerOf(run.plan));
        await this.commitLeg(run, index, { reversal: 'REVERSED' });
        return;
      }
      if (!isSelfSufficient(item)) {
        this.metrics.reversals.inc({ outcome: 'orphaned' });
        if (attempt === 1) {
          this.logger.error(
            { queue: REVERSAL_QUEUE, id: legId(planId, index) },
            'a reversal owed by a plan that is no longer stored, queued without its leg: reverse it at the channel by hand, then delete the item',
          );
        }
        throw new Error(`plan ${planId} is no longer stored and the item does not name the leg to reverse: reverse it by hand, then delete the item`);
      }
      await this.reverseOrThrow(item, item.method, item.ref, item.amount, { accountId: item.accountId, currency: item.currency });
      this.logger.log({ queue: REVERSAL_QUEUE, id: legId(planId, index) }, 'reversed a leg whose plan is no longer stored');
    });
  }

  /** One reversal call of a queued item: throws (to be retried) unless the channel confirms. */
  private async reverseOrThrow(item: LegRef | SelfSufficientReversal, method: Instruction['method'], ref: string, amount: number, payer: Payer): Promise<void> {
    const outcome = await this.channels.reverse(method, ref, amount, payer);
    if (outcome !== 'success') {
      this.metrics.reversals.inc({ outcome: 'retry' });
      throw new Error(`${method} did not confirm the reversal of ${legId(item.planId, item.index)} (${outcome})`);
    }
    this.metrics.reversals.inc({ outcome: 'reversed' });
  }

  /**
   * When an entry standing in for this run is due: once the run's own hold on the plan lock has run out, should
   * the run die (mid-call or between calls), plus the query delay. The hold's lease end is on the Redis clock, as
   * the delay queue's due times are.
   */
  private recoveryDue(run: Run): When {
    return { dueAt: run.lock.expiresAt + this.config.queryDelayMs };
  }

  /**
   * Runs a query or resume handler on the plan under its lock. A plan no longer stored (its order's retention ended
   * while the entry was dead-lettered) cannot be carried on: the entry fails, so it stays in view (retried, then
   * dead-lettered and logged at error) for ops to settle its legs at the channels by hand, instead of vanishing.
   */
  private async underPlanLock(planId: string, fn: (run: Run) => Promise<void>): Promise<void> {
    await this.locks.withLock(planLockName(planId), PLAN_LOCK, async (lock) => {
      const s = await this.store.readPlan(planId);
      if (!s.plan || !s.order) {
        throw new Error(
          `plan ${planId} is no longer stored: settle its legs at the channels by hand (their references start ${planId}:), then delete the item`,
        );
      }
      await fn({ order: s.order, plan: s.plan, lock });
    });
  }

  /** Writes one instruction's new state (the plan only). */
  private commitLeg(run: Run, index: number, change: Partial<Instruction>): Promise<void> {
    const instructions = run.plan.instructions.map((ins, j) => (j === index ? { ...ins, ...change } : ins));
    return this.commit(run, { plan: { instructions } });
  }

  /** write-4 with the versions this run last saw and the plan lock's token; the run's records follow the write. */
  private async commit(run: Run, change: { order?: FieldUpdates; plan: FieldUpdates; event?: OrderEventType; deadline?: number }): Promise<void> {
    const r = await this.store.write({
      orderId: run.order.orderId,
      number: run.order,
      planId: run.plan.planId,
      guard: { lock: 'plan', token: run.lock.fencingToken },
      ...(change.order ? { order: { version: run.order.version, set: change.order } } : {}),
      plan: { version: run.plan.version, set: change.plan },
      event: change.event,
      deadline: change.deadline,
    });
    expectWritten(r);
    const resolve = (set: FieldUpdates) => Object.fromEntries(Object.entries(set).map(([k, v]) => [k, v instanceof ServerClock ? r.now + v.offsetMs : v]));
    if (change.order) run.order = { ...run.order, ...resolve(change.order), version: r.orderVersion, updatedAt: r.now };
    run.plan = { ...run.plan, ...resolve(change.plan), version: r.planVersion, updatedAt: r.now };
  }
}

/** Who pays the plan's legs, in its currency. */
const payerOf = (plan: PlanRecord): Payer => ({ accountId: plan.accountId, currency: plan.currency });

/** The status an allowed transition leads to; a transition the state machines refuse here is a bug. */
function allowed<S extends string>(t: Transition<S>, action: OrderAction | PlanAction): S {
  if (!t.ok) throw refusalError(t.refusal, action);
  return t.to;
}
