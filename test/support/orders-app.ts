import type Redis from 'ioredis';
import { DelayQueueService } from '../../src/engines/delay-queue/delay-queue.service';
import { ChannelGateway } from '../../src/features/orders/channels/channel-gateway';
import { OrdersService } from '../../src/features/orders/orders.service';
import { OrdersStore } from '../../src/features/orders/orders.store';
import { PaymentPlansService } from '../../src/features/orders/payment-plans.service';
import { PaymentRunner } from '../../src/features/orders/payment-runner.service';
import { KeyBuilder } from '../../src/platform/redis/key-builder';
import { rawConnection } from '../harness/redis-process';
import { RedisServerHandle, startRedisServer } from '../harness/redis-server';
import { resetChannels } from './orders-fixture';
import { startTestApp, TestApp } from './test-app';

/** What an orders suite works with: its own redis-server, the app on it, and the orders module's services. */
export interface OrdersApp {
  redis: RedisServerHandle;
  raw: Redis;
  t: TestApp;
  orders: OrdersService;
  plans: PaymentPlansService;
  runner: PaymentRunner;
  channels: ChannelGateway;
  queue: DelayQueueService;
  store: OrdersStore;
  keys: KeyBuilder;
}

/**
 * Registers the hooks every orders integration suite needs: a redis-server and the app (with `env`) before
 * all tests, spies restored and the simulated channels reset before each, everything stopped after all.
 * The returned object is filled in by the first `beforeAll`.
 */
export function useOrdersApp(env: Record<string, string>): OrdersApp {
  const app = {} as OrdersApp;
  beforeAll(async () => {
    app.redis = await startRedisServer();
    app.raw = rawConnection(app.redis);
    app.t = await startTestApp(app.redis.url, env);
    const get = app.t.app.get.bind(app.t.app);
    Object.assign(app, {
      orders: get(OrdersService),
      plans: get(PaymentPlansService),
      runner: get(PaymentRunner),
      channels: get(ChannelGateway),
      queue: get(DelayQueueService),
      store: get(OrdersStore),
      keys: get(KeyBuilder),
    });
  });
  beforeEach(() => {
    jest.restoreAllMocks();
    resetChannels(app.channels);
  });
  afterAll(async () => {
    jest.restoreAllMocks();
    await app.t?.close();
    app.raw?.disconnect();
    await app.redis?.destroy();
  });
  return app;
}
