import { type DynamicModule, Logger, Module, type Provider, type Type } from '@nestjs/common';
import { Test, type TestingModule } from '@nestjs/testing';
import type Redis from 'ioredis';
import { randomBytes } from 'node:crypto';
import { CacheModule } from '../../src/engines/cache/cache.module';
import { DelayQueueModule } from '../../src/engines/delay-queue/delay-queue.module';
import { LocksModule } from '../../src/engines/locks/locks.module';
import { STREAM_RETRY } from '../../src/engines/streams/stream-group-runner';
import type { StreamConsumerSpec } from '../../src/engines/workers/worker-declarations';
import { WorkerRegistry } from '../../src/engines/workers/worker-registry';
import { WorkersModule } from '../../src/engines/workers/workers.module';
import { MessagesModule, MessagesService } from '../../src/features/messages';
import type { WithdrawMessageCommand, WithdrawMessageResult, WriteMessageCommand, WriteMessageResult } from '../../src/features/messages/message.commands';
import {
  newOrderId,
  ORDER_EVENTS,
  OrderEventsService,
  type OrderEvent,
  OrdersModule,
  OrdersService,
  type OrderSummary,
  type OrderView,
  type PendingOrderSource,
  PendingOrders,
} from '../../src/features/orders';
import type { OrderDto } from '../../src/features/orders/dto/order.dto';
import type { CreateOrderForBuyerCommand } from '../../src/features/orders/order.commands';
import { OrderConflictError, OrderNotFoundError } from '../../src/features/orders/order.errors';
import type { CallerExpiry } from '../../src/features/orders/orders.service';
import { InsufficientFundsError, ReferenceReusedError, ReferenceVoidedError, type WalletEntry, WalletModule, WalletService } from '../../src/features/wallet';
import type { WalletCommand, WalletEntryKind, WalletOwner, WalletResult } from '../../src/features/wallet/wallet.types';
import type { AppConfig } from '../../src/platform/config/app-config';
import { ConfigModule } from '../../src/platform/config/config.module';
import { loadConfig } from '../../src/platform/config/load-config';
import { MetricsModule } from '../../src/platform/metrics/metrics.module';
import { KeyBuilder } from '../../src/platform/redis/key-builder';
import { RedisModule } from '../../src/platform/redis/redis.module';
import { ScriptsModule } from '../../src/platform/scripts/scripts.module';
import { rawConnection, waitUntil } from '../harness/redis-process';
import { randomPrefix, type RedisServerHandle, startRedisServer } from '../harness/redis-server';

/**
 * The module tier (test/module): one feature module built alone with `Test.createTestingModule` on a real
 * redis-server, with the platform and engine modules it runs on (config, metrics, Redis, scripts, workers, cache, delay
 * queue, locks, all global as in the application) and every other feature module it imports replaced by a small fake
 * at its public interface (what its index.ts exports and the module injects). No HTTP, no AppModule: the module's
 * services are called as its neighbours call them.
 *
 * A spec file starts one redis-server (`useModuleRedis`) and builds its module in each test (`buildModule`, from the
 * spec's `setup()`, as immich's medium tests do); after each test the module is closed and Redis flushed.
 */

/** Nest's own logging is off unless MODULE_TIER_LOGS=1 (the fakes' failures are expected, and logged at error). */
Logger.overrideLogger(process.env.MODULE_TIER_LOGS === '1' ? ['log', 'warn', 'error'] : false);

/** The platform and engine modules every feature runs on, as the root module lists them. */
const PLATFORM = [MetricsModule, RedisModule, ScriptsModule, WorkersModule, CacheModule, DelayQueueModule, LocksModule];

export interface ModuleTierRedis {
  server: RedisServerHandle;
  /** A connection of the test's own, for raw reads and the flush. */
  raw: Redis;
}

/**
 * Registers one redis-server for the spec file (started before all tests, destroyed after) and, after each test, the
 * close of the modules `buildModule` built and a FLUSHALL.
 */
