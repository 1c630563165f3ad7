import request from 'supertest';
import { OrderEventsService } from '../../src/features/orders/order-events.service';
import { OrdersService } from '../../src/features/orders/orders.service';
import { PaymentPlansService } from '../../src/features/orders/payment-plans.service';
import { PaymentRunner } from '../../src/features/orders/payment-runner.service';
import { ActivitiesService } from '../../src/features/seckill/seckill-activities.service';
import { ReservationsService } from '../../src/features/seckill/reservations.service';
import { reservationIdIn } from '../../src/features/seckill/seckill.keys';
import { SeckillStore } from '../../src/features/seckill/seckill.store';
import { DelayQueueService } from '../../src/engines/delay-queue/delay-queue.service';
import { CREDS, type TestApp } from './test-app';
import { asAdmin, asUser } from './http-roles';

let seq = 0;
/** A fresh activity id (at most 32 characters). */
export const activityId = (tag = 'a') => `${tag}-${process.pid.toString(36)}-${Date.now().toString(36)}-${(++seq).toString(36)}`.slice(0, 32);

export interface ProductSpec {
  productId: string;
  title?: string;
  price?: number;
  currency?: string;
  stock: number;
  perUserLimit?: number;
  shards?: number;
}

/** An activity body: open from a second ago for an hour unless told otherwise. */
export function activityBody(
  id: string,
  products: ProductSpec[],
  over: Partial<{
    startsAt: string;
    endsAt: string;
    perUserLimit: number;
    payWindowMinutes: number;
    eligibleAccounts: string[];
    merchantId: string;
    title: string;
  }> = {},
) {
  return {
    activityId: id,
    merchantId: over.merchantId ?? CREDS.merchantId,
    title: over.title ?? 'Flash sale',
    startsAt: over.startsAt ?? new Date(Date.now() - 1000).toISOString(),
    endsAt: over.endsAt ?? new Date(Date.now() + 3600_000).toISOString(),
    payWindowMinutes: over.payWindowMinutes ?? 15,
    perUserLimit: over.perUserLimit ?? 1,
    ...(over.eligibleAccounts ? { eligibleAccounts: over.eligibleAccounts } : {}),
    products: products.map((p) => ({ title: `Product ${p.productId}`, price: 990, currency: 'CNY', ...p })),
  };
}

const ADMIN = { 'x-admin-key': CREDS.adminKey };

/** The flash-sale module in one running app, with the steps the seckill suites repeat, all over HTTP unless named otherwise. */
export function seckillKit(t: TestApp) {
  const get = t.app.get.bind(t.app);
  const plans = get(PaymentPlansService);
  const runner = get(PaymentRunner);
  const kit = {
    t,
    orders: get(OrdersService),
    events: get(OrderEventsService),
    queue: get(DelayQueueService),
    store: get(SeckillStore),
    activities: get(ActivitiesService),
    reservations: get(ReservationsService),

    admin: () => asAdmin(t),
    user: (account: string) => asUser(t, account),

    async create(body: ReturnType<typeof activityBody>) {
      const res = await kit.admin().post('/admin/seckill/activities', body);
      if (res.status !== 201) throw new Error(`create activity: ${res.status} ${JSON.stringify(res.body)}`);
      return res.body as { products: { productId: string; available: number; reserved: number; sold: number; returned: number; stock: number }[] };
    },

    reserve: (account: string, activity: string, productId: string, quantity = 1, requestId = `r-${++seq}`) =>
      kit.user(account).post(`/seckill/activities/${activity}/products/${productId}/reservations`, { quantity, requestId }),

    /**
     * The buyer opens the reservation's order at checkout (GET /orders/{orderId}), which stores it when it is still
     * pending (a reservation's order is stored on first use or at its close); resolves with the checkout's answer.
     */
    open: (account: string, orderId: string) => kit.user(account).get(`/orders/${orderId}`),

    /** Each product's live counts, from the ops endpoint. */
    async stock(activity: string) {
      const res = await kit.admin().get(`/admin/seckill/activities/${activity}`);
      if (res.status !== 200) throw new Error(`read activity: ${res.status} ${JSON.stringify(res.body)}`);
      return new Map(
        (res.body.products as { productId: string; stock: number; available: number; reserved: number; sold: number; returned: number }[]).map((p) => [
          p.productId,
          p,
        ]),
      );
    },

    /** The stock invariant of every product: initial = available + reserved + sold, none negative. Returns the counts. */
    async expectInvariant(activity: string) {
      const stock = await kit.stock(activity);
      for (const p of stock.values()) {
        expect({ productId: p.productId, sum: p.available + p.reserved + p.sold }).toEqual({ productId: p.productId, sum: p.stock });
        expect(Math.min(p.available, p.reserved, p.sold)).toBeGreaterThanOrEqual(0);
      }
      const check = await kit.admin().get(`/admin/seckill/activities/${activity}/check`);
      expect(check.body.problems.filter((x: string) => x.includes('!='))).toEqual([]);
      return stock;
    },

    /** The activity as stored, and the keys of each shard of one of its products. */
    async shards(activity: string, productId: string) {
      const a = await kit.store.activity(activity);
      const p = a?.products.find((x) => x.productId === productId);
      if (!p) throw new Error(`no product ${productId} in ${activity}`);
      return { p, keys: Array.from({ length: p.shards }, (_, k) => kit.store.shard(activity, p, k)) };
    },

    /** The id the service gives a buyer's reservation of a request in this activity (its generation included). */
    async reservationId(activity: string, productId: string, accountId: string, requestId: string) {
      const a = await kit.store.activity(activity);
      if (!a) throw new Error(`no activity ${activity}`);
      return reservationIdIn(a, productId, accountId, requestId);
    },

    /** The seckill_* and page_cache_* counters of this instance, by `name{labels}`. */
    async metrics(): Promise<Record<string, number>> {
      const res = await request(t.server).get('/metrics').set(ADMIN);
      return parseSeckillMetrics(res.text);
    },

    /** The sum of a counter's samples on GET /metrics (`name` without any redis_pay_ prefix), of those whose labels contain `labels`. */
    async metric(name: string, labels = ''): Promise<number> {
      const text = (await kit.admin().get('/metrics')).text;
      let sum = 0;
      for (const line of text.split('\n')) {
        const m = /^(?:redis_pay_)?(\w+?)(\{[^}]*\})? ([0-9.e+-]+)$/.exec(line);
        if (m && m[1] === name && (m[2] ?? '').includes(labels)) sum += Number(m[3]);
      }
      return sum;
    },

    /** `payer` pays the order in full (in process, through the payment-plan services); resolves with the plan's final status. */
    async pay(payer: string, orderId: string, amount: number): Promise<string> {
      const { plan } = await plans.create({ accountId: payer, orderId, instructions: [{ method: 'quickpay', amount }] });
      return (await runner.pay({ accountId: payer, planId: plan.planId })).status;
    },
  };
  return kit;
}

/** The seckill_* and page_cache_* counters of a Prometheus text exposition, by `name{labels}`. */
export function parseSeckillMetrics(text: string): Record<string, number> {
  const out: Record<string, number> = {};
  for (const line of text.split('\n')) {
    const m = /^((?:seckill|page_cache)_[a-z_]+(?:\{[^}]*\})?) (\S+)$/.exec(line);
    if (m) out[m[1]] = Number(m[2]);
  }
  return out;
}

export type SeckillKit = ReturnType<typeof seckillKit>;
