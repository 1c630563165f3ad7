import { type DynamicModule, Logger, Module, type Type } from '@nestjs/common';
import { Test, type TestingModule } from '@nestjs/testing';
import Redis from 'ioredis';
import { randomBytes } from 'node:crypto';
import { AppConfig } from '../../src/platform/config/app-config';
import { ConfigModule } from '../../src/platform/config/config.module';
import { loadConfig } from '../../src/platform/config/load-config';
import { DomainError } from '../../src/platform/core/domain.error';
import { MetricsModule } from '../../src/platform/metrics/metrics.module';
import { KeyBuilder } from '../../src/platform/redis/key-builder';
import { RedisModule } from '../../src/platform/redis/redis.module';
import { ScriptsModule } from '../../src/platform/scripts/scripts.module';
import { CacheModule } from '../../src/engines/cache/cache.module';
import { DelayQueueModule } from '../../src/engines/delay-queue/delay-queue.module';
import { LocksModule } from '../../src/engines/locks/locks.module';
import { STREAM_RETRY } from '../../src/engines/streams/stream-group-runner';
import type { StreamConsumerSpec } from '../../src/engines/workers/worker-declarations';
import { WorkerRegistry } from '../../src/engines/workers/worker-registry';
import { WorkersModule } from '../../src/engines/workers/workers.module';
import {
  newOrderId,
  ORDER_EVENTS,
  OrderEventsService,
  type OrderEvent,
  OrdersService,
  type OrderView,
  type PendingOrderSource,
  PendingOrders,
} from '../../src/features/orders';
import { OrderConflictError, OrderNotFoundError } from '../../src/features/orders/order.errors';
import { InsufficientFundsError, ReferenceReusedError, type WalletEntry, WalletService } from '../../src/features/wallet';
import type { WalletCommand, WalletResult } from '../../src/features/wallet/wallet.types';
import { waitUntil } from '../harness/redis-process';
import { randomPrefix, type RedisServerHandle, startRedisServer } from '../harness/redis-server';

/**
 * The module tier (seckill, red-envelope, wallet): one feature module built alone with `Test.createTestingModule`, on
 * the platform and engine modules it needs and a real redis-server, the other features it uses replaced by the small
 * in-memory fakes below at their public interface (what their index.ts exports and the module injects).
 */

/** The platform and engine modules a feature stands on (all global, as in the application). */
const PLATFORM: (Type | DynamicModule)[] = [MetricsModule, RedisModule, ScriptsModule, WorkersModule, CacheModule, DelayQueueModule, LocksModule];

/** One redis-server per spec file, without AOF (nothing in this tier restarts it): flushed between tests. */
export async function startTierRedis(): Promise<{ server: RedisServerHandle; raw: Redis }> {
  Logger.overrideLogger(['error']);
  const server = await startRedisServer({ appendonly: false });
  return { server, raw: new Redis(server.url) };
}

export interface BuiltModule {
  ref: TestingModule;
  config: AppConfig;
  keys: KeyBuilder;
  get<T>(token: Type<T> | string | symbol): T;
  /** Closes the module (workers stop, then the Redis connections close). */
  close(): Promise<void>;
}

export interface BuildOptions {
  redisUrl: string;
  /** The feature module under test. */
  feature: Type;
  /** Other features' modules the feature imports, each replaced by a fake module. */
  replace?: [Type, DynamicModule][];
  /** Extra environment variables (settings of the feature under test). */
  env?: Record<string, string>;
}

/**
 * Builds the feature alone, initialised (scripts loaded, declared workers started) like the application does at boot,
 * but with no HTTP server: the spec drives the module's services.
 */
export async function buildFeatureModule(opts: BuildOptions): Promise<BuiltModule> {
  const config = loadConfig({ NODE_ENV: 'test', LOG_LEVEL: 'silent', REDIS_URL: opts.redisUrl, REDIS_KEY_PREFIX: randomPrefix(), ...opts.env });
  let builder = Test.createTestingModule({ imports: [ConfigModule.forRoot(config), ...PLATFORM, opts.feature] });
  for (const [real, fake] of opts.replace ?? []) builder = builder.overrideModule(real).useModule(fake);
  const ref = await builder.compile();
  await ref.init();
  let closed = false;
  return {
    ref,
    config,
    keys: ref.get(KeyBuilder),
    get: <T>(token: Type<T> | string | symbol) => ref.get<T>(token, { strict: false }),
    close: async () => {
      if (closed) return;
      closed = true;
      await ref.close();
    },
  };
}

