import { BackgroundWorkers } from '../../src/engines/workers/background-workers.service';
import { Logger } from '@nestjs/common';
import type Redis from 'ioredis';
import { loadConfig } from '../../src/platform/config/load-config';
import { MetricsService } from '../../src/platform/metrics/metrics.service';
import { deadEventStreamKeys, eventStreamKeys } from '../../src/features/orders/order.keys';
import { KeyBuilder } from '../../src/platform/redis/key-builder';
import { RedisService } from '../../src/platform/redis/redis.service';
import { ScriptRegistry } from '../../src/platform/scripts/script-registry.service';
import { StreamEntry, StreamGroupRunner } from '../../src/engines/streams/stream-group-runner';
import { StreamRunners } from '../../src/engines/streams/stream-runners.service';
import { StreamsMetrics } from '../../src/engines/streams/streams.metrics';
import { RedisClusterHandle, startRedisCluster } from '../harness/redis-cluster';
import { rawConnection, waitUntil } from '../harness/redis-process';
import { randomPrefix } from '../harness/redis-server';

Logger.overrideLogger(['error']);

/**
 * The runner on a 3-master cluster: the 16 order shard streams lie in 16 slots over the three masters,
 * and one XREADGROUP cannot span slots, so it runs one blocking read per slot, each on its own connection.
 */
describe(`${StreamGroupRunner.name} on a 3-master cluster`, () => {
  let cluster: RedisClusterHandle;
  let raw: Redis[];
  let redis: RedisService;
  let scripts: ScriptRegistry;
  let runners: StreamRunners;
  let streams: string[];
  let dead: string[];

  beforeAll(async () => {
    cluster = await startRedisCluster({ masters: 3 });
    raw = cluster.nodes.map((n) => rawConnection(n));
    const config = loadConfig({ NODE_ENV: 'test', REDIS_CLUSTER_NODES: cluster.envValue, REDIS_KEY_PREFIX: randomPrefix(), REDIS_COMMAND_TIMEOUT_MS: '1000' });
    const workers = new BackgroundWorkers();
    redis = new RedisService(config, new MetricsService());
    scripts = new ScriptRegistry(redis);
    await redis.warmUp();
    await scripts.loadAll();
    runners = new StreamRunners(redis, scripts, new StreamsMetrics(new MetricsService()), workers);
    const keys = new KeyBuilder(config);
    streams = eventStreamKeys(keys);
    dead = deadEventStreamKeys(keys);
  });

  afterAll(async () => {
    scripts?.onApplicationShutdown();
    await redis?.close();
    raw?.forEach((r) => r.disconnect());
    await cluster?.destroy();
  });

  /** The raw connection of the master holding `key`. */
  const nodeOf = async (key: string): Promise<Redis> => {
    const slot = Number(await raw[0].cluster('KEYSLOT', key));
    const range = (await raw[0].cluster('SLOTS')).find(([start, end]) => slot >= start && slot <= end)!;
    return raw[cluster.nodes.findIndex((n) => n.port === range[2][1])];
  };

  it('reads every shard, one blocking read per slot, and dead-letters within the slot', async () => {
    const seen: StreamEntry[] = [];
    let poisonCalls = 0;
    const runner = await runners.start({
      name: 'cluster-test',
      streams: streams.map((key, i) => ({ key, deadLetterKey: dead[i] })),
      group: 'cg',
      consumer: 'c1',
      blockMs: 2000,
      retry: { visibilityMs: 100, attempts: 2 },
      handler: async (e) => {
        if (e.fields[1] === 'poison') {
          poisonCalls++;
          throw new Error('poison');
        }
        seen.push(e);
      },
    });
    await waitUntil(
      'a blocked read per slot',
      async () => {
        const lists = await Promise.all(raw.map(async (r) => String(await r.client('LIST'))));
        const blocked = lists
          .join('\n')
          .split('\n')
          .filter((l) => / cmd=xreadgroup /.test(l)).length;
        return blocked === streams.length || `${blocked}`;
      },
      5000,
    );
    const ids = new Map<string, string>();
    for (const s of streams) ids.set(s, (await (await nodeOf(s)).xadd(s, '*', 'kind', 'ok'))!);
    await waitUntil('an entry from every shard', async () => seen.length >= streams.length || `${seen.length}`, 10_000);
    const poisonStream = streams[11];
    const poison = (await (await nodeOf(poisonStream)).xadd(poisonStream, '*', 'kind', 'poison'))!;
    const node = await nodeOf(poisonStream);
    await waitUntil('the poison entry dead-lettered', async () => (await node.xlen(dead[11])) === 1, 10_000);
    await runner.stop();
    expect(new Map(seen.map((e) => [e.stream, e.id]))).toEqual(ids);
    expect(poisonCalls).toBe(2);
    const [[, fields]] = await node.xrange(dead[11], '-', '+');
    expect(fields.slice(0, 10)).toEqual(['group', 'cg', 'consumer', 'c1', 'eventId', poison, 'deliveries', '2', 'error', 'poison']);
    for (const s of streams) expect((await (await nodeOf(s)).xpending(s, 'cg'))[0]).toBe(0);
  }, 30_000);
});