export function useModuleRedis(): ModuleTierRedis {
  const r = {} as ModuleTierRedis;
  beforeAll(async () => {
    r.server = await startRedisServer({ appendonly: false });
    r.raw = rawConnection(r.server);
  });
  afterEach(async () => {
    await Promise.all(built.splice(0).map((m) => m.close()));
    await r.raw.flushall();
  });
  afterAll(async () => {
    r.raw?.disconnect();
    await r.server?.destroy();
  });
  return r;
}

/** A fake feature module: `replaces`'s place taken by `module`, which provides and exports the fake. */
export interface FakeModule {
  replaces: Type<unknown>;
  module: DynamicModule;
}

/** A module that provides and exports `providers` in place of `replaces` (for overrideModule). */
function fakeModule(replaces: Type<unknown>, providers: Provider[]): FakeModule {
  const name = `Fake${replaces.name}`;
  const cls = { [name]: class {} }[name];
  Module({})(cls);
  const tokens = providers.map((p) => ('provide' in p ? p.provide : p));
  return { replaces, module: { module: cls, providers, exports: tokens } };
}

export interface BuildOptions {
  /** The feature module under test. */
  feature: Type<unknown>;
  /** Environment variables over the tier's defaults (a random key prefix, command timeout 1 s). */
  env?: Record<string, string>;
  /** The other feature modules it imports, each replaced by its fake (fakeOrdersModule, fakeWalletModule, ...). */
  fakes?: FakeModule[];
}

export interface BuiltModule {
  ref: TestingModule;
  config: AppConfig;
  keys: KeyBuilder;
  /** A provider of the module (or a fake's), wherever it is declared. */
  get<T>(token: Type<T> | string | symbol): T;
  /** Closes the module (workers stop, then the Redis connections close); once, however often called. */
  close(): Promise<void>;
}

const built: BuiltModule[] = [];

/**
 * Builds and initialises the module on `redis` (scripts loaded, declared workers started, as at boot). Closed after the
 * test by `useModuleRedis`'s hook; `close()` earlier is fine.
 */
export async function buildModule(redis: ModuleTierRedis, opts: BuildOptions): Promise<BuiltModule> {
  const config = loadConfig({
    NODE_ENV: 'test',
    LOG_LEVEL: 'silent',
    REDIS_URL: redis.server.url,
    REDIS_KEY_PREFIX: randomPrefix(),
    REDIS_COMMAND_TIMEOUT_MS: '1000',
    ...opts.env,
  });
  let builder = Test.createTestingModule({ imports: [ConfigModule.forRoot(config), ...PLATFORM, opts.feature] });
  for (const f of opts.fakes ?? []) builder = builder.overrideModule(f.replaces).useModule(f.module);
  const ref = await builder.compile();
  await ref.init();
  let closed: Promise<void> | undefined;
  const m: BuiltModule = {
    ref,
    config,
    keys: ref.get(KeyBuilder),
    get: <T>(token: Type<T> | string | symbol) => ref.get<T>(token, { strict: false }),
    close: () => (closed ??= ref.close()),
  };
  built.push(m);
  return m;
}

// ---- failures a fake can be told to make

/** When a told failure strikes: `before` the fake changes anything (a refusal, a timeout), or `after` it did (a lost reply). */
export type FailureMode = 'before' | 'after';

/** A collaborator's failure that is not a domain answer (a timeout, a dropped connection). */
export class CollaboratorDown extends Error {
  constructor(what: string, mode: FailureMode = 'before') {
    super(`fake ${what} failed ${mode} its change: collaborator unavailable (a told failure)`);
  }
}

/** Failures told to a fake, by method, taken one per call: `fail('debit', 'after', 3)` fails the next three debits after they moved the money. */
export class Failures<M extends string> {
  private readonly queued = new Map<M, FailureMode[]>();
  private readonly made = new Map<string, number>();

  /** The next `times` calls of `method` fail (`mode`: before or after the change). */
  fail(method: M, mode: FailureMode = 'before', times = 1): void {
    this.queued.set(method, [...(this.queued.get(method) ?? []), ...Array<FailureMode>(times).fill(mode)]);
  }

  /** Told failures of `method` not yet made. */
  pending(method: M): number {
    return this.queued.get(method)?.length ?? 0;
  }

