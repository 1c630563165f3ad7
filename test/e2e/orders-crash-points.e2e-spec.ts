import Redis from 'ioredis';
import type { AppConfig } from '../../src/platform/config/app-config';
import { reversalReference } from '../../src/features/orders/channels/wallet-channel';
import { channelLedgerKey, orderIndexKey, orderKeys, orderNumberKeyOf } from '../../src/features/orders/order.keys';
import { EXPIRY_QUEUE, legReference, QUERY_QUEUE, RESUME_QUEUE, REVERSAL_QUEUE } from '../../src/features/orders/order-queues';
import type { Instruction, OrderStatus, PaymentMethod, PlanStatus } from '../../src/features/orders/order.types';
import { queueKeys } from '../../src/engines/delay-queue/delay-queue.keys';
import { KeyBuilder } from '../../src/platform/redis/key-builder';
import { waitUntil } from '../harness/redis-process';
import { randomPrefix, RedisServerHandle, startRedisServer } from '../harness/redis-server';
import { expectInvariants } from '../support/invariants';
import { diedAtCrashPoint, ServiceProcess, startServiceProcess } from '../support/service-process';
import { CREDS, merchantHeaders, userToken } from '../support/test-app';

/**
 * The orders' multi-step writes killed at each step boundary (src/platform/core/crash-points.ts): the built service
 * (dist/main.js; `npx nest build` first) runs with CRASH_AT=<boundary> and dies there with SIGKILL, the caller never
 * retries, a fresh instance starts on the same Redis, and each order and plan converges exactly once: PAID with each
 * leg taken once, FAILED with every taken leg given back once, or CLOSED; the payer's wallet holds its top-up less
 * what a PAID order took, and the invariant sweep is clean.
 *
 * One Redis, every boundary in one go, in four phases:
 * 1. the crashes, four instances at a time (the query's case alone first: any live instance may run a query). A dead
 *    run's entries are due once its plan lock's lease (30 s) is over, so no crashing instance carries on another's
 *    plan (and dies at its own boundary in it): the phase must end within that lease;
 * 2. a fresh instance E carries every plan on, until the payment queues are empty;
 * 3. E stops; an instance armed with the expiry's boundary dies closing the first order that expires;
 * 4. a last instance F closes the rest and takes over the expiry entry the dead one held.
 * The orders live one minute (the shortest expireMinutes): the file runs in about two minutes.
 */
const ENV = {
  CHANNEL_LATENCY_MS: '2',
  // points declines every payment; ebanking answers unknown and its queries say paid; balance is the payer's wallet.
  CHANNEL_OUTCOMES: 'points.pay=failure,ebanking.pay=unknown,ebanking.query=success',
  ORDERS_QUERY_DELAY_MS: '200',
};
/** The payment-plan lock's lease (the default): a dead run's resume and reversal entries are due when it is over. */
const PLAN_LEASE_MS = 30_000;
/** A plan whose run died settles within this of its entries being due and a fresh instance being up. */
const RECOVERY_MS = 10_000;
/** A query delivery that died with its instance is delivered again after the delay queue's visibility timeout. */
const VISIBILITY_MS = 30_000;
/**
 * An order not paid closes within this of its expiresAt, counting only the time a working instance was up: between
 * E's stop and F's start only the instance that dies at its first close runs, and an order due then waits for F.
 */
const EXPIRY_BOUND_MS = 15_000;
const TOP_UP = 5000;
const AMOUNT = 3000;
/** Every plan's first leg: from the payer's wallet. */
const BALANCE_LEG = 2000;
const LEGS = {
  paid: [
    { method: 'balance', amount: BALANCE_LEG },
    { method: 'quickpay', amount: 1000 },
  ],
  declined: [
    { method: 'balance', amount: BALANCE_LEG },
    { method: 'points', amount: 1000 },
  ],
  unknown: [
    { method: 'balance', amount: BALANCE_LEG },
    { method: 'ebanking', amount: 1000 },
  ],
} as const satisfies Record<string, ReadonlyArray<{ method: PaymentMethod; amount: number }>>;

