import { type DynamicModule, Logger, Module, type Provider, type Type } from '@nestjs/common';
import { Test, type TestingModule, type TestingModuleBuilder } from '@nestjs/testing';
import type Redis from 'ioredis';
import { DelayQueueModule } from '../../src/engines/delay-queue/delay-queue.module';
import { LocksModule } from '../../src/engines/locks/locks.module';
import { STREAM_RETRY } from '../../src/engines/streams/stream-group-runner';
import type { StreamConsumerSpec } from '../../src/engines/workers/worker-declarations';
import { WorkerRegistry } from '../../src/engines/workers/worker-registry';
import { WorkersModule } from '../../src/engines/workers/workers.module';
import { MessagesService } from '../../src/features/messages';
import type { WithdrawMessageCommand, WithdrawMessageResult, WriteMessageCommand, WriteMessageResult } from '../../src/features/messages/message.commands';
import { ORDER_EVENTS, OrderEventsService, type OrderEvent, OrdersService, type OrderSummary, type OrderView } from '../../src/features/orders';
import { InsufficientFundsError, ReferenceReusedError, ReferenceVoidedError, type WalletEntry, WalletService } from '../../src/features/wallet';
import type { WalletCommand, WalletEntryKind, WalletOwner, WalletResult } from '../../src/features/wallet/wallet.types';
import { ConfigModule } from '../../src/platform/config/config.module';
import { loadConfig } from '../../src/platform/config/load-config';
import { MetricsModule } from '../../src/platform/metrics/metrics.module';
import { RedisModule } from '../../src/platform/redis/redis.module';
import { ScriptsModule } from '../../src/platform/scripts/scripts.module';
import { rawConnection } from '../harness/redis-process';
import { randomPrefix, type RedisServerHandle, startRedisServer } from '../harness/redis-server';

/**
 * The module tier (test/module): one feature module built alone with `Test.createTestingModule` on a real
 * redis-server, with the platform and engine modules it runs on (config, metrics, Redis, scripts, workers, delay
 * queue, locks) and every other feature module replaced by a small fake at its public interface (what its index.ts
 * exports and this module injects). No HTTP, no AppModule: the module's services are called as its neighbours call them.
 *
 * A spec file starts one redis-server (`useModuleRedis`), builds its module per test (`buildModule`, immich's
 * `setup()` of its medium tests), and closes it and flushes Redis after each test.
 */

/** Nest's own logging is off unless MODULE_TIER_LOGS=1 (the fakes' failures are expected, and logged at error). */
Logger.overrideLogger(process.env.MODULE_TIER_LOGS === '1' ? ['log', 'warn', 'error'] : false);

/** The platform and engine modules every feature runs on, as the root module lists them. */
const PLATFORM = [MetricsModule, RedisModule, ScriptsModule, WorkersModule, DelayQueueModule, LocksModule];

export interface ModuleTierRedis {
  server: RedisServerHandle;
  /** A connection of the test's own, for raw reads and the flush. */
  raw: Redis;
}

/**
 * Registers one redis-server for the spec file (started before all tests, destroyed after) and a FLUSHALL after each
 * test, once `buildModule`'s modules are closed (the `afterEach` hooks of the builder run first: it is registered later).
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

/** A fake feature module: `module`'s place taken by one that provides and exports `providers`. */
export interface FakeModule {
  replaces: Type<unknown>;
  module: DynamicModule;
}

/** A module that provides and exports `providers` in place of `replaces` (for overrideModule). */
export function fakeModule(replaces: Type<unknown>, providers: Provider[]): FakeModule {
  const name = `Fake${replaces.name}`;
  const cls = { [name]: class {} }[name];
  Module({})(cls);
  const tokens = providers.map((p) => ('provide' in p ? p.provide : p));
  return { replaces, module: { module: cls, providers, exports: tokens } };
}

export interface BuildOptions {
  /** The feature module under test (and anything else it needs beyond the platform and engines). */
  imports: Array<Type<unknown> | DynamicModule>;
  /** Environment variables over the tier's defaults (a random key prefix, command timeout 1 s). */
  env?: Record<string, string>;
  /** Other feature modules the module imports, each replaced by its fake. */
  fakes?: FakeModule[];
  /** Last changes to the builder (overrideProvider, ...). */
  configure?: (b: TestingModuleBuilder) => TestingModuleBuilder;
}

export interface BuiltModule {
  ref: TestingModule;
  prefix: string;
  /** A provider of the module (or a fake's), wherever it is declared. */
  get<T>(token: Type<T> | string | symbol): T;
  close(): Promise<void>;
}

const built: BuiltModule[] = [];

/**
 * Builds and initialises the module on `redis` (its background workers started, as at boot). Closed after the test by
 * `useModuleRedis`'s hook; `close()` earlier is fine.
 */
