import { Injectable } from '@nestjs/common';
import { KeyBuilder } from '../../platform/redis/key-builder';
import { RedisService } from '../../platform/redis/redis.service';
import { ScriptRegistry } from '../../platform/scripts/script-registry.service';
import { noIndexKey, orderIdOfPlan, orderIndexKey, orderKeys, orderNumberKeyOf } from './order.keys';
import type { Instruction, OrderEventType, OrderRecord, OrderStatus, PlanRecord, PlanStatus } from './order.types';
import { OrdersConfig } from './orders.config';

/** A field value the Redis clock gives at the write: its time, epoch ms, plus `offsetMs`. */
export class ServerClock {
  constructor(readonly offsetMs: number) {
    if (!Number.isSafeInteger(offsetMs) || offsetMs < 0) throw new RangeError(`clock offset must be an integer >= 0, got ${offsetMs}`);
  }
}

/** The Redis clock at the write (plus `offsetMs`), for a field of FieldUpdates. */
export const serverNow = (offsetMs = 0): ServerClock => new ServerClock(offsetMs);

/**
 * Field updates of one record. Strings are stored verbatim, numbers as integers, instructions as JSON;
 * a ServerClock (serverNow()) becomes the Redis clock at the write. No string is ever interpreted.
 */
export type FieldUpdates = Record<string, string | number | Instruction[] | ServerClock>;

/** What write-4 refuses with: a record changed since it was read, a newer lock holder wrote, or the deadline passed. */
export type WriteStatus = 'OK' | 'VERSION' | 'STALE_TOKEN' | 'EXPIRED';
/** write-4.lua's case numbers (its reply's first element), in order. */
const WRITE_OUTCOMES: readonly WriteStatus[] = ['OK', 'VERSION', 'STALE_TOKEN', 'EXPIRED'];

/** Which merchant's number an order is: the key of its number index entry. */
export interface OrderNumber {
  merchantId: string;
  merchantOrderNo: string;
}

export interface WriteRequest {
  orderId: string;
  /** The order's merchant and number, whose index entry is renewed with the order (absent: none is). */
  number?: OrderNumber;
  /** The plan written (or whose lock guards the write). */
  planId?: string;
  /** The lock the caller holds and its fencing token; none only for creating an order. */
  guard?: { lock: 'order' | 'plan'; token: number };
  /** Expected version (0: create) and updates; absent when the order is not written. */
  order?: { version: number; set: FieldUpdates };
  plan?: { version: number; set: FieldUpdates };
  event?: OrderEventType;
  /** Refuse once the Redis clock reaches this (epoch ms). */
  deadline?: number;
}

export interface WriteResult {
  status: WriteStatus;
  orderVersion: number;
  planVersion: number;
  now: number;
}

/** What create-4 came to: the order created now (`created`), or the id of the order the number already names. */
export interface CreateResult {
  created: boolean;
  orderId: string;
  orderVersion: number;
  now: number;
}

export interface Snapshot {
  /** The Redis clock at the read, epoch ms. */
  now: number;
  order: OrderRecord | null;
  plan: PlanRecord | null;
}

/** The one typed wrapper of lua/features/orders: keys and arguments are built here and nowhere else. */
@Injectable()
export class OrdersStore {
  constructor(
    private readonly scripts: ScriptRegistry,
    private readonly keys: KeyBuilder,
    private readonly config: OrdersConfig,
    private readonly redis: RedisService,
  ) {}

  /** The order alone (null when there is none): one HGETALL, for readers that need neither a plan nor the Redis clock. */
  async readOrder(orderId: string): Promise<OrderRecord | null> {
    const [orderKey] = orderKeys(this.keys, orderId);
    const h = await this.redis.command((c) => c.hgetall(orderKey));
    return Object.keys(h).length ? parseOrder(h) : null;
  }

  /**
   * Only `fields` of the order (one HMGET; null when there is none): the record's other fields hold their
   * empty values. For hot readers that need a few fields of an order hash of some twenty.
   */
  async readOrderFields(orderId: string, fields: readonly (keyof OrderRecord)[]): Promise<OrderRecord | null> {
    const [orderKey] = orderKeys(this.keys, orderId);
    const values = await this.redis.command((c) => c.hmget(orderKey, ...fields));
    const h: Record<string, string> = {};
    fields.forEach((f, i) => {
      const v = values[i];
      if (v !== null) h[f] = v;
    });
    return Object.keys(h).length ? parseOrder(h) : null;
  }

  /** One consistent snapshot of an order and (optionally) one of its plans. */
  async read(orderId: string, planId?: string): Promise<Snapshot> {
    const [now, order, plan] = await this.scripts.run<[number, string[], string[]]>('orders/read', orderKeys(this.keys, orderId, planId).slice(0, 2));
    return { now, order: order.length ? parseOrder(toObject(order)) : null, plan: plan.length ? parsePlan(toObject(plan)) : null };
  }

  /** The order with its active plan (plan null when it has none), read again if the active plan changed between reads. */
  async readWithActivePlan(orderId: string): Promise<Snapshot> {
    let s = await this.read(orderId);
    for (let i = 0; i < 3 && s.order?.activePlan && s.plan?.planId !== s.order.activePlan; i++) s = await this.read(orderId, s.order.activePlan);
    return s.order?.activePlan && s.plan?.planId === s.order.activePlan ? s : { ...s, plan: null };
  }

  /**
   * The id of the order that (merchant, merchantOrderNo) names: its index entry, else the number key itself (an
   * order stored before the index had it as its id; the caller finds no order there when there is none).
   */
  async orderIdOf(number: OrderNumber): Promise<string> {
    const numberKey = orderNumberKeyOf(number.merchantId, number.merchantOrderNo);
    const indexed = await this.redis.command((c) => c.get(orderIndexKey(this.keys, numberKey)));
    return indexed ?? numberKey;
  }