/** What the crashing instance is doing when it dies: the call it never answers (or, `replies`, answers before). */
type Flow = 'create' | 'plan' | 'supersede' | 'pay' | 'close';
interface Case {
  /** The boundary, `<name>` or `<name>#<n>` (the n-th time it is reached: #2 is the second leg). */
  at: string;
  flow: Flow;
  legs?: keyof typeof LEGS;
  /** Where it ends: the order's status ('none': never written) and its plan's. */
  order: OrderStatus | 'none';
  plan?: PlanStatus;
  /** The call that reached the boundary is answered (the death comes later, in a background handler). */
  replies?: boolean;
}
const CASES: Case[] = [
  { at: 'orders.query.after-call', flow: 'pay', legs: 'unknown', order: 'PAID', plan: 'PAID', replies: true },
  { at: 'orders.create.after-expiry', flow: 'create', order: 'none' },
  { at: 'orders.create.after-write', flow: 'create', order: 'CLOSED' },
  { at: 'orders.plan.after-supersede', flow: 'supersede', legs: 'paid', order: 'CLOSED', plan: 'SUPERSEDED' },
  { at: 'orders.plan.after-write', flow: 'plan', legs: 'paid', order: 'CLOSED', plan: 'CANCELLED' },
  { at: 'orders.pay.after-arm-resume', flow: 'pay', legs: 'paid', order: 'CLOSED', plan: 'CANCELLED' },
  { at: 'orders.pay.after-start', flow: 'pay', legs: 'paid', order: 'PAID', plan: 'PAID' },
  { at: 'orders.pay.leg.after-arm#1', flow: 'pay', legs: 'paid', order: 'PAID', plan: 'PAID' },
  { at: 'orders.pay.leg.after-arm#2', flow: 'pay', legs: 'paid', order: 'PAID', plan: 'PAID' },
  // Marked SENT, never sent: the channel knows no such payment, so the plan fails (the first leg given back).
  { at: 'orders.pay.leg.after-sent#1', flow: 'pay', legs: 'paid', order: 'CLOSED', plan: 'FAILED' },
  { at: 'orders.pay.leg.after-sent#2', flow: 'pay', legs: 'paid', order: 'CLOSED', plan: 'FAILED' },
  { at: 'orders.pay.leg.after-call#1', flow: 'pay', legs: 'paid', order: 'PAID', plan: 'PAID' },
  { at: 'orders.pay.leg.after-call#2', flow: 'pay', legs: 'paid', order: 'PAID', plan: 'PAID' },
  { at: 'orders.pay.leg.after-call#2', flow: 'pay', legs: 'declined', order: 'CLOSED', plan: 'FAILED' },
  { at: 'orders.pay.leg.after-outcome#1', flow: 'pay', legs: 'paid', order: 'PAID', plan: 'PAID' },
  { at: 'orders.pay.leg.after-outcome#2', flow: 'pay', legs: 'paid', order: 'PAID', plan: 'PAID' },
  { at: 'orders.pay.leg.after-unknown', flow: 'pay', legs: 'unknown', order: 'PAID', plan: 'PAID' },
  { at: 'orders.pay.after-paid', flow: 'pay', legs: 'paid', order: 'PAID', plan: 'PAID' },
  { at: 'orders.pay.fail.after-reversals', flow: 'pay', legs: 'declined', order: 'CLOSED', plan: 'FAILED' },
  { at: 'orders.pay.fail.after-expiry', flow: 'pay', legs: 'declined', order: 'CLOSED', plan: 'FAILED' },
  { at: 'orders.pay.fail.after-write', flow: 'pay', legs: 'declined', order: 'CLOSED', plan: 'FAILED' },
  { at: 'orders.reverse.after-call', flow: 'pay', legs: 'declined', order: 'CLOSED', plan: 'FAILED' },
  { at: 'orders.reverse.after-write', flow: 'pay', legs: 'declined', order: 'CLOSED', plan: 'FAILED' },
  { at: 'orders.close.after-write', flow: 'close', order: 'CLOSED' },
];
/** Phase 3's boundary: the expiry's close written, its entry not yet acked. */
const EXPIRE_AT = 'orders.expire.after-write';
const NAMES = CASES.map((c) => `${c.at}${c.legs ? ` (${c.legs})` : ''}`);

