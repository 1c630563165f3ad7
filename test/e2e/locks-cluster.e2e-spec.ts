import type Redis from 'ioredis';
import { LockContendedError, LockLostError } from '../../src/engines/locks/lock.errors';
import { lockKeys as lockKeysOf } from '../../src/engines/locks/lock.keys';
import { LockService } from '../../src/engines/locks/lock.service';
import { KeyBuilder } from '../../src/platform/redis/key-builder';
import { RedisService } from '../../src/platform/redis/redis.service';
import { ScriptArg, ScriptRegistry } from '../../src/platform/scripts/script-registry.service';
import { RedisClusterHandle, startRedisCluster } from '../harness/redis-cluster';
import { rawConnection, waitUntil } from '../harness/redis-process';
import { randomPrefix } from '../harness/redis-server';
import { startTestApp, TestApp } from '../support/test-app';

/**
 * The lock engine on a 3-master Redis Cluster, on two app instances sharing
 * the cluster and key prefix. A lock's hash, fencing counter and release
 * channel share the lock's hash tag, so each lock script runs on the master
 * owning that slot; lock names are picked so that each master owns one.
 * Waiters re-check only once a minute (LOCK_WAKE_CHECK_MS), so a waiter that
 * gets the lock right after a release was woken by the release message, which
 * a script PUBLISHed on one master and the other instance's subscriber
 * received through the cluster bus.
 */
const LOCK_SCRIPTS = ['locks/acquire', 'locks/inspect', 'locks/release', 'locks/renew'];
/** Lock names picked per master: one for each test below. */
const PER_MASTER = 8;