export interface FeatureModuleTier {
  /** The module of the running test (built before each test). */
  readonly m: BuiltModule;
  /** A plain client of the file's redis-server. */
  readonly raw: Redis;
}

/**
 * The file's hooks: one redis-server for the file; before each test the module built afresh (`options()` is called
 * then, so its fakes are fresh too), after it the module closed and the server flushed. A spec's own beforeEach runs
 * after the build (hooks run in the order they are declared).
 */
export function useFeatureModule(options: () => Omit<BuildOptions, 'redisUrl'>): FeatureModuleTier {
  let server: RedisServerHandle;
  let raw: Redis;
  let m: BuiltModule | undefined;
  beforeAll(async () => ({ server, raw } = await startTierRedis()));
  afterAll(async () => {
    raw.disconnect();
    await server.destroy();
  });
  beforeEach(async () => {
    m = await buildFeatureModule({ redisUrl: server.url, ...options() });
  });
  afterEach(async () => {
    await m?.close();
    m = undefined;
    await raw.flushall();
  });
  return {
    get m() {
      if (!m) throw new Error('the module is built before each test only');
      return m;
    },
    get raw() {
      return raw;
    },
  };
}

// ---- failures a fake can be told to make

/** When a told failure strikes: `before` the fake changes anything (a refusal, a timeout), or `after` it did (a lost reply). */
export type FailureMode = 'before' | 'after';

/** A collaborator's failure that is not a domain answer (a timeout, a dropped connection). */
export class CollaboratorDown extends Error {
  constructor(what: string) {
    super(`${what}: collaborator unavailable (a fake's told failure)`);
  }
}

/** Failures told to a fake, by method, taken one per call. */
class Failures<M extends string> {
  private readonly queued = new Map<M, FailureMode[]>();

  /** The next `times` calls of `method` fail (`mode`: before or after the change). */
  fail(method: M, mode: FailureMode = 'before', times = 1): void {
    this.queued.set(method, [...(this.queued.get(method) ?? []), ...Array<FailureMode>(times).fill(mode)]);
  }

  take(method: M): FailureMode | undefined {
    return this.queued.get(method)?.shift();
  }

  pending(method: M): number {
    return this.queued.get(method)?.length ?? 0;
  }
}

/** Runs `change` under the failure told for `method`, if any. */
async function underFailure<T, M extends string>(failures: Failures<M>, method: M, change: () => T): Promise<T> {
  const mode = failures.take(method);
  if (mode === 'before') throw new CollaboratorDown(method);
  const out = change();
  if (mode === 'after') throw new CollaboratorDown(method);
  // An answer over the network comes later than the call: never in the caller's own turn.
  await new Promise((r) => setImmediate(r));
  return out;
}

// ---- a fake wallet (WalletService: credit, debit, entryOf)

const ownerKey = (o: { kind: string; id: string }) => `${o.kind}:${o.id}`;

/**
 * The wallet feature at its public interface, in memory: a credit or a debit once per (owner, kind, reference), a
 * debit never below zero (InsufficientFundsError), another amount under a used reference ReferenceReusedError; `failures`
 * makes the next calls throw a non-domain error before or after the money moved.
 */
export class FakeWallet {
  readonly failures = new Failures<'credit' | 'debit'>();
  private readonly balances = new Map<string, number>();
  private readonly entries = new Map<string, WalletEntry>();
  /** Every call, in order (an idempotent repeat included). */
  readonly calls: { direction: 'credit' | 'debit'; cmd: WalletCommand }[] = [];

  credit(cmd: WalletCommand): Promise<WalletResult> {
    return this.apply('credit', cmd);
  }

  debit(cmd: WalletCommand): Promise<WalletResult> {
    return this.apply('debit', cmd);
  }

