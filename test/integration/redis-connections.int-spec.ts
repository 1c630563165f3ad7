import { Logger } from '@nestjs/common';
import type Redis from 'ioredis';
import { AppConfig } from '../../src/platform/config/app-config';
import { loadConfig } from '../../src/platform/config/load-config';
import { DIAGNOSTICS_KEYS } from '../../src/platform/diagnostics/diagnostics.keys';
import { MetricsService } from '../../src/platform/metrics/metrics.service';
import { KeyBuilder } from '../../src/platform/redis/key-builder';
import { RedisUnavailableError } from '../../src/platform/redis/redis-unavailable.error';
import { RedisClient, RedisService } from '../../src/platform/redis/redis.service';
import { RATE_LIMIT_KEYS } from '../../src/platform/rate-limit/rate-limit.keys';
import { ScriptRegistry } from '../../src/platform/scripts/script-registry.service';
import { RedisClusterHandle, startRedisCluster } from '../harness/redis-cluster';
import { HostPort, waitUntil, withConnection } from '../harness/redis-process';
import { RedisSentinelHandle, startRedisSentinel } from '../harness/redis-sentinel';
import { RedisServerHandle, randomPrefix, startRedisServer } from '../harness/redis-server';
import { setTimeout as sleep } from 'node:timers/promises';

Logger.overrideLogger(['error']);

const COMMAND_TIMEOUT_MS = 500;

/** One service instance as Nest would build it, without Nest. */
interface Rig {
  config: AppConfig;
  redis: RedisService;
  scripts: ScriptRegistry;
  keys: KeyBuilder;
  close(): Promise<void>;
}

const rigs: Rig[] = [];

function makeRig(topologyEnv: Record<string, string>): Rig {
  const config = loadConfig({
    NODE_ENV: 'test',
    REDIS_KEY_PREFIX: randomPrefix(),
    REDIS_COMMAND_TIMEOUT_MS: String(COMMAND_TIMEOUT_MS),
    ...topologyEnv,
  });
  const metrics = new MetricsService();
  const redis = new RedisService(config, metrics);
  const scripts = new ScriptRegistry(redis);
  const rig: Rig = {
    config,
    redis,
    scripts,
    keys: new KeyBuilder(config),
    async close() {
      scripts.onApplicationShutdown();
      await redis.close();
    },
  };
  rigs.push(rig);
  return rig;
}

afterEach(async () => {
  await Promise.all(rigs.splice(0).map((r) => r.close()));
});

/** Names of the connections a node currently serves (CLIENT LIST). */
async function clientNames(node: HostPort): Promise<string[]> {
  const list = String(await withConnection(node, (c) => c.client('LIST')));
  return [...list.matchAll(/ name=(\S*) /g)].map((m) => m[1]).filter(Boolean);
}

/** Connected clients over all given nodes. */
async function connectedClients(nodes: HostPort[]): Promise<number> {
  const counts = await Promise.all(nodes.map((n) => withConnection(n, async (c) => Number(/^connected_clients:(\d+)/m.exec(await c.info('clients'))![1]))));
  return counts.reduce((a, b) => a + b, 0);
}

/** The port a connection is really talking to (options.port is meaningless for Sentinel-managed connections). */
async function servingPort(conn: Redis): Promise<number> {
  return Number(/^tcp_port:(\d+)/m.exec(await conn.info('server'))![1]);
}

const privateConns = (redis: RedisService) => redis as unknown as { subscriberConn?: RedisClient; blockingConns: Map<string, RedisClient> };

interface Topology {
  name: string;
  env(): Record<string, string>;
  masters: number;
  /** Nodes whose CLIENT LIST shows the service's named connections; undefined when connections are unnamed (cluster). */
  namedOn?(): HostPort;
  /** Every master data node. */
  dataNodes(): HostPort[];
  /** Every server the service may connect to (data nodes, replicas, Sentinels). */
  allNodes(): HostPort[];
}