export async function buildModule(redis: ModuleTierRedis, opts: BuildOptions): Promise<BuiltModule> {
  const prefix = randomPrefix();
  const config = loadConfig({
    NODE_ENV: 'test',
    LOG_LEVEL: 'silent',
    REDIS_URL: redis.server.url,
    REDIS_KEY_PREFIX: prefix,
    REDIS_COMMAND_TIMEOUT_MS: '1000',
    ...opts.env,
  });
  let builder = Test.createTestingModule({ imports: [ConfigModule.forRoot(config), ...PLATFORM, ...opts.imports] });
  for (const f of opts.fakes ?? []) builder = builder.overrideModule(f.replaces).useModule(f.module);
  if (opts.configure) builder = opts.configure(builder);
  const ref = await builder.compile();
  await ref.init();
  let closed: Promise<void> | undefined;
  const m: BuiltModule = {
    ref,
    prefix,
    get: <T>(token: Type<T> | string | symbol) => ref.get<T>(token, { strict: false }),
    close: () => (closed ??= ref.close()),
  };
  built.push(m);
  return m;
}

/** Operations a fake fails on request: `failNext('write')` makes the next write throw, `failNext('write', 3)` the next three. */
export class Faults<Op extends string> {
  private readonly pending = new Map<Op, number>();
  /** Failures thrown so far, by operation. */
  readonly thrown = new Map<Op, number>();

  failNext(op: Op, times = 1): void {
    this.pending.set(op, (this.pending.get(op) ?? 0) + times);
  }

  /** Throws when `op` is due to fail. */
  check(op: Op): void {
    const n = this.pending.get(op) ?? 0;
    if (n === 0) return;
    this.pending.set(op, n - 1);
    this.thrown.set(op, (this.thrown.get(op) ?? 0) + 1);
    throw new Error(`fake: ${op} failed (injected)`);
  }
}

// ---------------------------------------------------------------------------------------------------------------------
// messages: the writer other features use (MessagesService.write / withdraw).

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
  readonly faults = new Faults<'write' | 'withdraw'>();
  private readonly stored = new Map<string, FakeMessage>();
  private readonly withdrawn = new Set<string>();
  private seq = 0;
  /** Every call, in order. */
  readonly calls: Array<{ op: 'write' | 'withdraw'; accountId: string; outerBizId: string }> = [];

  async write(cmd: WriteMessageCommand): Promise<WriteMessageResult> {
    this.calls.push({ op: 'write', accountId: cmd.accountId, outerBizId: cmd.outerBizId });
    this.faults.check('write');
    const k = keyOf(cmd);
    if (this.withdrawn.has(k)) return { msgId: '', duplicate: true, withdrawn: true };
    const had = this.stored.get(k);
    if (had) return { msgId: had.msgId, duplicate: true };
    if (cmd.expiresAt !== undefined && cmd.expiresAt <= Date.now()) return { msgId: '', duplicate: false, expired: true };
    const msgId = String(++this.seq);
    this.stored.set(k, { msgId, cmd });
    return { msgId, duplicate: false };
  }

  async withdraw(cmd: WithdrawMessageCommand): Promise<WithdrawMessageResult> {
    this.calls.push({ op: 'withdraw', accountId: cmd.accountId, outerBizId: cmd.outerBizId });
    this.faults.check('withdraw');
    const k = keyOf(cmd);
    this.withdrawn.add(k);
    return { withdrawn: this.stored.delete(k) };
  }

  /** The messages an account holds now. */
  inbox(accountId: string): FakeMessage[] {
    return [...this.stored.values()].filter((m) => m.cmd.accountId === accountId);
  }
}

const keyOf = (c: { accountId: string; bizType: string; outerBizId: string }) => `${c.accountId}|${c.bizType}|${c.outerBizId}`;

export const fakeMessagesModule = (replaces: Type<unknown>, fake: FakeMessages) => fakeModule(replaces, [{ provide: MessagesService, useValue: fake }]);

// ---------------------------------------------------------------------------------------------------------------------
// orders: the reads other features make (OrdersService.findById / findSummaryById) and the order events.

/**
 * Orders as their readers see them, held in memory: `put` an order (or change it), read it back as OrderView or
 * OrderSummary.
 */
export class FakeOrders implements Pick<OrdersService, 'findById' | 'findSummaryById'> {
  readonly faults = new Faults<'findById' | 'findSummaryById'>();
  private readonly orders = new Map<string, OrderView>();

  put(order: OrderView): OrderView {
    this.orders.set(order.orderId, order);
    return order;
  }

  update(orderId: string, change: Partial<OrderView>): OrderView {
    const o = this.orders.get(orderId);
    if (!o) throw new Error(`fake: no order ${orderId}`);
    return this.put({ ...o, ...change, version: o.version + 1 });
  }

  async findById(orderId: string): Promise<OrderView | undefined> {
    this.faults.check('findById');
    return this.orders.get(orderId);
  }

  async findSummaryById(orderId: string): Promise<OrderSummary | undefined> {
    this.faults.check('findSummaryById');
    const o = this.orders.get(orderId);
    if (!o) return undefined;
    const { orderId: id, merchantId, amount, currency, subject, status, version, expiresAt, accountId } = o;
    return { orderId: id, merchantId, amount, currency, subject, status, version, expiresAt, ...(accountId ? { accountId } : {}) };
  }

