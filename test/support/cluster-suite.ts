import type Redis from 'ioredis';
import { ScriptArg, ScriptRegistry } from '../../src/platform/scripts/script-registry.service';
import { RedisClusterHandle, startRedisCluster } from '../harness/redis-cluster';
import { rawConnection } from '../harness/redis-process';
import { startTestApp, TestApp } from './test-app';

export interface AppOnCluster {
  cluster: RedisClusterHandle;
  /** One plain connection per master, in the order of `cluster.nodes`. */
  raw: Redis[];
  t: TestApp;
  /** The scripts under `scripts` (e.g. `seckill/`) the app ran, by name. */
  ran: Set<string>;
  /** The index of the master whose slots hold `key`. */
  masterOf(key: string): Promise<number>;
}

/**
 * A suite's app on a fresh 3-master Redis Cluster (started before all its tests, closed after): `env` on top of the
 * cluster's nodes, a 1 s command timeout and no rate limiting; every script whose name starts with `scripts` that
 * the app runs is recorded in `ran`, so a suite can prove that each of its scripts ran on the cluster.
 */
export function useAppOnCluster(scripts: string, env: Record<string, string>): AppOnCluster {
  const suite: AppOnCluster = {
    cluster: undefined as unknown as RedisClusterHandle,
    raw: [],
    t: undefined as unknown as TestApp,
    ran: new Set<string>(),
    async masterOf(key) {
      const slot = Number(await suite.raw[0].cluster('KEYSLOT', key));
      const range = (await suite.raw[0].cluster('SLOTS')).find(([start, end]) => slot >= start && slot <= end)!;
      return suite.cluster.nodes.findIndex((n) => n.port === range[2][1]);
    },
  };
  beforeAll(async () => {
    suite.cluster = await startRedisCluster({ masters: 3 });
    suite.raw = suite.cluster.nodes.map((n) => rawConnection(n));
    suite.t = await startTestApp('', {
      REDIS_CLUSTER_NODES: suite.cluster.envValue,
      REDIS_COMMAND_TIMEOUT_MS: '1000',
      RATE_LIMIT_ENABLED: 'false',
      ...env,
    });
    const registry = suite.t.app.get(ScriptRegistry);
    const original = registry.run.bind(registry);
    jest.spyOn(registry, 'run').mockImplementation(((script: string, keys: readonly string[], args: readonly ScriptArg[] = []) => {
      if (script.startsWith(scripts)) suite.ran.add(script);
      return original(script, keys, args);
    }) as ScriptRegistry['run']);
  }, 60_000);
  afterAll(async () => {
    jest.restoreAllMocks();
    await suite.t?.close();
    suite.raw.forEach((r) => r.disconnect());
    await suite.cluster?.destroy();
  });
  return suite;
}