/** What every topology must do, run once per topology against real servers. */
function connectionContract(t: Topology) {
  it('creates subscriber() and blocking(name) lazily, as separate connections', async () => {
    const { redis, scripts } = makeRig(t.env());
    await scripts.onApplicationBootstrap();
    expect(scripts.isLoaded).toBe(true);
    expect(privateConns(redis).subscriberConn).toBeUndefined();
    expect(privateConns(redis).blockingConns.size).toBe(0);

    const named = t.namedOn?.();
    if (named) {
      const names = await clientNames(named);
      expect(names).toContain('redis-pay:command');
      expect(names).not.toContain('redis-pay:subscriber');
      expect(names.filter((n) => n.startsWith('redis-pay:blocking:'))).toEqual([]);
    }
    const before = await connectedClients(t.dataNodes());

    const sub = redis.subscriber();
    expect(sub).not.toBe(redis.client);
    expect(redis.subscriber()).toBe(sub);
    const bx = redis.blocking('x');
    expect(bx).not.toBe(redis.client);
    expect(bx).not.toBe(sub);
    expect(redis.blocking('x')).toBe(bx);
    const by = redis.blocking('y');
    expect(by).not.toBe(bx);

    // They connect on creation, each on its own socket(s).
    await waitUntil('the new connections to be ready', async () => [sub, bx, by].every((c) => c.status === 'ready'), 5_000);
    expect(await connectedClients(t.dataNodes())).toBeGreaterThanOrEqual(before + 3);
    if (named) {
      await waitUntil(
        'CLIENT LIST to show the named connections',
        async () => {
          const names = await clientNames(named);
          return (
            ['redis-pay:command', 'redis-pay:subscriber', 'redis-pay:blocking:x', 'redis-pay:blocking:y'].every((n) => names.includes(n)) || names.join(' ')
          );
        },
        5_000,
      );
    }
  });

  it('warmUp connects and masters() lists every master', async () => {
    const { redis, scripts } = makeRig(t.env());
    expect(redis.isConnected).toBe(false);
    await redis.warmUp();
    expect(redis.isConnected).toBe(true);
    expect(redis.isCluster).toBe(t.name === 'cluster');
    const masters = redis.masters();
    expect(masters).toHaveLength(t.masters);
    const ports = await Promise.all(masters.map(servingPort));
    expect(ports.sort()).toEqual(
      t
        .dataNodes()
        .map((n) => n.port)
        .sort(),
    );
    for (const m of masters) expect(await m.ping()).toBe('PONG');
    await scripts.loadAll();
    expect(scripts.isLoaded).toBe(true);
  });

  it('delivers pub/sub messages through subscriber()', async () => {
    const { redis, config } = makeRig(t.env());
    await redis.warmUp();
    const channel = `${config.redis.keyPrefix}:events`;
    const sub = redis.subscriber();
    const received: string[] = [];
    sub.on('message', (ch: string, msg: string) => {
      if (ch === channel) received.push(msg);
    });
    await sub.subscribe(channel);
    // PUBLISH answers how many subscribers got it on that node; in a cluster it reaches every node's subscribers.
    await redis.client.publish(channel, 'one');
    await redis.client.publish(channel, 'two');
    await waitUntil('both messages', async () => received.length >= 2 || `got ${received.join(',')}`, 3_000);
    expect(received).toEqual(['one', 'two']);
  });

  it('runs bounded BLPOPs through blocking(), which has no command timeout', async () => {
    const { redis, keys } = makeRig(t.env());
    await redis.warmUp();
    const q = keys.tagged(DIAGNOSTICS_KEYS, 'a', 'queue').key('jobs');
    const conn = redis.blocking('worker');

    // Longer than the command timeout: the blocking connection must wait it out and answer "nothing".
    const t0 = Date.now();
    expect(await conn.blpop(keys.tagged(DIAGNOSTICS_KEYS, 'a', 'queue').key('empty'), 0.8)).toBeNull();
    expect(Date.now() - t0).toBeGreaterThanOrEqual(700);

    const popped = conn.blpop(q, 3);
    await sleep(100);
    await redis.client.rpush(q, 'job-1');
    expect(await popped).toEqual([q, 'job-1']);
  });

  it('keeps every key it writes under the configured prefix', async () => {
    const { redis, scripts, keys, config } = makeRig(t.env());
    await scripts.onApplicationBootstrap();
    const prefix = config.redis.keyPrefix;
    const tags = ['alice', 'bob', 'carol', 'dave', 'erin'];
    for (const tag of tags) {
      await scripts.run('diagnostics/touch', [keys.tagged(DIAGNOSTICS_KEYS, 'a', tag).key('visits', 'web')], [60_000]);
      await scripts.run('core/rate-limit', [keys.tagged(RATE_LIMIT_KEYS, 'user', tag).key('window')], [10, 60_000, 1]);
    }
    const found = (
      await Promise.all(redis.masters().map(async (m) => withConnection({ host: '127.0.0.1', port: await servingPort(m) }, (c) => c.keys(`${prefix}:*`))))
    ).flat();
    expect(found.sort()).toEqual(tags.flatMap((tag) => [`${prefix}:diagnostics:{a:${tag}}:visits:web`, `${prefix}:rate-limit:{user:${tag}}:window`]).sort());
  });

  it('onApplicationShutdown closes every connection, even one blocked in BLPOP', async () => {
    const baseline = await connectedClients(t.allNodes());
    const rig = makeRig(t.env());
    const { redis, scripts, keys } = rig;
    await scripts.onApplicationBootstrap();
    const sub = redis.subscriber();
    await sub.subscribe(`${rig.config.redis.keyPrefix}:bye`);
    const blocked = redis.blocking('long');
    await waitUntil('blocking connection ready', async () => blocked.status === 'ready', 5_000);
    const pending = blocked.blpop(keys.tagged(DIAGNOSTICS_KEYS, 'a', 'never').key('q'), 10).catch((e: Error) => e);
    await sleep(50);

    const t0 = Date.now();
    scripts.onApplicationShutdown();
    await redis.close();
    expect(Date.now() - t0).toBeLessThan(COMMAND_TIMEOUT_MS + 500);
    await waitUntil(
      'every connection to end',
      async () => [redis.client, sub, blocked].every((c) => c.status === 'end') || [redis.client, sub, blocked].map((c) => c.status).join(','),
      2_000,
    );
    expect(await pending).toBeInstanceOf(Error);

    // A late caller gets a prompt error, not a command that waits forever on a closed client.
    const late = await Promise.race([
      redis.client.get(keys.tagged(DIAGNOSTICS_KEYS, 'a', 'late').key('x')).then(
        () => 'resolved',
        (e: Error) => e.message,
      ),
      sleep(COMMAND_TIMEOUT_MS + 500).then(() => 'still pending'),
    ]);
    expect(late).toMatch(/Connection is closed/);

    // Nothing stays connected anywhere: not to a data node, not to a Sentinel.
    await waitUntil(
      'every connection the service opened to be closed server-side',
      async () => {
        const now = await connectedClients(t.allNodes());
        return now <= baseline || `${now} connected, ${baseline} before the service started`;
      },
      2_000,
    );
    const named = t.namedOn?.();
    if (named) {
      await waitUntil(
        'the server to drop the connections',
        async () => {
          const left = (await clientNames(named)).filter((n) => n.startsWith('redis-pay:'));
          return left.length === 0 || left.join(' ');
        },
        2_000,
      );
    }
  });
}

