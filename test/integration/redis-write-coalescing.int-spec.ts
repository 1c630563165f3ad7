import { Logger } from '@nestjs/common';
import type Redis from 'ioredis';
import { loadConfig } from '../../src/config/load-config';
import { MetricsService } from '../../src/metrics/metrics.service';
import { RedisService } from '../../src/redis/redis.service';
import { RedisClusterHandle, startRedisCluster } from '../harness/redis-cluster';
import { HostPort, withConnection } from '../harness/redis-process';
import { randomPrefix, RedisServerHandle, startRedisServer } from '../harness/redis-server';

Logger.overrideLogger(['error']);

/**
 * RedisService's command connection sends the commands of one event-loop turn in one write
 * (src/redis/coalesce-writes.ts): Redis then reads them with a few reads instead of one each.
 * `total_reads_processed` (INFO stats) counts Redis's reads from client sockets.
 */
const CALLS = 200;

async function readsOf(node: HostPort): Promise<number> {
  return withConnection(node, async (r: Redis) => Number(/total_reads_processed:(\d+)/.exec(await r.info('stats'))?.[1]));
}

function service(env: Record<string, string>): RedisService {
  const config = loadConfig({ NODE_ENV: 'test', REDIS_KEY_PREFIX: randomPrefix(), ...env });
  return new RedisService(config, new MetricsService());
}

describe('command connection write coalescing', () => {
  describe('standalone', () => {
    let server: RedisServerHandle;
    let redis: RedisService | undefined;
    beforeAll(async () => {
      server = await startRedisServer({ appendonly: false });
    });
    afterEach(async () => {
      await redis?.close();
      redis = undefined;
    });
    afterAll(async () => {
      await server.destroy();
    });

    it(`answers ${CALLS} calls made in one turn, each its own reply, in a handful of Redis reads`, async () => {
      redis = service({ REDIS_URL: server.url });
      await redis.warmUp();
      const before = await readsOf(server);
      const keys = Array.from({ length: CALLS }, (_, i) => `rp-coalesce:${i}`);
      const sets = await Promise.all(keys.map((k, i) => redis!.command((c) => c.set(k, String(i)))));
      const gets = await Promise.all(keys.map((k) => redis!.command((c) => c.get(k))));
      expect(sets).toEqual(keys.map(() => 'OK'));
      expect(gets).toEqual(keys.map((_, i) => String(i)));
      // 2 × CALLS commands in two turns, plus this check's own connection (HELLO/INFO); one read per command without coalescing.
      expect((await readsOf(server)) - before).toBeLessThan(20);
    });

    it('keeps coalescing after a reconnect (a new socket)', async () => {
      redis = service({ REDIS_URL: server.url });
      await redis.warmUp();
      const client = redis.client as Redis;
      const first = client.stream;
      client.disconnect(true);
      await new Promise<void>((resolve) => client.once('ready', () => resolve()));
      expect(client.stream).not.toBe(first);
      const before = await readsOf(server);
      const pongs = await Promise.all(Array.from({ length: CALLS }, () => redis!.command((c) => c.ping())));
      expect(pongs).toEqual(Array.from({ length: CALLS }, () => 'PONG'));
      expect((await readsOf(server)) - before).toBeLessThan(12);
    });
  });

  describe('cluster', () => {
    let cluster: RedisClusterHandle;
    let redis: RedisService | undefined;
    beforeAll(async () => {
      cluster = await startRedisCluster();
    }, 60_000);
    afterAll(async () => {
      await redis?.close();
      await cluster.destroy();
    });

    it('coalesces on every master, and each call lands on the node of its slot', async () => {
      redis = service({ REDIS_CLUSTER_NODES: cluster.envValue });
      await redis.warmUp();
      // Node connections open on first use and queue nothing meanwhile (the app's boot does this with SCRIPT LOAD).
      await Promise.all(redis.masters().map((n) => n.ping()));
      const keys = Array.from({ length: CALLS }, (_, i) => `rp-coalesce:{${i}}`);
      await Promise.all(keys.map((k) => redis!.command((c) => c.set(k, k))));
      const before = await Promise.all(cluster.nodes.map(readsOf));
      const gets = await Promise.all(keys.map((k) => redis!.command((c) => c.get(k))));
      expect(gets).toEqual(keys);
      const after = await Promise.all(cluster.nodes.map(readsOf));
      for (const [i, n] of after.entries()) expect(n - before[i]).toBeLessThan(12);
    });
  });
});