  entryOf(owner: { kind: string; id: string }, kind: string, reference: string): Promise<WalletEntry | null> {
    return Promise.resolve(this.entries.get(`${ownerKey(owner)}|${kind}|${reference}`) ?? null);
  }

  balanceOf(owner: { kind: string; id: string }, currency: string): number {
    return this.balances.get(`${ownerKey(owner)}|${currency}`) ?? 0;
  }

  /** The entries made (each once), of one kind. */
  entriesOf(kind: string): WalletEntry[] {
    return [...this.entries.values()].filter((e) => e.kind === kind);
  }

  /** Money from outside (a top-up), straight into the fake. */
  topUp(owner: { kind: 'account' | 'merchant'; id: string }, currency: string, amount: number): void {
    const b = `${ownerKey(owner)}|${currency}`;
    this.balances.set(b, (this.balances.get(b) ?? 0) + amount);
  }

  private apply(direction: 'credit' | 'debit', cmd: WalletCommand): Promise<WalletResult> {
    this.calls.push({ direction, cmd });
    return underFailure(this.failures, direction, () => {
      const ref = `${ownerKey(cmd.owner)}|${cmd.kind}|${cmd.reference}`;
      const b = `${ownerKey(cmd.owner)}|${cmd.currency}`;
      const signed = direction === 'credit' ? cmd.amount : -cmd.amount;
      const existing = this.entries.get(ref);
      if (existing) {
        if (existing.amount !== signed || existing.currency !== cmd.currency)
          throw new ReferenceReusedError({ reference: cmd.reference, entryId: existing.entryId });
        return { applied: false, entryId: existing.entryId, balance: this.balances.get(b) ?? 0, entry: existing };
      }
      const balance = (this.balances.get(b) ?? 0) + signed;
      if (balance < 0) throw new InsufficientFundsError({ currency: cmd.currency, balance: balance - signed, amount: cmd.amount });
      this.balances.set(b, balance);
      const entry: WalletEntry = {
        entryId: String(this.entries.size + 1),
        kind: cmd.kind,
        currency: cmd.currency,
        amount: signed,
        balanceAfter: balance,
        reference: cmd.reference,
        memo: cmd.memo ?? '',
        at: Date.now(),
      };
      this.entries.set(ref, entry);
      return { applied: true, entryId: entry.entryId, balance, entry };
    });
  }
}

/** A module standing for WalletModule: exports WalletService as `fake`. */
export function fakeWalletModule(fake: FakeWallet): DynamicModule {
  @Module({})
  class FakeWalletModule {}
  return { module: FakeWalletModule, providers: [{ provide: WalletService, useValue: fake }], exports: [WalletService] };
}

// ---- fake orders (OrdersService: createForBuyer, orderIdOf, close; OrderEventsService; PendingOrders)

interface FakeOrder extends OrderView {
  command: object;
}

/**
 * The orders feature at its public interface, in memory: orders created once per (merchant, number) with the id the
 * caller gives, closed unless paid, paid by the spec (`pay`); the order events the module consumes are handed to its
 * declared consumer (`deliver`), as the orders' stream would; `register` keeps the pending-order sources.
 */
export class FakeOrders {
  readonly failures = new Failures<'createForBuyer' | 'orderIdOf' | 'close'>();
  readonly orders = new Map<string, FakeOrder>();
  readonly sources: PendingOrderSource[] = [];
  private readonly consumers = new Map<string, (e: OrderEvent) => Promise<void>>();

  // OrdersService
  createForBuyer(
    command: { merchantId: string; merchantOrderNo: string; amount: number; currency: string; subject: string; payerAccountId?: string },
    closedBy?: { createdAt: number; expiresAt: number; orderId?: string },
  ): Promise<{ order: OrderView; created: boolean }> {
    return underFailure(this.failures, 'createForBuyer', () => {
      const key = `${command.merchantId}|${command.merchantOrderNo}`;
      const existing = this.orders.get(key);
      if (existing) {
        if (JSON.stringify(existing.command) !== JSON.stringify(command)) throw new OrderConflictError('ORDER_NO_REUSED', 'number used with another payload');
        return { order: existing, created: false };
      }
      const now = Date.now();
      const order: FakeOrder = {
        command,
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
        ...(command.payerAccountId ? { payerAccountId: command.payerAccountId } : {}),
      };
      this.orders.set(key, order);
      return { order, created: true };
    });
  }

