import type Redis from 'ioredis';
import { queueKeys } from '../../src/engines/delay-queue/delay-queue.keys';
import { DelayQueueService } from '../../src/engines/delay-queue/delay-queue.service';
import { KeyBuilder } from '../../src/platform/redis/key-builder';
import { RedisService } from '../../src/platform/redis/redis.service';
import { ScriptArg, ScriptRegistry } from '../../src/platform/scripts/script-registry.service';
import { RedisClusterHandle, startRedisCluster } from '../harness/redis-cluster';
import { rawConnection, waitUntil } from '../harness/redis-process';
import { startTestApp, TestApp } from '../support/test-app';

/**
 * The delay queue on a 3-master Redis Cluster: each queue's keys share its
 * hash tag, so every script runs on the one master owning that slot. Queues
 * are picked so that each master owns one.
 */
describe(`${DelayQueueService.name} on a 3-master cluster`, () => {
  let cluster: RedisClusterHandle;
  let raw: Redis[];
  let t: TestApp;
  let dq: DelayQueueService;
  let scripts: ScriptRegistry;
  let keyBuilder: KeyBuilder;
  /** One queue per master: queues[i] lives on cluster.nodes[i]. */
  let queues: string[];
  /** A second queue per master, for the wake-up test (a queue takes one processor per instance, ever). */
  let wakeQueues: string[];
  const ran = new Map<string, Set<string>>();

  beforeAll(async () => {
    cluster = await startRedisCluster({ masters: 3 });
    raw = cluster.nodes.map((n) => rawConnection(n));
    // startTestApp sets REDIS_URL; an empty value means unset, so the cluster is the only topology.
    t = await startTestApp('', { REDIS_CLUSTER_NODES: cluster.envValue, REDIS_COMMAND_TIMEOUT_MS: '1000' });
    dq = t.app.get(DelayQueueService);
    scripts = t.app.get(ScriptRegistry);
    keyBuilder = t.app.get(KeyBuilder);

    // Which script ran for which queue (the real call still runs).
    const original = scripts.run.bind(scripts);
    jest.spyOn(scripts, 'run').mockImplementation(((script: string, keys: readonly string[], args: readonly ScriptArg[] = []) => {
      const queue = /:delay-queue:\{q:([^}]+)\}:/.exec(keys[0] ?? '')?.[1] ?? '';
      ran.set(queue, (ran.get(queue) ?? new Set()).add(script));
      return original(script, keys, args);
    }) as ScriptRegistry['run']);

    const slots = await raw[0].cluster('SLOTS');
    const ownerOfSlot = (slot: number) => {
      const range = slots.find(([start, end]) => slot >= start && slot <= end)!;
      return cluster.nodes.findIndex((n) => n.port === range[2][1]);
    };
    const found: string[][] = [[], [], []];
    for (let i = 0; i < 200 && found.some((names) => names.length < 2); i++) {
      const q = `orders.close-${i}`;
      found[ownerOfSlot(Number(await raw[0].cluster('KEYSLOT', `{q:${q}}`)))].push(q);
    }
    queues = found.map((names) => names[0]);
    wakeQueues = found.map((names) => names[1]);
  });

  afterAll(async () => {
    jest.restoreAllMocks();
    await t?.close();
    raw?.forEach((r) => r.disconnect());
    await cluster?.destroy();
  });

  it('runs on a cluster connection, with one queue on each master', () => {
    expect(t.app.get(RedisService).isCluster).toBe(true);
    expect([...queues, ...wakeQueues].every((q) => typeof q === 'string')).toBe(true);
    expect(new Set([...queues, ...wakeQueues]).size).toBe(6);
  });

  it("keeps every key of a queue (and its channel) in one slot, on the master that owns the queue's tag", async () => {
    for (const [owner, q] of queues.entries()) {
      const k = queueKeys(keyBuilder, q);
      const tagSlot = Number(await raw[0].cluster('KEYSLOT', `{q:${q}}`));
      const slots = await Promise.all([...k.keys, k.channel].map(async (key) => Number(await raw[owner].cluster('KEYSLOT', key))));
      expect(k.keys).toHaveLength(9);
      expect(new Set(slots)).toEqual(new Set([tagSlot]));
      const [pending] = k.keys;
      await dq.schedule(q, 'placed', { delayMs: 60_000 }, 'p');
      expect(await raw[owner].zcard(pending)).toBe(1);
      await expect(raw[(owner + 1) % 3].zcard(pending)).rejects.toThrow(/^MOVED \d+ 127\.0\.0\.1:\d+/);
      expect(await dq.cancel(q, 'placed')).toEqual({ wasPending: true, state: 'pending', attempts: 0 });
    }
  });

  it('runs every delay-queue script on each master', async () => {
    for (const [owner, q] of queues.entries()) {
      const k = queueKeys(keyBuilder, q);
      const run = <R>(script: string, args: ScriptArg[]) => scripts.run<R>(`delay-queue/${script}`, k.keys, args);
      const calls = async () => {
        const info = await raw[owner].info('commandstats');
        return [...info.matchAll(/^cmdstat_eval(?:sha)?:calls=(\d+)/gm)].reduce((s, m) => s + Number(m[1]), 0);
      };
      const callsBefore = await calls();

      const p = await dq.schedule(q, 'p', { delayMs: 60_000 }, { kind: 'pending' });
      expect(p).toMatchObject({ written: true, created: true });
      await dq.schedule(q, 'a', { dueAt: 1 }, { kind: 'acked' });
      await dq.schedule(q, 'b', { dueAt: 2 }, { kind: 'failed' });
      expect(await dq.get(q, 'p')).toMatchObject({ state: 'pending', at: p.dueAt, payload: { kind: 'pending' } });
      const moved = await dq.reschedule(q, 'p', { delayMs: 120_000 });
      expect(moved).toBeGreaterThan(p.dueAt);
      expect(await dq.stats(q)).toMatchObject({ pending: 3, ready: 0, inFlight: 0, dead: 0, nextDueAt: 1 });

      const claimed = await run<Array<string | number>>('claim', [2, 30_000, 1, 1000, k.channel]);
      expect(claimed.slice(6).filter((_, i) => i % 5 === 0)).toEqual(['a', 'b']);
      const [tokenA, tokenB] = [Number(claimed[10]), Number(claimed[15])];
      expect(tokenB).toBeGreaterThan(tokenA);
      expect(await run<number>('extend', ['a', tokenA, 30_000])).toBe(1);
      expect(await run<number[]>('ack', ['a', tokenA])).toEqual([1]);
      expect(await run<number>('fail', ['b', tokenB, 1, 0, 'Error: no', 'fail', k.channel])).toBe(2);
      expect(await dq.get(q, 'a')).toBeNull();

      const dead = await dq.deadLetters(q);
      expect(dead).toMatchObject({ total: 1, items: [{ id: 'b', payload: { kind: 'failed' }, attempts: 1, lastError: 'Error: no' }] });
      await dq.retryDead(q, 'b');
      expect(await dq.get(q, 'b')).toMatchObject({ state: 'pending', attempts: 0 });
      expect(await dq.cancel(q, 'b')).toEqual({ wasPending: true, state: 'pending', attempts: 0 });
      expect(await dq.cancel(q, 'p')).toEqual({ wasPending: true, state: 'pending', attempts: 0 });
      expect(await dq.stats(q)).toMatchObject({ pending: 0, ready: 0, inFlight: 0, dead: 0, nextDueAt: null });

      // Every call went to this queue's master.
      expect((await calls()) - callsBefore).toBeGreaterThanOrEqual(16);
    }
    const all = scripts
      .list()
      .map((d) => d.id)
      .filter((id) => id.startsWith('delay-queue/'))
      .sort();
    expect(all.length).toBeGreaterThanOrEqual(11);
    for (const q of queues) expect(`${q}: ${[...(ran.get(q) ?? [])].sort().join(' ')}`).toBe(`${q}: ${all.join(' ')}`);
  });

  it('delivers end to end through process() on a queue on each master', async () => {
    const seen = new Map<string, string[]>();
    const processors = await Promise.all(
      queues.map((q) => dq.process<string>(q, async (d) => void seen.set(q, [...(seen.get(q) ?? []), d.payload]), { concurrency: 2 })),
    );
    try {
      for (const q of queues) {
        await Promise.all(['1', '2', '3', '4', '5'].map((n) => dq.schedule(q, `e2e-${n}`, { delayMs: 100 }, `${q}#${n}`)));
      }
      await waitUntil(
        'every queue to deliver its five items',
        async () => queues.every((q) => seen.get(q)?.length === 5) && (await Promise.all(queues.map((q) => dq.stats(q)))).every((s) => s.inFlight === 0),
        10_000,
      );
    } finally {
      await Promise.all(processors.map((p) => p.stop()));
    }
    for (const q of queues) expect([...seen.get(q)!].sort()).toEqual(['1', '2', '3', '4', '5'].map((n) => `${q}#${n}`));
  });

  it("wakes on the queue's event from whichever master publishes it, well before the fallback poll", async () => {
    const late = new Map<string, number[]>();
    const fired = new Map<string, () => void>();
    const processors = await Promise.all(
      wakeQueues.map((q) =>
        dq.process(q, async (d) => {
          late.set(q, [...(late.get(q) ?? []), Date.now() - d.dueAt]);
          fired.get(q)?.();
        }),
      ),
    );
    try {
      // One at a time, each due 50 ms after it is scheduled: a worker that only polled (every 0.5-1 s) would be
      // hundreds of ms late on most of them.
      await Promise.all(
        wakeQueues.map(async (q) => {
          for (let n = 0; n < 5; n++) {
            const done = new Promise<void>((r) => fired.set(q, r));
            await dq.schedule(q, `wake-${n}`, { delayMs: 50 }, n);
            await done;
          }
        }),
      );
    } finally {
      await Promise.all(processors.map((p) => p.stop()));
    }
    const medians = wakeQueues.map((q) => [...late.get(q)!].sort((x, y) => x - y)[2]);
    for (const m of medians) expect(m).toBeLessThan(200);
  });
});
