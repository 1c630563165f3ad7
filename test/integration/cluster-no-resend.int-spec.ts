import type Redis from 'ioredis';
import { loadConfig } from '../../src/platform/config/load-config';
import { DIAGNOSTICS_KEYS } from '../../src/platform/diagnostics/diagnostics.keys';
import { MetricsService } from '../../src/platform/metrics/metrics.service';
import { KeyBuilder } from '../../src/platform/redis/key-builder';
import { isRedisUnavailable } from '../../src/platform/redis/redis-unavailable.error';
import { RedisService } from '../../src/platform/redis/redis.service';
import { RedisClusterHandle, startRedisCluster } from '../harness/redis-cluster';
import { randomPrefix } from '../harness/redis-server';

/** Increments KEYS[1], then keeps the node busy for ARGV[1] ms (test-only script, sent by EVAL). */
const SLOW_INCR = `
redis.call('INCR', KEYS[1])
local t = redis.call('TIME')
local start = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
while true do
  t = redis.call('TIME')
  if tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000) - start > tonumber(ARGV[1]) then break end
end
return 1`;

describe('Redis Cluster: a command cut off by a dropped connection', () => {
  let cluster: RedisClusterHandle;
  beforeAll(async () => {
    cluster = await startRedisCluster({ masters: 3 });
  });
  afterAll(() => cluster.destroy());

  it('is never sent again (it may already have run): it fails as unavailable and runs exactly once', async () => {
    const config = loadConfig({ NODE_ENV: 'test', REDIS_CLUSTER_NODES: cluster.envValue, REDIS_KEY_PREFIX: randomPrefix(), REDIS_COMMAND_TIMEOUT_MS: '2000' });
    const redis = new RedisService(config, new MetricsService());
    try {
      await redis.warmUp();
      const key = new KeyBuilder(config).tagged(DIAGNOSTICS_KEYS, 'a', 'resend').key('n');
      await redis.client.set(key, '0');
      const slot = Number(await redis.client.cluster('KEYSLOT', key));
      const slots = (await redis.client.cluster('SLOTS')) as unknown as Array<[number, number, [string, number]]>;
      const [, , [, ownerPort]] = slots.find(([from, to]) => slot >= from && slot <= to)!;
      const owner = redis.masters().find((n) => n.options.port === ownerPort) as Redis & { stream: { destroy(): void } };

      const call = redis.client.eval(SLOW_INCR, 1, key, 300).then(
        () => 'resolved',
        (err: Error) => err,
      );
      await new Promise((r) => setTimeout(r, 100));
      owner.stream.destroy(); // the script is running on the server; its reply can no longer arrive
      const outcome = await call;
      expect(outcome).toBeInstanceOf(Error);
      expect(isRedisUnavailable(outcome)).toBe(true);
      await new Promise((r) => setTimeout(r, 500));
      expect(await redis.client.get(key)).toBe('1');
    } finally {
      await redis.close();
    }
  });
});