  orderIdOf(merchantId: string, merchantOrderNo: string): Promise<string | undefined> {
    return underFailure(this.failures, 'orderIdOf', () => this.orders.get(`${merchantId}|${merchantOrderNo}`)?.orderId);
  }

  close(merchantId: string, merchantOrderNo: string): Promise<OrderView> {
    return underFailure(this.failures, 'close', () => {
      const o = this.orders.get(`${merchantId}|${merchantOrderNo}`);
      if (!o) throw new OrderNotFoundError('order');
      if (o.status === 'PAID') throw new OrderConflictError('ORDER_PAID', 'The order is paid');
      o.status = 'CLOSED';
      return o;
    });
  }

  // OrderEventsService: the engine of @StreamConsumer({ stream: ORDER_EVENTS, group }).
  provideEngine(registry: WorkerRegistry): void {
    registry.provide(`stream:${ORDER_EVENTS}`, {
      defaults: STREAM_RETRY,
      trigger: () => 'fake order events',
      deadLetter: () => 'none',
      metric: () => 'none',
      start: (spec, handler) => {
        this.consumers.set((spec as StreamConsumerSpec).group, handler as (e: OrderEvent) => Promise<void>);
        return Promise.resolve();
      },
    });
  }

  /** Delivers an event to the group's consumer (as the stream would, at least once: deliver it again for a redelivery). */
  async deliver(group: string, e: OrderEvent): Promise<void> {
    const handler = this.consumers.get(group);
    if (!handler) throw new Error(`no consumer of the order events in group ${group}`);
    await handler(e);
  }

  /** The event the orders module appends when the order (merchant, number) changes to `type`. */
  event(type: 'order.paid' | 'order.closed', merchantId: string, merchantOrderNo: string): OrderEvent {
    const o = this.orders.get(`${merchantId}|${merchantOrderNo}`);
    if (!o) throw new Error(`no order ${merchantOrderNo}`);
    const at = Date.now();
    return { ...o, id: `${at}-0`, stream: 'fake', type, at, ...(o.payerAccountId ? { accountId: o.payerAccountId } : {}) } as OrderEvent;
  }

  /** The order is paid (by its plan); answers its order.paid event, for the spec to deliver. */
  pay(merchantId: string, merchantOrderNo: string): OrderEvent {
    const o = this.orders.get(`${merchantId}|${merchantOrderNo}`);
    if (!o || o.status !== 'CREATED') throw new Error(`order ${merchantOrderNo} is ${o?.status ?? 'missing'}`);
    o.status = 'PAID';
    return this.event('order.paid', merchantId, merchantOrderNo);
  }

  // PendingOrders
  register(source: PendingOrderSource): void {
    this.sources.push(source);
  }
}

/** A module standing for OrdersModule: OrdersService, OrderEventsService and PendingOrders, all answered by `fake`. */
export function fakeOrdersModule(fake: FakeOrders): DynamicModule {
  @Module({})
  class FakeOrdersModule {}
  return {
    module: FakeOrdersModule,
    providers: [
      { provide: OrdersService, useValue: fake },
      { provide: PendingOrders, useValue: fake },
      {
        provide: OrderEventsService,
        useFactory: (registry: WorkerRegistry) => {
          fake.provideEngine(registry);
          return fake;
        },
        inject: [WorkerRegistry],
      },
    ],
    exports: [OrdersService, OrderEventsService, PendingOrders],
  };
}

// ---- small helpers

/** A fresh id of up to `max` characters. */
export const uid = (tag: string, max = 32) => `${tag}-${randomBytes(6).toString('hex')}`.slice(0, max);

/** Waits until `check` holds (true), failing with what it last answered. */
export const eventually = (what: string, check: () => Promise<true | string> | true | string, timeoutMs = 8000) =>
  waitUntil(what, async () => check(), timeoutMs);

/** The domain error a promise rejects with (fails when it resolves). */
export async function rejection(p: Promise<unknown>): Promise<DomainError | Error> {
  return p.then(
    () => {
      throw new Error('expected a rejection');
    },
    (err: Error) => err,
  );
}
