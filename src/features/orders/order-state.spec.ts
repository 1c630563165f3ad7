import { ORDER_STATUSES, PLAN_STATUSES, type OrderStatus, type PlanStatus } from './order.types';
import {
  expiryStepOf,
  followUpOf,
  ORDER_ACTIONS,
  orderTransition,
  orderTransitionAt,
  PLAN_ACTIONS,
  planTransition,
  type OrderAction,
  type PlanAction,
  type Refusal,
} from './order-state';

/** A transition as one cell of the table: the status it leads to, or the refusal. */
const cell = <S extends string>(t: { ok: true; to: S } | { ok: false; refusal: Refusal | 'ORDER_EXPIRED' }) => (t.ok ? t.to : `refused ${t.refusal}`);

describe('order state machine', () => {
  // Every status × every action, written out in full: a rule changed anywhere changes one cell here.
  const expected: Record<OrderStatus, Record<OrderAction, string>> = {
    CREATED: { createPlan: 'CREATED', startPayment: 'PAYING', paymentSucceeded: 'refused ILLEGAL', paymentFailed: 'refused ILLEGAL', close: 'CLOSED' },
    PAYING: {
      createPlan: 'refused ORDER_PAYING',
      startPayment: 'refused PLAN_NOT_PAYABLE',
      paymentSucceeded: 'PAID',
      paymentFailed: 'CREATED',
      close: 'refused ORDER_PAYING',
    },
    PAID: {
      createPlan: 'refused ORDER_PAID',
      startPayment: 'refused ORDER_PAID',
      paymentSucceeded: 'refused ILLEGAL',
      paymentFailed: 'refused ILLEGAL',
      close: 'refused ORDER_PAID',
    },
    CLOSED: {
      createPlan: 'refused ORDER_CLOSED',
      startPayment: 'refused ORDER_CLOSED',
      paymentSucceeded: 'refused ILLEGAL',
      paymentFailed: 'refused ILLEGAL',
      close: 'CLOSED',
    },
  };
  const cases = ORDER_STATUSES.flatMap((from) => ORDER_ACTIONS.map((action) => [from, action] as const));

  it('covers every status and every action', () => {
    expect(cases).toHaveLength(ORDER_STATUSES.length * ORDER_ACTIONS.length);
    expect(Object.keys(expected).sort()).toEqual([...ORDER_STATUSES].sort());
  });

  it.each(cases)('%s + %s', (from, action) => {
    expect(cell(orderTransition(from, action))).toBe(expected[from][action]);
  });

  it.each(cases)('%s + %s: changed exactly when the status moves', (from, action) => {
    const t = orderTransition(from, action);
    if (t.ok) expect(t.changed).toBe(t.to !== from);
    else expect(t).toEqual({ ok: false, refusal: expect.any(String) });
  });

  describe('with the deadline', () => {
    const now = 1_000_000;
    it.each(cases)('%s + %s: past expiresAt, only the actions that take money are refused ORDER_EXPIRED, after the status rules', (from, action) => {
      const before = orderTransitionAt({ status: from, expiresAt: now + 1 }, action, now);
      const at = orderTransitionAt({ status: from, expiresAt: now }, action, now);
      expect(before).toEqual(orderTransition(from, action));
      const takesMoney = action === 'createPlan' || action === 'startPayment';
      expect(cell(at)).toBe(takesMoney && orderTransition(from, action).ok ? 'refused ORDER_EXPIRED' : expected[from][action]);
    });
  });

  it.each([...ORDER_STATUSES, undefined])('expiry of an order %s', (status) => {
    const want: Record<string, string> = { CREATED: 'close', PAYING: 'later', PAID: 'done', CLOSED: 'done', none: 'done' };
    expect(expiryStepOf(status)).toBe(want[status ?? 'none']);
  });
});

describe('plan state machine', () => {
  const expected: Record<PlanStatus, Record<PlanAction, string>> = {
    PENDING: { pay: 'PAYING', supersede: 'SUPERSEDED', cancel: 'CANCELLED', succeed: 'refused ILLEGAL', fail: 'refused ILLEGAL' },
    PAYING: { pay: 'PAYING', supersede: 'refused ILLEGAL', cancel: 'refused ILLEGAL', succeed: 'PAID', fail: 'FAILED' },
    PAID: { pay: 'PAID', supersede: 'refused ILLEGAL', cancel: 'refused ILLEGAL', succeed: 'refused ILLEGAL', fail: 'refused ILLEGAL' },
    FAILED: { pay: 'FAILED', supersede: 'refused ILLEGAL', cancel: 'refused ILLEGAL', succeed: 'refused ILLEGAL', fail: 'refused ILLEGAL' },
    SUPERSEDED: {
      pay: 'refused PLAN_NOT_PAYABLE',
      supersede: 'refused ILLEGAL',
      cancel: 'refused ILLEGAL',
      succeed: 'refused ILLEGAL',
      fail: 'refused ILLEGAL',
    },
    CANCELLED: {
      pay: 'refused PLAN_NOT_PAYABLE',
      supersede: 'refused ILLEGAL',
      cancel: 'refused ILLEGAL',
      succeed: 'refused ILLEGAL',
      fail: 'refused ILLEGAL',
    },
  };
  const cases = PLAN_STATUSES.flatMap((from) => PLAN_ACTIONS.map((action) => [from, action] as const));

  it('covers every status and every action', () => {
    expect(cases).toHaveLength(PLAN_STATUSES.length * PLAN_ACTIONS.length);
    expect(Object.keys(expected).sort()).toEqual([...PLAN_STATUSES].sort());
  });

  it.each(cases)('%s + %s', (from, action) => {
    expect(cell(planTransition(from, action))).toBe(expected[from][action]);
  });

  it.each(cases)('%s + %s: changed exactly when the status moves', (from, action) => {
    const t = planTransition(from, action);
    if (t.ok) expect(t.changed).toBe(t.to !== from);
    else expect(t).toEqual({ ok: false, refusal: expect.any(String) });
  });

  it('a finished plan (PAID, FAILED) is a dead end: no action moves it', () => {
    for (const from of ['PAID', 'FAILED'] as const) {
      for (const action of PLAN_ACTIONS) {
        const t = planTransition(from, action);
        expect(t.ok ? t.to : from).toBe(from);
      }
    }
  });

  it.each(PLAN_STATUSES)('a background look at a %s plan', (status) => {
    const want: Record<PlanStatus, string> = { PENDING: 'none', PAYING: 'carry-on', PAID: 'none', FAILED: 'reversals', SUPERSEDED: 'none', CANCELLED: 'none' };
    expect(followUpOf(status)).toBe(want[status]);
  });
});