describe('standalone', () => {
  let server: RedisServerHandle;
  beforeAll(async () => {
    server = await startRedisServer();
  });
  afterAll(async () => {
    await server?.destroy();
  });

  connectionContract({
    name: 'standalone',
    env: () => ({ REDIS_URL: server.url }),
    masters: 1,
    namedOn: () => server,
    dataNodes: () => [server],
    allNodes: () => [server],
  });

  describe('while Redis is down', () => {
    let down: RedisServerHandle;
    afterAll(async () => {
      await down?.destroy();
    });

    it('fails fast with RedisUnavailableError, and recovers data and scripts after a restart', async () => {
      down = await startRedisServer();
      const { redis, scripts, keys } = makeRig({ REDIS_URL: down.url });
      await scripts.onApplicationBootstrap();
      const key = keys.tagged(DIAGNOSTICS_KEYS, 'a', 'durable').key('visits', 'x');
      for (let i = 1; i <= 3; i++) expect((await scripts.run<[number, number]>('diagnostics/touch', [key], [600_000]))[0]).toBe(i);
      const sha = scripts.get('diagnostics/touch').sha;
      const runIdBefore = await withConnection(down, async (c) => /^run_id:(\w+)/m.exec(await c.info('server'))![1]);

      await down.stop();
      const other = keys.tagged(DIAGNOSTICS_KEYS, 'a', 'while-down').key('visits', 'x');
      const bound = COMMAND_TIMEOUT_MS + 500;
      for (let i = 0; i < 3; i++) {
        const t0 = Date.now();
        const err = await scripts.run('diagnostics/touch', [other], [600_000]).catch((e: unknown) => e);
        const elapsed = Date.now() - t0;
        expect(err).toBeInstanceOf(RedisUnavailableError);
        expect(elapsed).toBeLessThanOrEqual(bound);
      }
      // Many at once: each settles within the bound too.
      const t0 = Date.now();
      const all = await Promise.all(Array.from({ length: 20 }, () => scripts.run('diagnostics/touch', [other], [600_000]).catch((e: unknown) => e)));
      expect(Date.now() - t0).toBeLessThanOrEqual(bound);
      all.forEach((e) => expect(e).toBeInstanceOf(RedisUnavailableError));
      expect(redis.isConnected).toBe(false);

      await down.start();
      // A new process (so an empty script cache) that replayed the AOF: the data written before is there.
      await withConnection(down, async (c) => {
        expect(/^run_id:(\w+)/m.exec(await c.info('server'))![1]).not.toBe(runIdBefore);
        expect(await c.hget(key, 'n')).toBe('3');
      });
      // The service reconnects by itself and the script runs again.
      await waitUntil('the service to reconnect', async () => redis.isConnected, 5_000);
      expect((await scripts.run<[number, number]>('diagnostics/touch', [key], [600_000]))[0]).toBe(4);
      expect(await withConnection(down, (c) => c.script('EXISTS', sha))).toEqual([1]);
    });
  });
});