  /** The event the orders module would append for the order as it is now. */
  eventOf(type: OrderEvent['type'], orderId: string): OrderEvent {
    const o = this.orders.get(orderId);
    if (!o) throw new Error(`fake: no order ${orderId}`);
    return {
      id: `${Date.now()}-0`,
      stream: 'fake',
      type,
      at: Date.now(),
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
}

/**
 * The order-events source without its streams: the engine of `@StreamConsumer({ stream: ORDER_EVENTS })` as the real
 * OrderEventsService provides it to the worker registry, whose `deliver` hands an event to the declared consumer of a
 * group, as one delivery of the stream would (a handler that throws: the error is the caller's, as a redelivery would follow).
 */
export class FakeOrderEvents {
  private readonly handlers = new Map<string, (e: OrderEvent) => Promise<void>>();

  constructor(registry: WorkerRegistry) {
    registry.provide(`stream:${ORDER_EVENTS}`, {
      defaults: STREAM_RETRY,
      trigger: () => 'fake order events',
      deadLetter: () => 'none',
      metric: () => '',
      start: async (spec, handler) => {
        this.handlers.set((spec as StreamConsumerSpec).group, handler as (e: OrderEvent) => Promise<void>);
      },
    });
  }

  get groups(): string[] {
    return [...this.handlers.keys()];
  }

  async deliver(group: string, event: OrderEvent): Promise<void> {
    const h = this.handlers.get(group);
    if (!h) throw new Error(`fake: no consumer of group ${group}`);
    await h(event);
  }
}

export const fakeOrdersModule = (replaces: Type<unknown>, orders: FakeOrders) =>
  fakeModule(replaces, [
    { provide: OrdersService, useValue: orders },
    { provide: OrderEventsService, useFactory: (registry: WorkerRegistry) => new FakeOrderEvents(registry), inject: [WorkerRegistry] },
  ]);

// ---------------------------------------------------------------------------------------------------------------------
// wallet: what the orders' balance channel calls (WalletService.debit / credit / settle / entryOf).

/**
 * Wallets in memory with the real one's rules: credit and debit idempotent on (kind, reference), the same reference
 * with other terms refused, a settled-as-unapplied reference voided for good, no balance below zero.
 * `faults`: `debit` throws before anything moves; `debit-reply` moves the money, then throws (a reply lost).
 */
export class FakeWallet implements Pick<WalletService, 'credit' | 'debit' | 'settle' | 'entryOf'> {
  readonly faults = new Faults<'debit' | 'debit-reply' | 'credit' | 'settle'>();
  private readonly balances = new Map<string, number>();
  private readonly entries = new Map<string, WalletEntry>();
  private readonly voided = new Set<string>();
  private seq = 0;

  balance(accountId: string, currency: string): number {
    return this.balances.get(`account:${accountId}|${currency}`) ?? 0;
  }

  /** Every entry of the account, oldest first. */
  ledger(accountId: string): WalletEntry[] {
    return [...this.entries.entries()].filter(([k]) => k.startsWith(`account:${accountId}|`)).map(([, e]) => e);
  }

  async credit(cmd: WalletCommand): Promise<WalletResult> {
    this.faults.check('credit');
    return this.apply(cmd, cmd.amount);
  }

  async debit(cmd: WalletCommand): Promise<WalletResult> {
    this.faults.check('debit');
    const r = this.apply(cmd, -cmd.amount);
    this.faults.check('debit-reply');
    return r;
  }

  async entryOf(owner: WalletOwner, kind: WalletEntryKind, reference: string): Promise<WalletEntry | null> {
    return this.entries.get(entryKey(owner, kind, reference)) ?? null;
  }

  async settle(owner: WalletOwner, kind: WalletEntryKind, reference: string): Promise<WalletEntry | null> {
    this.faults.check('settle');
    const k = entryKey(owner, kind, reference);
    const e = this.entries.get(k);
    if (!e) this.voided.add(k);
    return e ?? null;
  }

  private apply(cmd: WalletCommand, signed: number): WalletResult {
    const k = entryKey(cmd.owner, cmd.kind, cmd.reference);
    if (this.voided.has(k)) throw new ReferenceVoidedError({ reference: cmd.reference });
    const had = this.entries.get(k);
    const balanceKey = `${cmd.owner.kind}:${cmd.owner.id}|${cmd.currency}`;
    const balance = this.balances.get(balanceKey) ?? 0;
    if (had) {
      if (had.amount !== signed || had.currency !== cmd.currency) throw new ReferenceReusedError({ reference: cmd.reference, entryId: had.entryId });
      return { applied: false, entryId: had.entryId, balance, entry: had };
    }
    if (balance + signed < 0) throw new InsufficientFundsError({ currency: cmd.currency, balance, amount: cmd.amount });
    const entry: WalletEntry = {
      entryId: String(++this.seq),
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

const entryKey = (owner: WalletOwner, kind: WalletEntryKind, reference: string) => `${owner.kind}:${owner.id}|${kind}|${reference}`;

export const fakeWalletModule = (replaces: Type<unknown>, wallet: FakeWallet) => fakeModule(replaces, [{ provide: WalletService, useValue: wallet }]);