  /** Failures of `method` made so far (of one mode, or both). */
  thrown(method: M, mode?: FailureMode): number {
    return mode ? (this.made.get(`${method}|${mode}`) ?? 0) : this.thrown(method, 'before') + this.thrown(method, 'after');
  }

  /** Runs `change` as `method`'s call, under the failure told for it, if any; the answer comes in a later turn, as over the network. */
  async run<T>(method: M, change: () => T): Promise<T> {
    const mode = this.queued.get(method)?.shift();
    if (mode === 'before') this.strike(method, mode);
    const out = change();
    if (mode === 'after') this.strike(method, mode);
    await new Promise((r) => setImmediate(r));
    return out;
  }

  private strike(method: M, mode: FailureMode): never {
    this.made.set(`${method}|${mode}`, this.thrown(method, mode) + 1);
    throw new CollaboratorDown(method, mode);
  }
}

// ---- messages: the writer other features use (MessagesService.write / withdraw)

/** One message the fake holds. */
export interface FakeMessage {
  msgId: string;
  cmd: WriteMessageCommand;
}

/**
 * The message center as its writers see it: idempotent on (account, bizType, outerBizId), a withdrawn key stays
 * withdrawn (a later write stores nothing and answers `withdrawn`), and an `expiresAt` already past stores nothing.
 */
export class FakeMessages implements Pick<MessagesService, 'write' | 'withdraw'> {
  readonly failures = new Failures<'write' | 'withdraw'>();
  private readonly stored = new Map<string, FakeMessage>();
  private readonly withdrawn = new Set<string>();
  private seq = 0;
  /** Every call, in order. */
  readonly calls: Array<{ op: 'write' | 'withdraw'; accountId: string; outerBizId: string }> = [];

  write(cmd: WriteMessageCommand): Promise<WriteMessageResult> {
    this.calls.push({ op: 'write', accountId: cmd.accountId, outerBizId: cmd.outerBizId });
    return this.failures.run('write', () => {
      const k = messageKey(cmd);
      if (this.withdrawn.has(k)) return { msgId: '', duplicate: true, withdrawn: true };
      const had = this.stored.get(k);
      if (had) return { msgId: had.msgId, duplicate: true };
      if (cmd.expiresAt !== undefined && cmd.expiresAt <= Date.now()) return { msgId: '', duplicate: false, expired: true };
      const msgId = String(++this.seq);
      this.stored.set(k, { msgId, cmd });
      return { msgId, duplicate: false };
    });
  }

  withdraw(cmd: WithdrawMessageCommand): Promise<WithdrawMessageResult> {
    this.calls.push({ op: 'withdraw', accountId: cmd.accountId, outerBizId: cmd.outerBizId });
    return this.failures.run('withdraw', () => {
      const k = messageKey(cmd);
      this.withdrawn.add(k);
      return { withdrawn: this.stored.delete(k) };
    });
  }

  /** The messages an account holds now. */
  inbox(accountId: string): FakeMessage[] {
    return [...this.stored.values()].filter((m) => m.cmd.accountId === accountId);
  }
}

const messageKey = (c: { accountId: string; bizType: string; outerBizId: string }) => `${c.accountId}|${c.bizType}|${c.outerBizId}`;

/** MessagesModule's place taken by `fake` (as MessagesService). */
export const fakeMessagesModule = (fake: FakeMessages) => fakeModule(MessagesModule, [{ provide: MessagesService, useValue: fake }]);

// ---- orders: OrdersService's calls, the order events, the pending-order registry

/**
 * The order-events source without its streams: the engine of `@StreamConsumer({ stream: ORDER_EVENTS })` as the real
 * OrderEventsService provides it to the worker registry. `deliver` hands an event to the group's declared consumer, as
 * one delivery of the stream would (at least once: deliver it again for a redelivery; a handler that throws rejects
 * `deliver`, and the stream would deliver it again).
 */
export class FakeOrderEvents {
  private readonly handlers = new Map<string, (e: OrderEvent) => Promise<void>>();

