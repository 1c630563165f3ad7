import request from 'supertest';
import { setTimeout as sleep } from 'node:timers/promises';
import { broadcastKeys, inboxKeys } from '../../src/features/messages/message.keys';
import { orderIndexKey, orderNumberKeyOf } from '../../src/features/orders/order.keys';
import { KeyBuilder } from '../../src/platform/redis/key-builder';
import { RedisClusterHandle, startRedisCluster } from '../harness/redis-cluster';
import { HostPort, withConnection } from '../harness/redis-process';
import { CREDS, merchantHeaders, startTestApp, TestApp } from '../support/test-app';

const SERVICE = { 'x-service-token': CREDS.serviceToken };
const ADMIN = { 'x-admin-key': CREDS.adminKey };

/** WAIT calls each master has served (INFO commandstats), by port. */
async function waitCalls(nodes: HostPort[]): Promise<Map<number, number>> {
  const counts = await Promise.all(
    nodes.map((n) => withConnection(n, async (c) => Number(/^cmdstat_wait:calls=(\d+)/m.exec(await c.info('commandstats'))?.[1] ?? 0))),
  );
  return new Map(nodes.map((n, i) => [n.port, counts[i]]));
}

describe('durable writes on a 3-master cluster with one replica each', () => {
  let cluster: RedisClusterHandle;
  let t: TestApp;
  let keys: KeyBuilder;

  beforeAll(async () => {
    cluster = await startRedisCluster({ replicasPerMaster: 1 });
    // Every master's replica online and answering WAIT before the first write (the first WAIT after a full
    // sync can take up to the replica's once-a-second ACK, and a replica may still be syncing here).
    await Promise.all(
      cluster.nodes.map((n) =>
        withConnection(n, async (c) => {
          const deadline = Date.now() + 30_000;
          while (!/^slave0:.*state=online/m.test(await c.info('replication')) || (await c.wait(1, 1000)) < 1) {
            if (Date.now() > deadline) throw new Error(`the replica of ${n.port} never came online`);
            await sleep(100);
          }
        }),
      ),
    );
    // This suite checks where each WAIT goes, not how fast: a generous timeout keeps a busy machine from failing it.
    t = await startTestApp('', {
      REDIS_URL: '',
      REDIS_CLUSTER_NODES: cluster.envValue,
      DURABILITY_REPLICAS: '1',
      DURABILITY_TIMEOUT_MS: '2000',
      REDIS_COMMAND_TIMEOUT_MS: '5000',
    });
    keys = t.app.get(KeyBuilder);
  }, 60_000);

  afterAll(async () => {
    await t?.close();
    await cluster?.destroy();
  });

  /** The port of the master that owns `key`'s slot. */
  async function ownerOf(key: string): Promise<number> {
    return withConnection(cluster.nodes[0], async (c) => {
      const slot = Number(await c.call('CLUSTER', 'KEYSLOT', key));
      const ranges = (await c.cluster('SLOTS')) as unknown as Array<[number, number, [string, number]]>;
      return ranges.find(([start, end]) => slot >= start && slot <= end)![2][1];
    });
  }

  /** Runs one durable write; expects exactly one WAIT, on the master that owns `firstKey`. Returns that port. */
  async function expectWaitOnOwner(firstKey: string, write: () => Promise<request.Response>): Promise<number> {
    const before = await waitCalls(cluster.nodes);
    const res = await write();
    expect(res.status).toBeLessThan(300);
    const after = await waitCalls(cluster.nodes);
    const owner = await ownerOf(firstKey);
    const delta = Object.fromEntries(cluster.nodes.map((n) => [n.port, after.get(n.port)! - before.get(n.port)!]));
    expect(delta).toEqual(Object.fromEntries(cluster.nodes.map((n) => [n.port, n.port === owner ? 1 : 0])));
    return owner;
  }

  it('sends the WAIT of every durable script to the master that owns its first key', async () => {
    const owners = new Set<number>();
    for (let i = 0; i < 12; i++) {
      const no = `cl-${process.pid}-${i}`;
      const body = JSON.stringify({ merchantOrderNo: no, amount: 300, currency: 'CNY', subject: 'Cluster' });
      const firstKey = orderIndexKey(keys, orderNumberKeyOf(CREDS.merchantId, no));
      owners.add(
        await expectWaitOnOwner(firstKey, () =>
          request(t.server)
            .post('/merchant/orders')
            .set(merchantHeaders('POST', '/merchant/orders', body))
            .send(body),
        ),
      );
    }
    for (let i = 0; i < 6; i++) {
      const accountId = `acc_cl_${i}`;
      const message = { accountId, bizType: 'PAYMENT_SUCCESS', outerBizId: `cl-${i}` };
      owners.add(
        await expectWaitOnOwner(inboxKeys(keys, accountId)[0], () =>
          request(t.server)
            .post('/messages')
            .set(SERVICE)
            .send({ ...message, title: 'Paid', content: 'Paid 3.00' }),
        ),
      );
      await expectWaitOnOwner(inboxKeys(keys, accountId)[0], () => request(t.server).post('/messages/withdraw').set(SERVICE).send(message));
    }
    await expectWaitOnOwner(broadcastKeys(keys)[0], () =>
      request(t.server).post('/admin/messages/broadcast').set(ADMIN).send({ audience: 'all', title: 'Hello', content: 'To all' }),
    );
    // The keys spread over the masters: the WAIT followed them rather than going to one node.
    expect(owners.size).toBeGreaterThan(1);
  });
});