describe('sentinel', () => {
  let s: RedisSentinelHandle;
  beforeAll(async () => {
    s = await startRedisSentinel({ sentinels: 3 });
  });
  afterAll(async () => {
    await s?.destroy();
  });

  const env = () => ({ REDIS_SENTINELS: s.envValue, REDIS_SENTINEL_MASTER: s.masterName });
  connectionContract({
    name: 'sentinel',
    env,
    masters: 1,
    namedOn: () => s.master,
    dataNodes: () => [s.master],
    allNodes: () => [s.master, s.replica, ...s.sentinels],
  });

  it('follows a failover: writes through the same RedisService reach the new master within seconds', async () => {
    const { redis, scripts, keys } = makeRig(env());
    await scripts.onApplicationBootstrap();
    const key = keys.tagged(DIAGNOSTICS_KEYS, 'a', 'failover').key('visits', 'x');
    expect((await scripts.run<[number, number]>('diagnostics/touch', [key], [600_000]))[0]).toBe(1);
    expect(await (redis.client as Redis).wait(1, 2_000)).toBe(1);

    const oldMaster = s.master;
    const newMaster = s.replica;
    await s.failover();
    expect(s.master).toBe(newMaster);

    // Each probe is a fresh key: it is on the new master only if this very write went there
    // (the old master no longer replicates to it).
    const t0 = Date.now();
    let i = 0;
    await waitUntil(
      'a write through the service to land on the new master',
      async () => {
        const probe = keys.tagged(DIAGNOSTICS_KEYS, 'a', 'failover').key('probe', String(i++));
        try {
          await redis.client.set(probe, 'x');
        } catch (err) {
          return `write failed: ${(err as Error).message}`;
        }
        if ((await withConnection(newMaster, (c) => c.exists(probe))) === 1) return true;
        const onOld = (await withConnection(oldMaster, (c) => c.exists(probe))) === 1;
        // A write the old master acknowledged is lost when Sentinel demotes it (full resync from the new master).
        return onOld ? 'the write was acknowledged by the old master, which is no longer the master' : 'the write is on neither node';
      },
      5_000,
      100,
    );
    expect(Date.now() - t0).toBeLessThan(5_000);

    // Scripts run on the new master, which has the data written before the failover.
    expect((await scripts.run<[number, number]>('diagnostics/touch', [key], [600_000]))[0]).toBe(2);
    expect(await withConnection(newMaster, (c) => c.hget(key, 'n'))).toBe('2');
    expect(await clientNames(newMaster)).toContain('redis-pay:command');
  });
});

describe('cluster', () => {
  let cluster: RedisClusterHandle;
  beforeAll(async () => {
    cluster = await startRedisCluster({ masters: 3 });
  });
  afterAll(async () => {
    await cluster?.destroy();
  });

  connectionContract({
    name: 'cluster',
    env: () => ({ REDIS_CLUSTER_NODES: cluster.envValue }),
    masters: 3,
    dataNodes: () => cluster.nodes,
    allNodes: () => cluster.nodes,
  });
});