  /** Becomes the engine of the order-events consumers of the module being built. */
  attach(registry: WorkerRegistry): this {
    registry.provide(`stream:${ORDER_EVENTS}`, {
      defaults: STREAM_RETRY,
      trigger: () => 'fake order events',
      deadLetter: () => 'none',
      metric: () => '',
      start: async (spec, handler) => {
        this.handlers.set((spec as StreamConsumerSpec).group, handler as (e: OrderEvent) => Promise<void>);
      },
    });
    return this;
  }

  /** The groups that declared a consumer. */
  get groups(): string[] {
    return [...this.handlers.keys()];
  }

  async deliver(group: string, event: OrderEvent): Promise<void> {
    const h = this.handlers.get(group);
    if (!h) throw new Error(`fake: no consumer of the order events in group ${group}`);
    await h(event);
  }
}

type OrdersCall = 'findById' | 'findSummaryById' | 'createForBuyer' | 'orderIdOf' | 'close';

/**
 * The orders feature at its public interface, in memory: orders the spec `put`s or the module creates for a buyer
 * (once per (merchant, number), with the id the caller gives; the number with another payload ORDER_NO_REUSED), read
 * back as OrderView or OrderSummary, closed unless paid, paid by the spec (`pay`). `events` hands order events to the
 * module's consumers; `sources` are the pending-order sources registered with PendingOrders.
 */
export class FakeOrders implements Pick<OrdersService, OrdersCall>, Pick<PendingOrders, 'register'> {
  readonly failures = new Failures<OrdersCall>();
  /** The orders, by id. */
  readonly orders = new Map<string, OrderView>();
  readonly events = new FakeOrderEvents();
  readonly sources: PendingOrderSource[] = [];
  /** The command each createForBuyer order was made of, by id. */
  private readonly commands = new Map<string, string>();

  put(order: OrderView): OrderView {
    this.orders.set(order.orderId, order);
    return order;
  }

  /** The order is paid (by its plan): CREATED to PAID. Answers its order.paid event, for the spec to deliver. */
  pay(orderId: string): OrderEvent {
    const o = this.mustFind(orderId);
    if (o.status !== 'CREATED') throw new Error(`fake: order ${orderId} is ${o.status}`);
    this.put({ ...o, status: 'PAID', version: o.version + 1, paidAt: Date.now() });
    return this.eventOf('order.paid', orderId);
  }

  /** The event the orders module appends for the order as it is now. */
  eventOf(type: OrderEvent['type'], orderId: string): OrderEvent {
    const o = this.mustFind(orderId);
    const at = Date.now();
    return {
      id: `${at}-0`,
      stream: 'fake',
      type,
      at,
      orderId,
      merchantId: o.merchantId,
      merchantOrderNo: o.merchantOrderNo,
      amount: o.amount,
      currency: o.currency,
      status: o.status,
      version: o.version,
      expiresAt: o.expiresAt,
      ...(o.accountId ? { accountId: o.accountId } : {}),
    };
  }

  findById(orderId: string): Promise<OrderView | undefined> {
    return this.failures.run('findById', () => this.orders.get(orderId));
  }

  findSummaryById(orderId: string): Promise<OrderSummary | undefined> {
    return this.failures.run('findSummaryById', () => {
      const o = this.orders.get(orderId);
      if (!o) return undefined;
      const { orderId: id, merchantId, amount, currency, subject, status, version, expiresAt, accountId } = o;
      return { orderId: id, merchantId, amount, currency, subject, status, version, expiresAt, ...(accountId ? { accountId } : {}) };
    });
  }

