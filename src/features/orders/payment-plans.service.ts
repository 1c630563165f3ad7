import { Injectable } from '@nestjs/common';
import { crashPoint } from '../../platform/core/crash-points';
import { sha256Hex } from '../../platform/core/digest';
import { LockService } from '../../engines/locks/lock.service';
import type { CreatePlanCommand } from './order.commands';
import { expectWritten, invalidField, orderConflict, orderNotFound, planNotFound, refusalError } from './order.errors';
import { planIdFor } from './order.keys';
import { ORDER_LOCK, orderLockName } from './order-locks';
import { orderTransitionAt, planTransition } from './order-state';
import { payableBy } from './order.views';
import type { Instruction, PlanRecord } from './order.types';
import { OrdersMetrics } from './orders.metrics';
import { OrdersStore, serverNow } from './orders.store';
import { PendingOrders } from './pending-orders';

/**
 * The most plans one order takes (each a key kept for the retention time; plan ids have room for 999,999).
 * A checkout that needs more is abuse, not payment.
 */
export const MAX_PLANS_PER_ORDER = 100;

/** The 409 of a plan past MAX_PLANS_PER_ORDER. */
export const planLimitReached = () =>
  orderConflict('PLAN_LIMIT', `The order has had ${MAX_PLANS_PER_ORDER} payment plans, the most it takes; pay the current one or start a new order`);

/**
 * Payment plans (the sub-orders of a master order), created under the
 * master-order lock so that an order never has two plans that may run. The
 * first plan binds the order to the paying account (an order created for a
 * named payer is bound to it from the start); from then on the order and its
 * plans are 404 for every other account.
 */
@Injectable()
export class PaymentPlansService {
  constructor(
    private readonly store: OrdersStore,
    private readonly locks: LockService,
    private readonly metrics: OrdersMetrics,
    private readonly pending: PendingOrders,
  ) {}

  /**
   * Creates the order's plan. The same instructions again while that plan has not started return it
   * (`created` false); other instructions replace it (it becomes SUPERSEDED). Once a plan is being paid,
   * or the order is paid, closed or expired: 409.
   */
  async create({ accountId, orderId, instructions: input }: CreatePlanCommand): Promise<{ plan: PlanRecord; created: boolean }> {
    // A pending order (answered by another module, not stored yet) is stored here: its payer can pay it at once.
    const pre = await this.pending.readForPayer(accountId, orderId);
    if (!payableBy(pre, accountId)) throw orderNotFound();
    const sum = input.reduce((s, i) => s + i.amount, 0);
    if (sum !== pre.amount) throw invalidField('instructions', `amounts add up to ${sum}, the order amount is ${pre.amount}`);
    const fingerprint = sha256Hex(JSON.stringify(input.map((i) => [i.method, i.amount])));

    return this.locks.withLock(orderLockName(orderId), ORDER_LOCK, async (lock) => {
      const s = await this.store.readWithActivePlan(orderId);
      const o = s.order;
      if (!payableBy(o, accountId)) throw orderNotFound();
      const t = orderTransitionAt(o, 'createPlan', s.now);
      if (!t.ok) throw refusalError(t.refusal, 'createPlan', { activePlan: o.activePlan });
      const guard = { lock: 'order' as const, token: lock.fencingToken };

      let orderVersion = o.version;
      // The active plan is replaced only while it has not started (PENDING: it can be superseded).
      const supersede = s.plan ? planTransition(s.plan.status, 'supersede') : undefined;
      const active = supersede?.ok ? s.plan : null;
      if (active?.fingerprint === fingerprint) return { plan: active, created: false };
      if (o.planSeq >= MAX_PLANS_PER_ORDER) throw planLimitReached();
      if (active && supersede?.ok) {
        const r = await this.store.write({
          orderId,
          number: o,
          planId: active.planId,
          guard,
          order: { version: orderVersion, set: { activePlan: '' } },
          plan: { version: active.version, set: { status: supersede.to } },
        });
        expectWritten(r);
        orderVersion = r.orderVersion;
        crashPoint('orders.plan.after-supersede');
      }

      const seq = o.planSeq + 1;
      const planId = planIdFor(orderId, seq);
      const instructions: Instruction[] = input.map((i) => ({ method: i.method, amount: i.amount, status: 'PENDING' }));
      const legStamp = String(o.createdAt);
      const r = await this.store.write({
        orderId,
        number: o,
        planId,
        guard,
        order: { version: orderVersion, set: { planSeq: seq, activePlan: planId, accountId } },
        plan: {
          version: 0,
          set: {
            planId,
            orderId,
            accountId,
            status: 'PENDING',
            amount: o.amount,
            currency: o.currency,
            fingerprint,
            instructions,
            createdAt: serverNow(),
            failureReason: '',
            legStamp,
          },
        },
        deadline: o.expiresAt,
      });
      expectWritten(r);
      crashPoint('orders.plan.after-write');
      this.metrics.plansCreated.inc();
      const plan: PlanRecord = {
        planId,
        orderId,
        accountId,
        status: 'PENDING',
        version: r.planVersion,
        amount: o.amount,
        currency: o.currency,
        fingerprint,
        instructions,
        createdAt: r.now,
        updatedAt: r.now,
        failureReason: '',
        legStamp,
      };
      return { plan, created: true };
    });
  }

  /** One of the account's plans; another account's: 404. */
  async get(accountId: string, planId: string): Promise<PlanRecord> {
    const { plan } = await this.store.readPlan(planId);
    if (!plan || plan.accountId !== accountId) throw planNotFound();
    return plan;
  }
}