  /**
   * Creates the order `orderId` of the number whose key (`orderNumberKeyOf`) is `numberKey`, with its index entry and its order.created event in one step, unless
   * the number names an order already (then nothing is written and that order's id is answered).
   */
  async create(orderId: string, numberKey: string, set: FieldUpdates): Promise<CreateResult> {
    const fields = encode(set);
    const [legacyKey] = orderKeys(this.keys, numberKey);
    const [orderKey, , eventsKey] = orderKeys(this.keys, orderId);
    const [outcome, id, orderVersion, now] = await this.scripts.run<[number, string, number, number]>(
      'orders/create',
      [orderIndexKey(this.keys, numberKey), legacyKey, orderKey, eventsKey],
      [orderId, numberKey, fields.values, this.config.eventsMaxLen, this.config.retentionMs, fields.clock.length / 2, ...fields.clock],
    );
    return { created: outcome === 0, orderId: id, orderVersion, now };
  }

  /** A plan with its order; the order id comes from the plan id. */
  readPlan(planId: string): Promise<Snapshot> {
    const orderId = orderIdOfPlan(planId);
    if (!orderId) throw new TypeError(`malformed plan id ${planId}`);
    return this.read(orderId, planId);
  }

  /** Compare-and-set of the order and/or a plan, checked against the fencing token, with the event in the same step. */
  async write(w: WriteRequest): Promise<WriteResult> {
    const cfg = this.config;
    const order = encode(w.order?.set);
    const plan = encode(w.plan?.set);
    const [outcome, orderVersion, planVersion, now] = await this.scripts.run<[number, number, number, number]>(
      'orders/write',
      [
        ...orderKeys(this.keys, w.orderId, w.planId),
        w.number ? orderIndexKey(this.keys, orderNumberKeyOf(w.number.merchantId, w.number.merchantOrderNo)) : noIndexKey(this.keys, w.orderId),
      ],
      [
        w.guard?.lock ?? '',
        w.guard?.token ?? 0,
        w.order ? w.order.version : '',
        order.values,
        w.plan ? w.plan.version : '',
        plan.values,
        w.event ?? '',
        cfg.eventsMaxLen,
        w.deadline ?? '',
        cfg.retentionMs,
        order.clock.length / 2,
        plan.clock.length / 2,
        ...order.clock,
        ...plan.clock,
      ],
    );
    return { status: WRITE_OUTCOMES[outcome], orderVersion, planVersion, now };
  }
}

/**
 * The order a create stored: the fields as sent, each clock field at the write's Redis time plus its offset,
 * `updatedAt` that time and `version` the new one, exactly as create-4.lua stores them, so that a create need not
 * read the order back.
 */
export function createdOrder(set: FieldUpdates, r: { orderVersion: number; now: number }): OrderRecord {
  const h: Record<string, string> = {};
  for (const [k, v] of Object.entries(set)) h[k] = v instanceof ServerClock ? String(r.now + v.offsetMs) : stored(v);
  h.version = String(r.orderVersion);
  h.updatedAt = String(r.now);
  return parseOrder(h);
}

/** The order scripts' arguments for one record: the stored values (a JSON object of strings) and the clock fields (name, offset pairs). */
function encode(set: FieldUpdates | undefined): { values: string; clock: Array<string | number> } {
  const values: Record<string, string> = {};
  const clock: Array<string | number> = [];
  for (const [k, v] of Object.entries(set ?? {})) {
    if (v instanceof ServerClock) clock.push(k, v.offsetMs);
    else values[k] = stored(v);
  }
  return { values: JSON.stringify(values), clock };
}

/** A field's stored value: strings verbatim, numbers as integers, instructions as JSON. */
const stored = (v: string | number | Instruction[]): string => (typeof v === 'string' ? v : typeof v === 'number' ? String(Math.trunc(v)) : JSON.stringify(v));

function toObject(flat: string[]): Record<string, string> {
  const o: Record<string, string> = {};
  for (let i = 0; i + 1 < flat.length; i += 2) o[flat[i]] = flat[i + 1];
  return o;
}

const num = (v: string | undefined) => (v ? Number(v) : 0);

function parseOrder(h: Record<string, string>): OrderRecord {
  return {
    orderId: h.orderId,
    merchantId: h.merchantId,
    merchantOrderNo: h.merchantOrderNo,
    amount: num(h.amount),
    currency: h.currency,
    subject: h.subject,
    expireMinutes: num(h.expireMinutes),
    fingerprint: h.fingerprint,
    status: h.status as OrderStatus,
    version: num(h.version),
    createdAt: num(h.createdAt),
    expiresAt: num(h.expiresAt),
    updatedAt: num(h.updatedAt),
    accountId: h.accountId ?? '',
    payerAccountId: h.payerAccountId ?? '',
    activePlan: h.activePlan ?? '',
    planSeq: num(h.planSeq),
    paidPlan: h.paidPlan ?? '',
    paidAt: num(h.paidAt),
    closedAt: num(h.closedAt),
    closeReason: h.closeReason ?? '',
  };
}

function parsePlan(h: Record<string, string>): PlanRecord {
  return {
    planId: h.planId,
    orderId: h.orderId,
    accountId: h.accountId,
    status: h.status as PlanStatus,
    version: num(h.version),
    amount: num(h.amount),
    currency: h.currency,
    fingerprint: h.fingerprint,
    instructions: JSON.parse(h.instructions ?? '[]') as Instruction[],
    createdAt: num(h.createdAt),
    updatedAt: num(h.updatedAt),
    failureReason: h.failureReason ?? '',
    legStamp: h.legStamp ?? '',
  };
}