  createForBuyer(command: CreateOrderForBuyerCommand, closedBy?: CallerExpiry): Promise<{ order: OrderView; created: boolean }> {
    return this.failures.run('createForBuyer', () => {
      const existing = this.byNumber(command.merchantId, command.merchantOrderNo);
      if (existing) {
        if (this.commands.get(existing.orderId) !== JSON.stringify(command))
          throw new OrderConflictError('ORDER_NO_REUSED', 'number used with another payload');
        return { order: existing, created: false };
      }
      const now = Date.now();
      const order = this.put({
        orderId: closedBy?.orderId ?? newOrderId(command.merchantId, command.merchantOrderNo),
        merchantId: command.merchantId,
        merchantOrderNo: command.merchantOrderNo,
        amount: command.amount,
        currency: command.currency,
        subject: command.subject,
        status: 'CREATED',
        version: 1,
        createdAt: closedBy?.createdAt ?? now,
        expiresAt: closedBy?.expiresAt ?? now + 15 * 60_000,
        payerAccountId: command.payerAccountId,
        accountId: command.payerAccountId,
      });
      this.commands.set(order.orderId, JSON.stringify(command));
      return { order, created: true };
    });
  }

  orderIdOf(merchantId: string, merchantOrderNo: string): Promise<string | undefined> {
    return this.failures.run('orderIdOf', () => this.byNumber(merchantId, merchantOrderNo)?.orderId);
  }

  close(merchantId: string, merchantOrderNo: string): Promise<OrderDto> {
    return this.failures.run('close', () => {
      let o = this.byNumber(merchantId, merchantOrderNo);
      if (!o) throw new OrderNotFoundError('order');
      if (o.status === 'PAID') throw new OrderConflictError('ORDER_PAID', 'The order is paid');
      if (o.status === 'CREATED') o = this.put({ ...o, status: 'CLOSED', version: o.version + 1, closedAt: Date.now(), closeReason: 'MERCHANT' });
      // As the merchant sees it (OrderDto): times as ISO strings.
      const { orderId, amount, currency, subject, status, version, createdAt, expiresAt, payerAccountId, closedAt, closeReason } = o;
      const iso = (ms: number) => new Date(ms).toISOString();
      return {
        ...{ orderId, merchantOrderNo, amount, currency, subject, status, version, createdAt: iso(createdAt), expiresAt: iso(expiresAt) },
        ...(payerAccountId ? { payerAccountId } : {}),
        ...(closedAt ? { closedAt: iso(closedAt), closeReason } : {}),
      };
    });
  }

  register(source: PendingOrderSource): void {
    this.sources.push(source);
  }

  private byNumber(merchantId: string, merchantOrderNo: string): OrderView | undefined {
    return [...this.orders.values()].find((o) => o.merchantId === merchantId && o.merchantOrderNo === merchantOrderNo);
  }

  private mustFind(orderId: string): OrderView {
    const o = this.orders.get(orderId);
    if (!o) throw new Error(`fake: no order ${orderId}`);
    return o;
  }
}

/** OrdersModule's place taken by `fake`: OrdersService and PendingOrders, and OrderEventsService as `fake.events`. */
export const fakeOrdersModule = (fake: FakeOrders) =>
  fakeModule(OrdersModule, [
    { provide: OrdersService, useValue: fake },
    { provide: PendingOrders, useValue: fake },
    { provide: OrderEventsService, useFactory: (registry: WorkerRegistry) => fake.events.attach(registry), inject: [WorkerRegistry] },
  ]);

// ---- wallet: what the orders' balance channel and the red envelopes call (WalletService.credit / debit / settle / entryOf)

type WalletCall = 'credit' | 'debit' | 'settle' | 'entryOf';

/**
 * Wallets in memory with the real one's rules: credit and debit once per (owner, kind, reference), the same reference
 * with other terms ReferenceReusedError, a reference settled as unapplied voided for good (ReferenceVoidedError), no
 * balance below zero (InsufficientFundsError).
 */
export class FakeWallet implements Pick<WalletService, WalletCall> {
  readonly failures = new Failures<WalletCall>();
  /** Every credit and debit call, in order (an idempotent repeat and a failed call included; top-ups not). */
  readonly calls: { direction: 'credit' | 'debit'; cmd: WalletCommand }[] = [];
  private readonly balances = new Map<string, number>();
  /** The entries, oldest first, by owner, kind and reference. */
  private readonly entries = new Map<string, WalletEntry>();
  private readonly voided = new Set<string>();
  private topUps = 0;

  credit(cmd: WalletCommand): Promise<WalletResult> {
    this.calls.push({ direction: 'credit', cmd });
    return this.failures.run('credit', () => this.apply(cmd, cmd.amount));
  }