describe(`${LockService.name} on a 3-master cluster`, () => {
  let cluster: RedisClusterHandle;
  /** raw[i] talks to cluster.nodes[i] only. */
  let raw: Redis[];
  let apps: TestApp[];
  let locks: LockService[];
  let keys: KeyBuilder;
  /** Lock names by master: names[i] hash to slots cluster.nodes[i] owns. */
  const names: string[][] = [[], [], []];
  /** Which lock scripts ran under which lock name (on either instance; the real calls still run). */
  const ran = new Map<string, Set<string>>();
  const lockKeys = (name: string) => lockKeysOf(keys, name);
  /** The index of the master that serves `key`, asked of the cluster itself. */
  let masterOf: (key: string) => Promise<number>;
  /** EVAL/EVALSHA calls a node has served so far. */
  const evalCalls = async (node: Redis) => {
    const info = await node.info('commandstats');
    return [...info.matchAll(/^cmdstat_eval(?:sha)?:calls=(\d+)/gm)].reduce((s, m) => s + Number(m[1]), 0);
  };

  beforeAll(async () => {
    cluster = await startRedisCluster({ masters: 3 });
    raw = cluster.nodes.map((n) => rawConnection(n));
    // startTestApp sets REDIS_URL; an empty value means unset, so the cluster is the only topology.
    const env = { REDIS_CLUSTER_NODES: cluster.envValue, REDIS_COMMAND_TIMEOUT_MS: '1000', REDIS_KEY_PREFIX: randomPrefix(), LOCK_WAKE_CHECK_MS: '60000' };
    apps = await Promise.all([startTestApp('', env), startTestApp('', env)]);
    locks = apps.map((t) => t.app.get(LockService));
    keys = apps[0].app.get(KeyBuilder);

    for (const t of apps) {
      const scripts = t.app.get(ScriptRegistry);
      const original = scripts.run.bind(scripts);
      jest.spyOn(scripts, 'run').mockImplementation(((script: string, k: readonly string[], args: readonly ScriptArg[] = []) => {
        const name = /:locks:\{n:([^}]+)\}:/.exec(k[0] ?? '')?.[1];
        if (name) ran.set(name, (ran.get(name) ?? new Set()).add(script));
        return original(script, k, args);
      }) as ScriptRegistry['run']);
    }

    const slots = await raw[0].cluster('SLOTS');
    masterOf = async (key: string) => {
      const slot = Number(await raw[0].cluster('KEYSLOT', key));
      const range = slots.find(([start, end]) => slot >= start && slot <= end)!;
      return cluster.nodes.findIndex((n) => n.port === range[2][1]);
    };
    for (let i = 0; i < 300 && names.some((l) => l.length < PER_MASTER); i++) {
      const name = `inventory:sku-${i}`;
      const list = names[await masterOf(lockKeys(name).hash)];
      if (list.length < PER_MASTER) list.push(name);
    }
  });

  afterAll(async () => {
    jest.restoreAllMocks();
    await Promise.all((apps ?? []).map((t) => t.close()));
    raw?.forEach((r) => r.disconnect());
    await cluster?.destroy();
  });

  /** A lock name on master m that no earlier test used. */
  const used = new Set<string>();
  const on = (m: number) => {
    const name = names[m].find((x) => !used.has(x));
    if (!name) throw new Error(`no lock name left on master ${m}`);
    used.add(name);
    return name;
  };

  it('runs on cluster connections, with lock names on each of the three masters', () => {
    for (const t of apps) expect(t.app.get(RedisService).isCluster).toBe(true);
    expect(names.map((l) => l.length)).toEqual([PER_MASTER, PER_MASTER, PER_MASTER]);
    expect(new Set(names.flat()).size).toBe(3 * PER_MASTER);
  });

  it("keeps a lock's hash, fencing counter and release channel in one slot, and the hash only on the master owning it", async () => {
    const picked = [0, 1, 2].map((m) => on(m));
    const slotsOfLocks = new Set<number>();
    for (const [m, name] of picked.entries()) {
      const { hash, fence, channel } = lockKeys(name);
      const slots = await Promise.all([hash, fence, channel, `{n:${name}}`].map(async (k) => Number(await raw[m].cluster('KEYSLOT', k))));
      expect(new Set(slots).size).toBe(1);
      slotsOfLocks.add(slots[0]);
      expect(await masterOf(hash)).toBe(m);

      const h = await locks[0].acquire(name, { leaseMs: 10_000, watchdog: false });
      expect(await raw[m].hget(hash, `c:${h.owner}`)).toBe('1');
      expect(Number(await raw[m].get(fence))).toBe(h.fencingToken);
      for (const other of [1, 2].map((d) => (m + d) % 3)) await expect(raw[other].exists(hash)).rejects.toThrow(/^MOVED \d+ 127\.0\.0\.1:\d+/);
      await h.release();
      expect(await raw[m].exists(hash)).toBe(0);
    }
    expect(slotsOfLocks.size).toBe(3);
  });

  it('runs every lock script on each master: acquire, reentrant acquire, contended, renew, inspect, release to zero', async () => {
    for (const m of [0, 1, 2]) {
      const name = on(m);
      const { hash } = lockKeys(name);
      const evalsBefore = await Promise.all(raw.map(evalCalls));

      const owner = locks[0].newOwner();
      const first = await locks[0].acquire(name, { owner, leaseMs: 2_000, watchdog: false });
      const again = await locks[0].acquire(name, { owner, leaseMs: 2_000, watchdog: false });
      expect([first.holdCount, again.holdCount]).toEqual([1, 2]);
      expect(again.fencingToken).toBe(first.fencingToken);

      const refused = await locks[1].acquire(name, { leaseMs: 2_000, waitMs: 0 }).catch((e: unknown) => e);
      expect(refused).toBeInstanceOf(LockContendedError);
      expect((refused as LockContendedError).remainingTtlMs).toBeGreaterThan(1_000);
      expect((refused as LockContendedError).remainingTtlMs).toBeLessThanOrEqual(2_000);

      const { expiresAt } = await locks[1].renew(name, owner, 20_000);
      expect(expiresAt).toBeGreaterThanOrEqual(again.expiresAt + 17_000);
      expect(await raw[m].pttl(hash)).toBeGreaterThan(15_000);
      await expect(locks[1].renew(name, locks[1].newOwner(), 20_000)).rejects.toBeInstanceOf(LockLostError);

      const state = await locks[1].inspect(name);
      expect(state).toMatchObject({ name, mode: 'write', fencingToken: first.fencingToken, holders: [{ owner, count: 2, expiresAt }] });
      expect(state!.ttlMs).toBeGreaterThan(15_000);

      await expect(locks[1].release(name, locks[1].newOwner())).rejects.toBeInstanceOf(LockLostError);
      expect(await locks[1].release(name, owner)).toEqual({ holdCount: 1 });
      expect(await raw[m].exists(hash)).toBe(1);
      expect(await locks[0].release(name, owner)).toEqual({ holdCount: 0 });
      expect(await raw[m].exists(hash)).toBe(0);
      expect(await locks[0].inspect(name)).toBeNull();
      await expect(locks[0].release(name, owner)).rejects.toBeInstanceOf(LockLostError);
      // The handles' own release now finds nothing to give back, and says so without throwing.
      await first.release();

      const next = await locks[1].acquire(name, { leaseMs: 2_000, watchdog: false });
      expect(next.fencingToken).toBeGreaterThan(first.fencingToken);
      await next.release();

      // Every script call for this lock went to its master.
      const evalsAfter = await Promise.all(raw.map(evalCalls));
      expect(evalsAfter[m] - evalsBefore[m]).toBeGreaterThanOrEqual(12);
      expect([...(ran.get(name) ?? [])].sort()).toEqual(LOCK_SCRIPTS);
    }
  });

  it('wakes a waiter on the other instance by the release message from whichever master publishes it, long before its wait or a re-check', async () => {
    for (const m of [0, 1, 2]) {
      const name = on(m);
      const held = await locks[0].acquire(name, { leaseMs: 30_000, watchdog: false });
      let gotAt = 0;
      const waiter = locks[1].acquire(name, { leaseMs: 5_000, waitMs: 5_000, watchdog: false }).then((h) => {
        gotAt = Date.now();
        return h;
      });
      // The waiter has tried, subscribed, tried again, and sleeps until a message (the next re-check is a minute away).
      await new Promise((r) => setTimeout(r, 300));
      expect(gotAt).toBe(0);
      await held.release();
      const releasedAt = Date.now();
      const h = await waiter;
      expect(h.holdCount).toBe(1);
      expect(h.fencingToken).toBeGreaterThan(held.fencingToken);
      // Typically 1-2 ms (the margin is for a loaded machine); without the message it would have given up after 5 s.
      expect(gotAt - releasedAt).toBeLessThan(500);
      expect((await locks[0].inspect(name))?.holders).toEqual([expect.objectContaining({ owner: h.owner, count: 1 })]);
      await h.release();
    }
  });

  it('hands one lock on each master through 20 contenders on two instances without overlap, each holder with a higher token', async () => {
    const names3 = [0, 1, 2].map((m) => on(m));
    await Promise.all(
      names3.map(async (name) => {
        let inside = 0;
        let most = 0;
        const tokens: number[] = [];
        await Promise.all(
          Array.from({ length: 20 }, (_, i) =>
            locks[i % 2].withLock(name, { leaseMs: 5_000, waitMs: 15_000 }, async (lock) => {
              inside++;
              most = Math.max(most, inside);
              tokens.push(lock.fencingToken);
              await new Promise((r) => setTimeout(r, 5));
              inside--;
            }),
          ),
        );
        expect({ name, most, holders: tokens.length }).toEqual({ name, most: 1, holders: 20 });
        expect(tokens).toEqual([...tokens].sort((a, b) => a - b));
        expect(new Set(tokens).size).toBe(20);
        expect(await locks[0].inspect(name)).toBeNull();
      }),
    );
  });

  it('read and write modes on each master: readers on both instances share, a writer waits and keeps new readers out, then takes over', async () => {
    for (const m of [0, 1, 2]) {
      const name = on(m);
      const r1 = await locks[0].acquire(name, { mode: 'read', leaseMs: 10_000, watchdog: false });
      const r2 = await locks[1].acquire(name, { mode: 'read', leaseMs: 10_000, watchdog: false });
      expect(r2.fencingToken).toBeGreaterThan(r1.fencingToken);
      const state = await locks[0].inspect(name);
      expect(state?.mode).toBe('read');
      expect(state?.holders.map((h) => h.owner).sort()).toEqual([r1.owner, r2.owner].sort());
      await expect(locks[0].acquire(name, { mode: 'write', leaseMs: 10_000, waitMs: 0 })).rejects.toBeInstanceOf(LockContendedError);

      const writer = locks[1].acquire(name, { mode: 'write', leaseMs: 10_000, waitMs: 5_000, watchdog: false });
      await waitUntil('the writer to mark itself waiting', async () => (await raw[m].hget(lockKeys(name).hash, 'ww')) !== null, 2_000, 10);
      await expect(locks[0].acquire(name, { mode: 'read', leaseMs: 10_000, waitMs: 0 })).rejects.toBeInstanceOf(LockContendedError);

      await r1.release();
      await r2.release();
      const w = await writer;
      expect(w.fencingToken).toBeGreaterThan(r2.fencingToken);
      expect(await locks[0].inspect(name)).toMatchObject({ mode: 'write', holders: [{ owner: w.owner, count: 1 }] });
      await w.release();
      const r3 = await locks[0].acquire(name, { mode: 'read', leaseMs: 10_000, waitMs: 0, watchdog: false });
      expect(r3.fencingToken).toBeGreaterThan(w.fencingToken);
      await r3.release();
    }
  });

  it('a lease that runs out frees the lock on its master for the other instance, with a higher fencing token; the old holder has lost it', async () => {
    for (const m of [0, 1, 2]) {
      const name = on(m);
      const stale = await locks[0].acquire(name, { leaseMs: 150, watchdog: false });
      await new Promise((r) => setTimeout(r, 300));
      expect(await locks[1].inspect(name)).toBeNull();
      const fresh = await locks[1].acquire(name, { leaseMs: 5_000, waitMs: 0, watchdog: false });
      expect(fresh.fencingToken).toBeGreaterThan(stale.fencingToken);
      expect(Number(await raw[m].get(lockKeys(name).fence))).toBe(fresh.fencingToken);
      await expect(locks[0].renew(name, stale.owner, 5_000)).rejects.toBeInstanceOf(LockLostError);
      await expect(locks[0].release(name, stale.owner)).rejects.toBeInstanceOf(LockLostError);
      expect((await locks[0].inspect(name))?.holders).toEqual([expect.objectContaining({ owner: fresh.owner })]);
      await fresh.release();
    }
  });

  it('holds a lock on every master at once, each independent of the others', async () => {
    const picked = [0, 1, 2].map((m) => on(m));
    const held = await Promise.all(picked.map((name) => locks[0].acquire(name, { leaseMs: 10_000, watchdog: false })));
    for (const [m, name] of picked.entries()) {
      expect(await raw[m].exists(lockKeys(name).hash)).toBe(1);
      await expect(locks[1].acquire(name, { waitMs: 0 })).rejects.toBeInstanceOf(LockContendedError);
    }
    // Releasing the lock on one master frees only that one.
    await held[1].release();
    const other = await locks[1].acquire(picked[1], { leaseMs: 10_000, waitMs: 0, watchdog: false });
    await expect(locks[1].acquire(picked[0], { waitMs: 0 })).rejects.toBeInstanceOf(LockContendedError);
    await expect(locks[1].acquire(picked[2], { waitMs: 0 })).rejects.toBeInstanceOf(LockContendedError);
    await Promise.all([held[0].release(), held[2].release(), other.release()]);
    for (const [m, name] of picked.entries()) expect(await raw[m].exists(lockKeys(name).hash)).toBe(0);
  });
});