/** What a case left behind when its instance died. */
interface Crashed {
  merchantOrderNo: string;
  account: string;
  orderId?: string;
  /** The plan the case is about (the superseded one for the supersede case). */
  planId?: string;
  /** When the instance died, epoch ms. */
  diedAt: number;
  reply: number | 'none';
}

describe('orders: crash points', () => {
  let redis: RedisServerHandle;
  let raw: Redis;
  const prefix = randomPrefix();
  const keys = new KeyBuilder({ redis: { keyPrefix: prefix } } as AppConfig);
  const started: ServiceProcess[] = [];
  const crashed = new Map<number, Crashed>();
  let eReady = 0;
  /** When E stopped and when F was up: no instance closed orders in between. */
  let eStopped = 0;
  let fReady = 0;
  let fresh: ServiceProcess;
  /** The order whose expiry's instance died (phase 3), and when. */
  let expired: { orderId: string; diedAt: number };

  const start = async (crashAt?: string[]) => {
    const svc = await startServiceProcess(redis.url, prefix, { crashAt, env: ENV });
    started.push(svc);
    return svc;
  };
  const send = (svc: ServiceProcess, method: string, path: string, headers: Record<string, string>, body?: unknown) =>
    svc.call(path, {
      method,
      headers: { ...headers, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
  const merchant = (svc: ServiceProcess, method: string, path: string, body?: unknown) => {
    const text = body === undefined ? '' : JSON.stringify(body);
    return svc.call(path, { method, headers: merchantHeaders(method, path, text), ...(text ? { body: text } : {}) });
  };
  const user = (svc: ServiceProcess, account: string, path: string, body?: unknown) =>
    send(svc, 'POST', path, { authorization: `Bearer ${userToken(account)}` }, body);
  const admin = (svc: ServiceProcess, method: string, path: string, body?: unknown) => send(svc, method, path, { 'x-admin-key': CREDS.adminKey }, body);
  const json = async <T>(res: Promise<Response>, status: number): Promise<T> => {
    const r = await res;
    const body = await r.text();
    if (r.status !== status) throw new Error(`${r.status} (expected ${status}): ${body}`);
    return JSON.parse(body) as T;
  };

  /** Runs case `i` on an instance armed with its boundary, up to the death there. */
  const crash = async (c: Case, i: number): Promise<void> => {
    const name = c.at.replace(/#.*/, '');
    const svc = await start([c.at]);
    const account = `cp${process.pid}-${i}`;
    const no = `cp-${process.pid}-${i}`;
    const left: Crashed = { merchantOrderNo: no, account, diedAt: 0, reply: 'none' };
    crashed.set(i, left);
    await json(admin(svc, 'POST', `/admin/wallets/account:${account}/top-ups`, { amount: TOP_UP, currency: 'CNY', reference: `top-up-${account}` }), 201);
    const create = () =>
      merchant(svc, 'POST', '/merchant/orders', { merchantOrderNo: no, amount: AMOUNT, currency: 'CNY', subject: 'Crash', expireMinutes: 1 });
    const plan = (legs: keyof typeof LEGS) => user(svc, account, `/orders/${left.orderId}/payment-plans`, { instructions: LEGS[legs] });
    let last: Promise<Response>;
    if (c.flow === 'create') last = create();
    else {
      left.orderId = (await json<{ orderId: string }>(create(), 201)).orderId;
      if (c.flow === 'close') last = merchant(svc, 'POST', `/merchant/orders/${no}/close`);
      else if (c.flow === 'plan') last = plan(c.legs!);
      else {
        left.planId = (await json<{ planId: string }>(plan(c.legs!), 201)).planId;
        last = c.flow === 'supersede' ? plan('declined') : user(svc, account, `/payment-plans/${left.planId}/pay`);
      }
    }
    const reply = last.then(
      (r) => r.status,
      () => 'none' as const,
    );
    await diedAtCrashPoint(svc, name);
    left.diedAt = Date.now();
    left.reply = await reply;
    if (c.flow === 'create') left.orderId = (await raw.get(orderIndexKey(keys, orderNumberKeyOf(CREDS.merchantId, no)))) ?? undefined;
    if (c.flow === 'plan') left.planId = (await raw.hget(orderKeys(keys, left.orderId!)[0], 'activePlan')) || undefined;
  };

  const queueCounts = async (svc: ServiceProcess, q: string) => {
    const res = await admin(svc, 'GET', `/admin/delay-queues/${q}`);
    if (res.status === 404) return { pending: 0, ready: 0, inFlight: 0, dead: 0 };
    return (await res.json()) as { pending: number; ready: number; inFlight: number; dead: number };
  };
  /** True once `queues` hold nothing (else what they hold). */
  const drained = async (svc: ServiceProcess, queues: string[]) => {
    for (const q of queues) {
      const s = await queueCounts(svc, q);
      if (s.pending + s.ready + s.inFlight + s.dead > 0) return `${q}: ${JSON.stringify(s)}`;
    }
    return true;
  };
  const PAYMENT_QUEUES = [RESUME_QUEUE, REVERSAL_QUEUE, QUERY_QUEUE];

  beforeAll(async () => {
    redis = await startRedisServer();
    raw = new Redis(redis.url);
    // 1. The crashes: the query's case alone, then the others four at a time.
    const phaseStart = Date.now();
    await crash(CASES[0], 0);
    const queue = [...CASES.keys()].slice(1);
    const worker = async () => {
      for (let i = queue.shift(); i !== undefined; i = queue.shift()) await crash(CASES[i], i);
    };
    await Promise.all([worker(), worker(), worker(), worker()]);
    const phase = Date.now() - phaseStart;
    if (phase >= PLAN_LEASE_MS) throw new Error(`the crashes took ${phase} ms, longer than the plan lease: a crashing instance may have run another's plan`);
    // 2. E carries every plan on: the payment queues empty once every dead run's entries were due and handled.
    const e = await start();
    eReady = Date.now();
    const lastDeath = Math.max(...[...crashed.values()].map((c) => c.diedAt));
    await waitUntil(
      'the payment queues to drain',
      () => drained(e, PAYMENT_QUEUES),
      Math.max(lastDeath + PLAN_LEASE_MS, crashed.get(0)!.diedAt + VISIBILITY_MS) - Date.now() + RECOVERY_MS,
      250,
    );
    await e.kill();
    eStopped = Date.now();
    // 3. Alone, an instance armed with the expiry's boundary: it dies closing the first order that expires.
    const x = await start([EXPIRE_AT]);
    const ids = [...crashed.values()].map((c) => c.orderId).filter((id): id is string => !!id);
    const firstExpiry = Math.min(...(await Promise.all(ids.map(async (id) => Number(await raw.hget(orderKeys(keys, id)[0], 'expiresAt'))))));
    await diedAtCrashPoint(x, EXPIRE_AT, Math.max(firstExpiry - Date.now(), 0) + EXPIRY_BOUND_MS);
    const [held] = await raw.zrange(queueKeys(keys, EXPIRY_QUEUE).keys[2], '0', '-1');
    expired = { orderId: held, diedAt: Date.now() };
    // 4. F finishes.
    fresh = await start();
    fReady = Date.now();
  }, 200_000);
  afterAll(async () => {
    for (const svc of started) await svc.kill();
    raw?.disconnect();
    await redis?.destroy();
  });

  /** When an order due at `expiresAt` must be closed: EXPIRY_BOUND_MS of working-instance time after it. */
  const closeDeadline = (expiresAt: number) => {
    if (expiresAt >= fReady) return expiresAt + EXPIRY_BOUND_MS;
    const upBefore = Math.max(0, eStopped - expiresAt);
    return upBefore >= EXPIRY_BOUND_MS ? expiresAt + EXPIRY_BOUND_MS : fReady + EXPIRY_BOUND_MS - upBefore;
  };

  const eventsOf = async (orderId: string) => {
    const [, , eventsKey] = orderKeys(keys, orderId);
    return (await raw.xrange(eventsKey, '-', '+'))
      .map(([, f]) => f)
      .filter((f) => f[f.indexOf('orderId') + 1] === orderId)
      .map((f) => f[f.indexOf('type') + 1]);
  };
  const readPlan = async (orderId: string, planId: string) => {
    const h = await raw.hgetall(orderKeys(keys, orderId, planId)[1]);
    return {
      planId,
      status: h.status as PlanStatus,
      legStamp: h.legStamp,
      updatedAt: Number(h.updatedAt),
      instructions: JSON.parse(h.instructions) as Instruction[],
    };
  };

  it.each(CASES.map((c, i) => [NAMES[i], i] as const))(
    '%s: converges exactly once, money conserved',
    async (_name, i) => {
      const c = CASES[i];
      const left = crashed.get(i)!;
      expect(left.reply).toBe(c.replies ? 202 : 'none');
      const get = () => merchant(fresh, 'GET', `/merchant/orders/${left.merchantOrderNo}`);
      if (c.order === 'none') {
        // Cut before its write: the order never existed, and its expiry entry found nothing to close.
        expect(left.orderId).toBeUndefined();
        expect((await get()).status).toBe(404);
        return;
      }
      const orderId = left.orderId!;
      const [orderKey] = orderKeys(keys, orderId);
      const expiresAt = Number(await raw.hget(orderKey, 'expiresAt'));
      const deadline = closeDeadline(expiresAt);
      await waitUntil(
        `order ${orderId} ${c.order} (expires ${expiresAt - eStopped} ms after E stopped, F up ${fReady - eStopped} ms after)`,
        async () => (await raw.hget(orderKey, 'status')) === c.order,
        c.order === 'CLOSED' ? deadline - Date.now() : 1000,
        100,
      );
      const order = await raw.hgetall(orderKey);
      const closeReason = c.flow === 'close' ? 'MERCHANT' : 'EXPIRED';
      if (c.order === 'CLOSED') expect([order.closeReason, Number(order.closedAt) <= deadline || c.flow === 'close']).toEqual([closeReason, true]);
      // Exactly once: one event of each kind.
      expect(await eventsOf(orderId)).toEqual(['order.created', c.order === 'PAID' ? 'order.paid' : 'order.closed']);
      const seen = (await (await get()).json()) as { status: string };
      expect(seen.status).toBe(c.order);

      // The plan: settled within its bound, each leg taken at most once, every taken leg of a failed plan given back once.
      const wallet = (await (await admin(fresh, 'GET', `/admin/wallets/account:${left.account}?limit=100`)).json()) as {
        balances: Array<{ currency: string; balance: number }>;
        entries: Array<{ kind: string; amount: number; reference: string }>;
      };
      const balance = wallet.balances.find((b) => b.currency === 'CNY')?.balance;
      expect(balance).toBe(TOP_UP - (c.order === 'PAID' ? BALANCE_LEG : 0));
      if (!left.planId) {
        expect(wallet.entries.map((e) => e.kind)).toEqual(['top-up']);
        return;
      }
      const plan = await readPlan(orderId, left.planId);
      expect(plan.status).toBe(c.plan);
      if (c.plan === 'PAID' || c.plan === 'FAILED') {
        // Settled by the run before it died, or once its entries were due (a query's: its visibility timeout) on E.
        const due = left.diedAt + (c.replies ? VISIBILITY_MS : PLAN_LEASE_MS);
        expect(plan.updatedAt).toBeLessThanOrEqual(Math.max(due, eReady) + RECOVERY_MS);
      }
      const legs = LEGS[c.legs!];
      for (const [j, ins] of plan.instructions.entries()) {
        const ref = legReference(plan, j);
        const taken = ins.status === 'SUCCEEDED';
        const reversed = ins.reversal === 'REVERSED';
        if (plan.status === 'FAILED') expect([j, ins.reversal]).toEqual([j, taken ? 'REVERSED' : undefined]);
        if (plan.status === 'PAID') expect([j, ins.status]).toEqual([j, 'SUCCEEDED']);
        if (legs[j].method === 'balance') {
          const of = (kind: string, reference: string) => wallet.entries.filter((e) => e.kind === kind && e.reference === reference).map((e) => e.amount);
          expect([of('payment', ref), of('reversal', reversalReference(ref))]).toEqual([taken ? [-ins.amount] : [], reversed ? [ins.amount] : []]);
        } else {
          const entry = await raw.hgetall(channelLedgerKey(keys, legs[j].method, ref));
          expect([j, entry.state === 'paid', Number(entry.refunds ?? 0), Number(entry.payCalls ?? 0) <= 1]).toEqual([j, taken, reversed ? 1 : 0, true]);
        }
      }
    },
    120_000,
  );

  it(`${EXPIRE_AT}: the order its instance closed stays closed once, and its expiry entry is taken over and acked`, async () => {
    expect(expired.orderId).toBeDefined();
    const [orderKey] = orderKeys(keys, expired.orderId);
    expect(await raw.hmget(orderKey, 'status', 'closeReason')).toEqual(['CLOSED', 'EXPIRED']);
    expect(await eventsOf(expired.orderId)).toEqual(['order.created', 'order.closed']);
    await waitUntil(
      'the expiry entry acked',
      async () =>
        (await raw.zscore(queueKeys(keys, EXPIRY_QUEUE).keys[2], expired.orderId)) === null &&
        !(await raw.hexists(queueKeys(keys, EXPIRY_QUEUE).keys[4], expired.orderId)),
      expired.diedAt + VISIBILITY_MS + EXPIRY_BOUND_MS - Date.now(),
      250,
    );
    expect(await eventsOf(expired.orderId)).toEqual(['order.created', 'order.closed']);
  }, 120_000);

  it('afterwards every orders queue is drained (nothing dead-lettered), and the invariant sweep is clean', async () => {
    const ids = [...crashed.values()].map((c) => c.orderId).filter((id): id is string => !!id);
    const lastExpiry = Math.max(...(await Promise.all(ids.map(async (id) => Number(await raw.hget(orderKeys(keys, id)[0], 'expiresAt'))))));
    await waitUntil(
      'the orders queues drained',
      () => drained(fresh, [EXPIRY_QUEUE, ...PAYMENT_QUEUES]),
      // The expiry entry of phase 3 is delivered again once its visibility timeout is over.
      Math.max(closeDeadline(lastExpiry), expired.diedAt + VISIBILITY_MS + EXPIRY_BOUND_MS) - Date.now(),
      250,
    );
    const report = await expectInvariants({ nodes: raw, prefix, base: fresh.base }, { graceMs: EXPIRY_BOUND_MS });
    // Money: every top-up is in a wallet or paid a PAID order's balance leg (payments net of reversals).
    const paid = CASES.filter((c) => c.order === 'PAID').length;
    const cny = report.money.get('CNY')!;
    expect({
      topUps: cny['top-up'],
      paymentsNet: (cny['payment'] ?? 0n) + (cny['reversal'] ?? 0n),
      balances: cny['balance'],
      orders: report.orders,
    }).toEqual({
      topUps: BigInt(TOP_UP * CASES.length),
      paymentsNet: -BigInt(BALANCE_LEG * paid),
      balances: BigInt(TOP_UP * CASES.length - BALANCE_LEG * paid),
      orders: { PAID: paid, CLOSED: CASES.filter((c) => c.order === 'CLOSED').length },
    });
  }, 120_000);
});