  debit(cmd: WalletCommand): Promise<WalletResult> {
    this.calls.push({ direction: 'debit', cmd });
    return this.failures.run('debit', () => this.apply(cmd, -cmd.amount));
  }

  entryOf(owner: WalletOwner, kind: WalletEntryKind, reference: string): Promise<WalletEntry | null> {
    return this.failures.run('entryOf', () => this.entries.get(entryKey(owner, kind, reference)) ?? null);
  }

  settle(owner: WalletOwner, kind: WalletEntryKind, reference: string): Promise<WalletEntry | null> {
    return this.failures.run('settle', () => {
      const k = entryKey(owner, kind, reference);
      const e = this.entries.get(k);
      if (!e) this.voided.add(k);
      return e ?? null;
    });
  }

  /** Money from outside, as a top-up entry of its own (neither a call nor able to fail). */
  topUp(owner: WalletOwner, currency: string, amount: number): void {
    this.apply({ owner, currency, amount, kind: 'top-up', reference: `fake-top-up-${++this.topUps}` }, amount);
  }

  balanceOf(owner: WalletOwner, currency: string): number {
    return this.balances.get(`${ownerKey(owner)}|${currency}`) ?? 0;
  }

  /** The entries of one kind (of one owner, or all), oldest first. */
  entriesOf(kind: WalletEntryKind, owner?: WalletOwner): WalletEntry[] {
    const prefix = owner ? `${ownerKey(owner)}|` : '';
    return [...this.entries].filter(([k, e]) => e.kind === kind && k.startsWith(prefix)).map(([, e]) => e);
  }

  private apply(cmd: WalletCommand, signed: number): WalletResult {
    const k = entryKey(cmd.owner, cmd.kind, cmd.reference);
    if (this.voided.has(k)) throw new ReferenceVoidedError({ reference: cmd.reference });
    const balanceKey = `${ownerKey(cmd.owner)}|${cmd.currency}`;
    const balance = this.balances.get(balanceKey) ?? 0;
    const had = this.entries.get(k);
    if (had) {
      if (had.amount !== signed || had.currency !== cmd.currency) throw new ReferenceReusedError({ reference: cmd.reference, entryId: had.entryId });
      return { applied: false, entryId: had.entryId, balance, entry: had };
    }
    if (balance + signed < 0) throw new InsufficientFundsError({ currency: cmd.currency, balance, amount: cmd.amount });
    const entry: WalletEntry = {
      entryId: String(this.entries.size + 1),
      kind: cmd.kind,
      currency: cmd.currency,
      amount: signed,
      balanceAfter: balance + signed,
      reference: cmd.reference,
      memo: cmd.memo ?? '',
      at: Date.now(),
    };
    this.entries.set(k, entry);
    this.balances.set(balanceKey, entry.balanceAfter);
    return { applied: true, entryId: entry.entryId, balance: entry.balanceAfter, entry };
  }
}

const ownerKey = (o: WalletOwner) => `${o.kind}:${o.id}`;
const entryKey = (owner: WalletOwner, kind: WalletEntryKind, reference: string) => `${ownerKey(owner)}|${kind}|${reference}`;

/** WalletModule's place taken by `fake` (as WalletService). */
export const fakeWalletModule = (fake: FakeWallet) => fakeModule(WalletModule, [{ provide: WalletService, useValue: fake }]);

// ---- small helpers

/** A fresh id of up to `max` characters. */
export const uid = (tag: string, max = 32) => `${tag}-${randomBytes(6).toString('hex')}`.slice(0, max);

/** Waits until `check` holds (true), failing with what it last answered (a string says what is missing). */
export const eventually = (what: string, check: () => Promise<boolean | string> | boolean | string, timeoutMs = 8000) =>
  waitUntil(what, async () => check(), timeoutMs);

/** The error a promise rejects with (fails when it resolves). */
export async function rejection(p: Promise<unknown>): Promise<Error> {
  return p.then(
    () => {
      throw new Error('expected a rejection');
    },
    (err: Error) => err,
  );
}
