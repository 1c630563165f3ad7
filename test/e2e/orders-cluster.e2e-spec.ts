import type Redis from 'ioredis';
import { KeyBuilder } from '../../src/platform/redis/key-builder';
import { RedisService } from '../../src/platform/redis/redis.service';
import { ChannelGateway } from '../../src/features/orders/channels/channel-gateway';
import type { OrderEvent } from '../../src/features/orders/order.events';
import { OrderEventsService } from '../../src/features/orders/order-events.service';
import { ORDER_SHARDS, orderKeys } from '../../src/features/orders/order.keys';
import { OrdersService } from '../../src/features/orders/orders.service';
import { PaymentPlansService } from '../../src/features/orders/payment-plans.service';
import { PaymentRunner } from '../../src/features/orders/payment-runner.service';
import { RedisClusterHandle, startRedisCluster } from '../harness/redis-cluster';
import { rawConnection, waitUntil } from '../harness/redis-process';
import { CREDS, startTestApp, TestApp } from '../support/test-app';

/**
 * Orders on a 3-master Redis Cluster: an order, its plans and its shard's
 * events stream share the shard's hash tag, so every order script (and the
 * XADD inside it) runs on the master owning that slot; the shards spread
 * over all three masters, and a consumer group reads every shard.
 */
describe(`${OrdersService.name} on a 3-master cluster`, () => {
  let cluster: RedisClusterHandle;
  let raw: Redis[];
  let t: TestApp;
  let orders: OrdersService;
  let plans: PaymentPlansService;
  let runner: PaymentRunner;
  let keyBuilder: KeyBuilder;

  beforeAll(async () => {
    cluster = await startRedisCluster({ masters: 3 });
    raw = cluster.nodes.map((n) => rawConnection(n));
    t = await startTestApp('', {
      REDIS_CLUSTER_NODES: cluster.envValue,
      REDIS_COMMAND_TIMEOUT_MS: '1000',
      ORDERS_QUERY_DELAY_MS: '50',
      CHANNEL_LATENCY_MS: '2',
    });
    orders = t.app.get(OrdersService);
    plans = t.app.get(PaymentPlansService);
    runner = t.app.get(PaymentRunner);
    keyBuilder = t.app.get(KeyBuilder);
  });

  afterAll(async () => {
    await t?.close();
    raw?.forEach((r) => r.disconnect());
    await cluster?.destroy();
  });

  /** The index of the master owning `key`'s slot. */
  const masterOf = async (key: string) => {
    const slot = Number(await raw[0].cluster('KEYSLOT', key));
    const range = (await raw[0].cluster('SLOTS')).find(([start, end]) => slot >= start && slot <= end)!;
    return cluster.nodes.findIndex((n) => n.port === range[2][1]);
  };
  /** The index of the master that holds `key` (it must exist there). */
  const ownerOf = async (key: string) => {
    const i = await masterOf(key);
    return (await raw[i].exists(key)) === 1 ? i : -1;
  };

  it('runs on a cluster connection, and the shard tags spread over all three masters', async () => {
    expect(t.app.get(RedisService).isCluster).toBe(true);
    const owners = new Set<number>();
    for (let shard = 0; shard < ORDER_SHARDS; shard++) owners.add(await masterOf(`{s:${shard}}`));
    expect(owners).toEqual(new Set([0, 1, 2]));
  });

  it('creates, pays (with an unknown outcome resolved by query) and closes orders on every master, each event in its order’s slot', async () => {
    t.app.get(ChannelGateway).configure('quickpay', { pay: 'unknown', query: 'success' });
    const events = t.app.get(OrderEventsService);
    const seen: OrderEvent[] = [];
    const consumer = await events.consume('cluster-group', async (e) => void seen.push(e), { consumer: 'c1', pollMs: 20 });

    const masters = new Set<number>();
    const paid: string[] = [];
    const payer = new Map<string, string>();
    const closed: string[] = [];
    for (let i = 0; i < 24 && (masters.size < 3 || paid.length < 3); i++) {
      const no = `cl-${i}`;
      const { order, created } = await orders.create({ merchantId: CREDS.merchantId, merchantOrderNo: no, amount: 5000, currency: 'EUR', subject: 'Cluster' });
      expect(created).toBe(true);
      expect((await orders.create({ merchantId: CREDS.merchantId, merchantOrderNo: no, amount: 5000, currency: 'EUR', subject: 'Cluster' })).created).toBe(
        false,
      );
      const [orderKey, , stream] = orderKeys(keyBuilder, order.orderId);
      const owner = await ownerOf(orderKey);
      expect(owner).toBeGreaterThanOrEqual(0);
      expect(await ownerOf(stream)).toBe(owner);
      masters.add(owner);
      const { plan } = await plans.create({
        accountId: `acc-cl-${i}`,
        orderId: order.orderId,
        instructions: [
          { method: 'balance', amount: 1000 },
          { method: 'quickpay', amount: 4000 },
        ],
      });
      expect(await ownerOf(orderKeys(keyBuilder, order.orderId, plan.planId)[1])).toBe(owner);
      if (i % 2 === 0) {
        expect((await runner.pay({ accountId: `acc-cl-${i}`, planId: plan.planId })).status).toBe('PAYING');
        paid.push(order.orderId);
        payer.set(order.orderId, `acc-cl-${i}`);
      } else {
        expect((await orders.close(CREDS.merchantId, no)).status).toBe('CLOSED');
        closed.push(order.orderId);
      }
    }
    expect(masters).toEqual(new Set([0, 1, 2]));
    for (const orderId of paid) {
      await waitUntil(`${orderId} paid after the query`, async () => (await orders.checkout(payer.get(orderId)!, orderId)).status === 'PAID', 10_000);
    }
    const want = paid.length * 2 + closed.length * 2;
    const mine = () => seen.filter((e) => paid.includes(e.orderId) || closed.includes(e.orderId));
    await waitUntil('every event', async () => mine().length >= want || `${mine().length}/${want}`, 10_000);
    await consumer.stop();
    expect(
      mine()
        .filter((e) => e.type === 'order.paid')
        .map((e) => e.orderId)
        .sort(),
    ).toEqual([...paid].sort());
    expect(
      mine()
        .filter((e) => e.type === 'order.closed')
        .map((e) => e.orderId)
        .sort(),
    ).toEqual([...closed].sort());
    expect(mine()).toHaveLength(want);
  });
});
