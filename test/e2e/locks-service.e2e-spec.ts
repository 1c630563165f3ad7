import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import type Redis from 'ioredis';
import { KeyBuilder } from '../../src/platform/redis/key-builder';
import { LockContendedError, LockLostError, LockUnavailableError, LockUpgradeRefusedError } from '../../src/engines/locks/lock.errors';
import { InvalidArgumentError } from '../../src/platform/core/domain.error';
import { lockKeys } from '../../src/engines/locks/lock.keys';
import { LockService } from '../../src/engines/locks/lock.service';
import { DEFAULT_LUA_DIR } from '../../src/platform/scripts/script-loader';
import { ScriptRegistry } from '../../src/platform/scripts/script-registry.service';
import type { LockHandle } from '../../src/engines/locks/lock.types';
import { rawConnection, waitUntil } from '../harness/redis-process';
import { randomPrefix, RedisServerHandle, startRedisServer } from '../harness/redis-server';
import { startTestApp, TestApp } from '../support/test-app';
import { setTimeout as sleep } from 'node:timers/promises';

/**
 * The lock engine on two app instances sharing one Redis and key prefix (two
 * deployed replicas, each with its own connections and pub/sub subscription).
 */
const WAKE_CHECK_MS = 200;

describe(`${LockService.name} on two instances`, () => {
  let redis: RedisServerHandle;
  let raw: Redis;
  let apps: TestApp[];
  let locks: LockService[];
  let keys: KeyBuilder;
  let env: Record<string, string>;
  let n = 0;
  const fresh = () => `test:${process.pid}:${++n}`;
  const hashKey = (name: string) => lockKeys(keys, name).hash;
  const fenceKey = (name: string) => lockKeys(keys, name).fence;
  /** Counts the runs of script `id` on lock `name` through instance 0's registry (restore() afterwards). */
  const countRuns = (id: string, name: string) => {
    const registry = apps[0].app.get(ScriptRegistry);
    const run = registry.run.bind(registry);
    const counted = { n: 0, restore: () => spy.mockRestore() };
    const spy = jest.spyOn(registry, 'run').mockImplementation((sid, k, a) => {
      if (sid === id && k[0] === hashKey(name)) counted.n++;
      return run(sid, k, a);
    });
    return counted;
  };

  beforeAll(async () => {
    redis = await startRedisServer();
    raw = rawConnection(redis);
    env = { REDIS_KEY_PREFIX: randomPrefix(), LOCK_WAKE_CHECK_MS: String(WAKE_CHECK_MS) };
    apps = await Promise.all([startTestApp(redis.url, env), startTestApp(redis.url, env)]);
    locks = apps.map((t) => t.app.get(LockService));
    keys = apps[0].app.get(KeyBuilder);
  });

  afterAll(async () => {
    await Promise.all((apps ?? []).map((t) => t.close()));
    raw?.disconnect();
    await redis?.destroy();
  });

  it('takes a free lock, refuses a second owner with the time left, and frees the key at release', async () => {
    const name = fresh();
    const a = await locks[0].acquire(name, { leaseMs: 5_000 });
    expect(a.holdCount).toBe(1);
    expect(a.expiresAt).toBeGreaterThan(Date.now() + 4_000);
    const err = await locks[1].acquire(name, { leaseMs: 5_000, waitMs: 0 }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(LockContendedError);
    expect((err as LockContendedError).remainingTtlMs).toBeGreaterThan(4_000);
    expect((err as LockContendedError).kind).toBe('conflict');
    await a.release();
    expect(await raw.exists(hashKey(name))).toBe(0);
    const b = await locks[1].acquire(name, { leaseMs: 5_000 });
    expect(b.fencingToken).toBeGreaterThan(a.fencingToken);
    await b.release();
  });

  it('is reentrant within one async call chain: same owner and token, one more hold, freed only by the last release', async () => {
    const name = fresh();
    const seen: Array<[string, number, number]> = [];
    await locks[0].withLock(name, { leaseMs: 5_000 }, async (outer) => {
      seen.push([outer.owner, outer.fencingToken, outer.holdCount]);
      await Promise.resolve();
      await locks[0].withLock(name, { leaseMs: 5_000 }, async (inner) => {
        seen.push([inner.owner, inner.fencingToken, inner.holdCount]);
        expect((await locks[0].inspect(name))?.holders).toEqual([expect.objectContaining({ owner: outer.owner, count: 2 })]);
      });
      // The inner release only took its own hold back.
      expect((await locks[0].inspect(name))?.holders).toEqual([expect.objectContaining({ owner: outer.owner, count: 1 })]);
      await expect(locks[1].acquire(name, { waitMs: 0 })).rejects.toBeInstanceOf(LockContendedError);
    });
    expect(seen[1]).toEqual([seen[0][0], seen[0][1], 2]);
    expect(await raw.exists(hashKey(name))).toBe(0);
  });

  it('never shortens a hold by a reentrant acquire with a shorter lease', async () => {
    const name = fresh();
    await locks[0].withLock(name, { leaseMs: 5_000 }, async (outer) => {
      const inner = await locks[0].acquire(name, { leaseMs: 100, watchdog: false });
      expect(inner.expiresAt).toBeGreaterThanOrEqual(outer.expiresAt);
      await inner.release();
      // The lease in Redis is still the outer one (cut short, the key would go within 100 ms).
      expect((await locks[0].inspect(name))?.holders).toEqual([{ owner: outer.owner, count: 1, expiresAt: outer.expiresAt }]);
      expect(await raw.pttl(hashKey(name))).toBeGreaterThan(1_000);
      await expect(locks[1].acquire(name, { waitMs: 0 })).rejects.toBeInstanceOf(LockContendedError);
    });
  });

  it('keeps the outer hold when a nested hold with a shorter lease runs its own watchdog', async () => {
    const name = fresh();
    await locks[0].withLock(name, { leaseMs: 3_000 }, async (outer) => {
      // The nested hold's watchdog renews every 100 ms; the outer one's only every second.
      const outerEnd = (await locks[0].inspect(name))!.holders[0].expiresAt;
      await locks[0].withLock(name, { leaseMs: 300 }, () => sleep(450));
      // Its renewals never cut the outer lease (cut, it would end 300 ms after the last of them).
      expect((await locks[0].inspect(name))!.holders[0].expiresAt).toBeGreaterThanOrEqual(outerEnd);
      expect(await raw.pttl(hashKey(name))).toBeGreaterThan(1_000);
      expect(outer.signal.aborted).toBe(false);
      await expect(locks[1].acquire(name, { waitMs: 0, watchdog: false })).rejects.toBeInstanceOf(LockContendedError);
    });
  });

  it('does not let work started inside withLock re-enter with its owner once the hold is released', async () => {
    const name = fresh();
    let late!: Promise<LockHandle>;
    let outerOwner = '';
    let start!: () => void;
    await locks[0].withLock(name, { leaseMs: 5_000 }, async (lock) => {
      outerOwner = lock.owner;
      // Started inside the hold, run after it: it still carries the hold's async context.
      late = new Promise<void>((r) => (start = r)).then(() => locks[0].acquire(name, { leaseMs: 5_000, waitMs: 0 }));
    });
    start();
    const h = await late;
    expect(h.owner).not.toBe(outerOwner);
    expect(h.holdCount).toBe(1);
    await h.release();
  });

  it('runs detached() work as a separate owner even while the hold lives', async () => {
    const name = fresh();
    await locks[0].withLock(name, { leaseMs: 5_000 }, async () => {
      await expect(locks[0].detached(() => locks[0].acquire(name, { waitMs: 0 }))).rejects.toBeInstanceOf(LockContendedError);
      // Without detached(), the same call chain re-enters.
      const inner = await locks[0].acquire(name, { waitMs: 0 });
      expect(inner.holdCount).toBe(2);
      await inner.release();
    });
  });

  it('keeps no memory of holds taken and released the way the HTTP controller does', async () => {
    const before = locks[0].liveHolds;
    for (let i = 0; i < 20; i++) {
      const name = fresh();
      await locks[0].acquire(name, { owner: `svc:test:job-${i}`, leaseMs: 5_000, watchdog: false });
      await locks[0].release(name, `svc:test:job-${i}`);
    }
    expect(locks[0].liveHolds).toBe(before);
  });

  it('does not let a different async chain in the same process re-enter', async () => {
    const name = fresh();
    let release!: () => void;
    const holding = locks[0].withLock(name, { leaseMs: 5_000 }, () => new Promise<void>((r) => (release = r)));
    await waitUntil('the first chain to hold', async () => (await locks[0].inspect(name)) !== null, 2_000);
    // Same service instance, but a separate logical operation: no reentry.
    await expect(locks[0].acquire(name, { waitMs: 0 })).rejects.toBeInstanceOf(LockContendedError);
    release();
    await holding;
  });

  it('50 contenders on two instances never overlap in the critical section, and every one gets its turn', async () => {
    const name = fresh();
    let inside = 0;
    let maxInside = 0;
    const order: number[] = [];
    const tokens: number[] = [];
    await Promise.all(
      Array.from({ length: 50 }, (_, i) =>
        locks[i % 2].withLock(name, { leaseMs: 5_000, waitMs: 30_000 }, async (lock) => {
          inside++;
          maxInside = Math.max(maxInside, inside);
          // A shared read-modify-write across an await: lost updates if two ever overlap.
          const v = Number((await raw.get(`${name}:counter`)) ?? '0');
          await sleep(Math.random() * 3);
          await raw.set(`${name}:counter`, v + 1);
          tokens.push(lock.fencingToken);
          order.push(i);
          inside--;
        }),
      ),
    );
    expect(maxInside).toBe(1);
    expect(await raw.get(`${name}:counter`)).toBe('50');
    expect(new Set(order).size).toBe(50);
    // Fencing tokens strictly increase in the order the holds happened.
    expect(tokens).toEqual([...tokens].sort((a, b) => a - b));
    expect(new Set(tokens).size).toBe(50);
    await raw.del(`${name}:counter`);
  });

  it('wakes a waiter on the release message, not by polling', async () => {
    const name = fresh();
    const a = await locks[0].acquire(name, { leaseMs: 10_000 });
    const waiting = locks[1].acquire(name, { leaseMs: 5_000, waitMs: 10_000 });
    await sleep(100); // the waiter has subscribed and gone to sleep
    const released = performance.now();
    await a.release();
    const b = await waiting;
    const handoff = performance.now() - released;
    // The fallback re-check is every ~200 ms; a hand-off well under it came from the message.
    expect(handoff).toBeLessThan(WAKE_CHECK_MS / 2);
    await b.release();
  });

  it('wakes one waiting writer of a process per release, and each next one on the release message', async () => {
    const name = fresh();
    const WAITERS = 12;
    const tries = countRuns('locks/acquire', name);
    try {
      const first = await locks[1].acquire(name, { leaseMs: 10_000 });
      const got: number[] = [];
      const released: number[] = [];
      const waiting = Array.from({ length: WAITERS }, () =>
        locks[0].withLock(name, { leaseMs: 10_000, waitMs: 10_000 }, async () => {
          got.push(performance.now());
          await sleep(5);
          released.push(performance.now());
        }),
      );
      await sleep(100); // every waiter has tried, subscribed, tried again and gone to sleep
      const settled = tries.n;
      released.push(performance.now());
      await first.release();
      await Promise.all(waiting);
      // One try per release for the one writer it wakes (waking all of them: 12 + 11 + ... + 1 = 78);
      // the slack is for re-checks on a slow machine, which come every ~200 ms per sleeper.
      expect(tries.n - settled).toBeLessThan(2 * WAITERS);
      // Each hand-off came from the message: none waited for a re-check.
      const handoffs = got.map((t, i) => t - released[i]);
      expect(Math.max(...handoffs)).toBeLessThan(WAKE_CHECK_MS / 2);
    } finally {
      tries.restore();
    }
  });

  it('publishes a release only when somebody waits for it', async () => {
    const name = fresh();
    const channel = lockKeys(keys, name).channel;
    const listener = raw.duplicate();
    const heard: string[] = [];
    listener.on('message', (_c: string, owner: string) => heard.push(owner));
    await listener.subscribe(channel);
    try {
      // Nobody else wants it, or a caller tries once without waiting: no message.
      const alone = await locks[0].acquire(name, { leaseMs: 5_000 });
      await alone.release();
      const tried = await locks[0].acquire(name, { leaseMs: 5_000 });
      await expect(locks[1].acquire(name, { waitMs: 0 })).rejects.toBeInstanceOf(LockContendedError);
      await tried.release();
      await sleep(50);
      expect(heard).toEqual([]);
      // A waiter: the release is published, and the waiter is woken by it.
      const held = await locks[0].acquire(name, { leaseMs: 5_000 });
      const waiting = locks[1].acquire(name, { leaseMs: 5_000, waitMs: 5_000 });
      await waitUntil('the waiter to leave its mark', async () => (await raw.hexists(hashKey(name), 'q')) === 1, 2_000);
      await held.release();
      const next = await waiting;
      await next.release();
      await waitUntil('the release message', async () => heard.length > 0, 2_000);
      expect(heard).toEqual([held.owner]);
    } finally {
      listener.disconnect();
    }
  });

  it('wakes waiters within the re-check bound when the release message is lost', async () => {
    const name = fresh();
    const a = await locks[0].acquire(name, { leaseMs: 30_000, watchdog: false });
    const waiting = Promise.all([locks[1].acquire(name, { leaseMs: 5_000, waitMs: 10_000 }), sleep(0)]);
    await sleep(100);
    // The holder vanishes without a release message (as if the PUBLISH were lost).
    await raw.del(hashKey(name));
    const freed = performance.now();
    const [b] = await waiting;
    const waited = performance.now() - freed;
    // Far below the 10 s wait and the 30 s lease it would otherwise take; the margin is for a busy machine.
    expect(waited).toBeLessThan(WAKE_CHECK_MS * 1.2 + 400);
    expect(b.fencingToken).toBeGreaterThan(a.fencingToken);
    await b.release();
  });

  it("wakes a waiter when the holder's lease ends (a holder that died without releasing)", async () => {
    const name = fresh();
    await locks[0].acquire(name, { leaseMs: 300, watchdog: false });
    const t0 = performance.now();
    const b = await locks[1].acquire(name, { leaseMs: 5_000, waitMs: 5_000 });
    const waited = performance.now() - t0;
    expect(waited).toBeGreaterThan(200);
    expect(waited).toBeLessThan(300 + WAKE_CHECK_MS + 400);
    await b.release();
  });

  it("gives up waiting at the deadline with the holder's remaining time", async () => {
    const name = fresh();
    const a = await locks[0].acquire(name, { leaseMs: 10_000 });
    const t0 = performance.now();
    const err = await locks[1].acquire(name, { waitMs: 300 }).catch((e: unknown) => e);
    const waited = performance.now() - t0;
    expect(err).toBeInstanceOf(LockContendedError);
    expect(waited).toBeGreaterThanOrEqual(290);
    expect(waited).toBeLessThan(300 + 400);
    await a.release();
  });

  it('stops waiting when the caller aborts', async () => {
    const name = fresh();
    const a = await locks[0].acquire(name, { leaseMs: 10_000 });
    const ac = new AbortController();
    setTimeout(() => ac.abort(), 100);
    const t0 = performance.now();
    await expect(locks[1].acquire(name, { waitMs: 10_000, signal: ac.signal })).rejects.toBeInstanceOf(LockContendedError);
    expect(performance.now() - t0).toBeLessThan(800);
    await a.release();
  });

  it('keeps a long holder alive with the watchdog, and stops renewing at release', async () => {
    // The cadence (every third of the lease, none after release) is pinned on fake time in hold.spec.ts;
    // here the renewals reach Redis and keep the key alive for more than three leases.
    const name = fresh();
    const renewals = countRuns('locks/renew', name);
    try {
      const a = await locks[0].acquire(name, { leaseMs: 300 });
      await waitUntil('ten renewals (over three leases)', () => Promise.resolve(renewals.n >= 10), 10_000);
      expect(a.signal.aborted).toBe(false);
      await expect(locks[1].acquire(name, { waitMs: 0 })).rejects.toBeInstanceOf(LockContendedError);
      const ttl = await raw.pttl(hashKey(name));
      expect(ttl).toBeGreaterThan(0);
      expect(ttl).toBeLessThanOrEqual(300);
      await a.release();
      expect(await raw.exists(hashKey(name))).toBe(0);
      const atRelease = renewals.n;
      await sleep(250); // two renewal intervals: a renewal after the release would bring the key back
      expect(renewals.n).toBe(atRelease);
      expect(await raw.exists(hashKey(name))).toBe(0);
    } finally {
      renewals.restore();
    }
  });

  it('stops renewing at shutdown, even a hold whose renewal is on its way then: the lease runs out', async () => {
    const extra = await startTestApp(redis.url, env);
    try {
      const service = extra.app.get(LockService);
      const renew = service.renewHold.bind(service);
      let inFlight = false;
      // The first renewal: shut down while it is on its way, then let it reach Redis.
      jest.spyOn(service, 'renewHold').mockImplementation((h) => {
        if (!inFlight) {
          inFlight = true;
          service.onApplicationShutdown();
        }
        return renew(h);
      });
      const name = fresh();
      await service.acquire(name, { leaseMs: 300 });
      await waitUntil('a renewal to start', () => Promise.resolve(inFlight), 2_000);
      // That renewal extends the lease once; nothing after it does, so the key goes within about a lease.
      await waitUntil('the lease to run out', async () => (await raw.exists(hashKey(name))) === 0, 1_500);
      await sleep(400);
      expect(await raw.exists(hashKey(name))).toBe(0);
    } finally {
      await extra.close();
    }
  });

  it("aborts the holder's signal with LockLostError when the lease is lost, and the next holder's token is higher", async () => {
    const name = fresh();
    const a = await locks[0].acquire(name, { leaseMs: 300 });
    const unhandled: unknown[] = [];
    const onUnhandled = (e: unknown) => unhandled.push(e);
    process.on('unhandledRejection', onUnhandled);
    try {
      // Someone else takes over after the key is gone (an operator, a failover that lost the write).
      await raw.del(hashKey(name));
      const b = await locks[1].acquire(name, { leaseMs: 5_000 });
      await waitUntil('the watchdog to notice', () => Promise.resolve(a.signal.aborted), 2_000);
      expect(a.signal.reason).toBeInstanceOf(LockLostError);
      expect(b.fencingToken).toBeGreaterThan(a.fencingToken);
      await a.release(); // must not release b's hold
      expect((await locks[1].inspect(name))?.holders).toEqual([expect.objectContaining({ owner: b.owner, count: 1 })]);
      await b.release();
    } finally {
      process.off('unhandledRejection', onUnhandled);
    }
    expect(unhandled).toEqual([]);
  });

  it('never issues a lower fencing token, even after the lock expired and its counter was deleted', async () => {
    const name = fresh();
    const tokens: number[] = [];
    for (let i = 0; i < 5; i++) {
      const h = await locks[i % 2].acquire(name, { leaseMs: 100, watchdog: false });
      tokens.push(h.fencingToken);
      if (i === 2) await raw.del(fenceKey(name)); // the counter is gone (expired, or lost in a failover)
      if (i % 2 === 0) await h.release();
      else await sleep(150); // let the lease run out instead
    }
    for (let i = 1; i < tokens.length; i++) expect(tokens[i]).toBeGreaterThan(tokens[i - 1]);
  });

  describe('read/write locks', () => {
    it('lets readers share and keeps a writer out until the last reader leaves', async () => {
      const name = fresh();
      const r1 = await locks[0].acquire(name, { mode: 'read', leaseMs: 5_000 });
      const r2 = await locks[1].acquire(name, { mode: 'read', leaseMs: 5_000 });
      expect((await locks[0].inspect(name))?.mode).toBe('read');
      expect((await locks[0].inspect(name))?.holders).toHaveLength(2);
      await expect(locks[1].acquire(name, { mode: 'write', waitMs: 0 })).rejects.toBeInstanceOf(LockContendedError);
      await r1.release();
      await expect(locks[1].acquire(name, { mode: 'write', waitMs: 0 })).rejects.toBeInstanceOf(LockContendedError);
      await r2.release();
      const w = await locks[1].acquire(name, { mode: 'write', waitMs: 0 });
      await expect(locks[0].acquire(name, { mode: 'read', waitMs: 0 })).rejects.toBeInstanceOf(LockContendedError);
      await w.release();
    });

    it('does not starve a waiting writer: new readers queue behind it', async () => {
      const name = fresh();
      const r1 = await locks[0].acquire(name, { mode: 'read', leaseMs: 5_000 });
      const writer = locks[1].acquire(name, { mode: 'write', leaseMs: 5_000, waitMs: 10_000 });
      await waitUntil("the writer's mark", async () => (await raw.hexists(hashKey(name), 'ww')) === 1, 2_000);
      // A steady stream of readers would keep the lock shared forever; with a writer waiting they are refused.
      await expect(locks[0].acquire(name, { mode: 'read', waitMs: 0 })).rejects.toBeInstanceOf(LockContendedError);
      const lateReader = locks[0].acquire(name, { mode: 'read', leaseMs: 5_000, waitMs: 10_000 });
      await r1.release();
      const w = await writer;
      let readerIn = false;
      void lateReader.then(() => (readerIn = true));
      await sleep(50);
      expect(readerIn).toBe(false);
      await w.release();
      await (await lateReader).release();
    });

    it('lets readers in again soon after a waiting writer gives up', async () => {
      const name = fresh();
      const r1 = await locks[0].acquire(name, { mode: 'read', leaseMs: 5_000 });
      const ac = new AbortController();
      const writer = locks[1].acquire(name, { mode: 'write', waitMs: 60_000, signal: ac.signal }).catch((e: unknown) => e);
      await waitUntil("the writer's mark", async () => (await raw.hexists(hashKey(name), 'ww')) === 1, 2_000);
      await expect(locks[0].acquire(name, { mode: 'read', waitMs: 0 })).rejects.toBeInstanceOf(LockContendedError);
      ac.abort();
      expect(await writer).toBeInstanceOf(LockContendedError);
      // Its mark lasts at most three re-check intervals, not the rest of its 60 s wait.
      const t0 = performance.now();
      const r2 = await locks[0].acquire(name, { mode: 'read', waitMs: 5_000 });
      expect(performance.now() - t0).toBeLessThan(3 * WAKE_CHECK_MS + 300);
      await r2.release();
      await r1.release();
    });

    it('lets a writer take a read hold too, and refuses a reader that asks to become the writer', async () => {
      const name = fresh();
      await locks[0].withLock(name, { mode: 'write', leaseMs: 5_000 }, async () => {
        const r = await locks[0].acquire(name, { mode: 'read' });
        expect(r.holdCount).toBe(2);
        await r.release();
      });
      await locks[0].withLock(name, { mode: 'read', leaseMs: 5_000 }, async () => {
        await expect(locks[0].acquire(name, { mode: 'write', waitMs: 1_000 })).rejects.toBeInstanceOf(LockUpgradeRefusedError);
      });
      expect(await raw.exists(hashKey(name))).toBe(0);
    });
  });

  describe('release()', () => {
    /**
     * Records the scripts run on lock `name` through the registry of instance 0, in order (other tests'
     * holds may still be renewing theirs); `gate` holds back a renewal's answer.
     */
    function recordScripts(name: string, gate?: Promise<void>) {
      const registry = apps[0].app.get(ScriptRegistry);
      const run = registry.run.bind(registry);
      const calls: string[] = [];
      const spy = jest.spyOn(registry, 'run').mockImplementation(async (id, k, a) => {
        if (k[0] !== hashKey(name)) return run(id, k, a);
        calls.push(id);
        const result = await run(id, k, a);
        if (id === 'locks/renew' && gate) await gate;
        return result;
      });
      return { calls, restore: () => spy.mockRestore() };
    }

    it('returns the same promise when called again, and releases once', async () => {
      const name = fresh();
      const h = await locks[0].acquire(name, { leaseMs: 5_000 });
      const rec = recordScripts(name);
      try {
        const first = h.release();
        expect(h.release()).toBe(first);
        await first;
        await h.release();
        expect(rec.calls.filter((id) => id === 'locks/release')).toHaveLength(1);
        expect(await raw.exists(hashKey(name))).toBe(0);
      } finally {
        rec.restore();
      }
    });

    it('waits for a renewal already on its way, then releases: the release is the last word', async () => {
      const name = fresh();
      const h = (await locks[0].acquire(name, { leaseMs: 5_000 })) as LockHandle & { renewNow(): void };
      let open!: () => void;
      const rec = recordScripts(name, new Promise<void>((r) => (open = r)));
      try {
        h.renewNow();
        const released = h.release();
        await sleep(50);
        expect(rec.calls).toEqual(['locks/renew']);
        open();
        await released;
        expect(rec.calls).toEqual(['locks/renew', 'locks/release']);
        expect(await raw.exists(hashKey(name))).toBe(0);
      } finally {
        rec.restore();
      }
    });

    it('sends no release for a hold whose lease was lost', async () => {
      const name = fresh();
      const h = await locks[0].acquire(name, { leaseMs: 300 });
      await raw.del(hashKey(name));
      await waitUntil('the watchdog to notice', () => Promise.resolve(h.signal.aborted), 2_000);
      const rec = recordScripts(name);
      try {
        await h.release();
        expect(rec.calls).toEqual([]);
      } finally {
        rec.restore();
      }
    });
  });

  describe('the fencing include (lua/engines/locks/includes/fencing.lua)', () => {
    /** A module's write script as docs/locks.md shows it: the record, then the token and the value. */
    const writeScript = `${readFileSync(join(DEFAULT_LUA_DIR, 'engines', 'locks', 'includes', 'fencing.lua'), 'utf8')}
local WRITTEN, STALE_TOKEN = 0, 1
local recordKey = KEYS[1]
local token = tonumber(ARGV[1])
if fenceRefuses(recordKey, token) then return STALE_TOKEN end
redis.call('HSET', recordKey, 'balance', ARGV[2], fenceField(token))
return WRITTEN`;
    const [WRITTEN, STALE_TOKEN] = [0, 1];
    const write = (record: string, token: number, balance: string) => raw.eval(writeScript, 1, record, String(token), balance);

    it('refuses a write by a holder whose lease ran out once the next holder has written, and lets the current holder write again', async () => {
      const name = fresh();
      const record = `${name}:record`;
      const first = await locks[0].acquire(name, { leaseMs: 100, watchdog: false });
      await waitUntil('the first lease to end', async () => (await raw.exists(hashKey(name))) === 0, 2_000);
      const second = await locks[1].acquire(name, { leaseMs: 5_000 });
      expect(await write(record, second.fencingToken, '200')).toBe(WRITTEN);
      // The first holder wakes up from a pause and writes what it read before: refused, nothing written.
      expect(await write(record, first.fencingToken, '100')).toBe(STALE_TOKEN);
      expect(await raw.hgetall(record)).toEqual({ balance: '200', fence: String(second.fencingToken) });
      expect(await write(record, second.fencingToken, '300')).toBe(WRITTEN);
      expect(await raw.hget(record, 'balance')).toBe('300');
      await second.release();
      await raw.del(record);
    });

    it('keeps tokens past 2^31 exact', async () => {
      const record = `${fresh()}:record`;
      expect(await write(record, 1_732_000_000_123_456, 'a')).toBe(WRITTEN);
      expect(await raw.hget(record, 'fence')).toBe('1732000000123456');
      expect(await write(record, 1_732_000_000_123_455, 'b')).toBe(STALE_TOKEN);
      await raw.del(record);
    });
  });

  it('settings come per business: LOCK_POLICIES over the ones modules declare (orders) over the default', () => {
    expect(locks[0].policy('payment-plan')).toEqual({ leaseMs: 30_000, waitMs: 0 });
    expect(locks[0].policy('order')).toEqual({ leaseMs: 10_000, waitMs: 0 });
    expect(locks[0].policy('anything-else')).toEqual({ leaseMs: 30_000, waitMs: 0 });
  });

  it('refuses bad names and options before touching Redis', async () => {
    await expect(locks[0].acquire('has space')).rejects.toBeInstanceOf(InvalidArgumentError);
    await expect(locks[0].acquire('x'.repeat(129))).rejects.toBeInstanceOf(InvalidArgumentError);
    await expect(locks[0].acquire(fresh(), { leaseMs: 0 })).rejects.toBeInstanceOf(InvalidArgumentError);
    await expect(locks[0].acquire(fresh(), { waitMs: -1 })).rejects.toBeInstanceOf(InvalidArgumentError);
  });
});

describe(`${LockService.name} when Redis is down`, () => {
  let redis: RedisServerHandle;
  let app: TestApp;

  beforeAll(async () => {
    redis = await startRedisServer();
    app = await startTestApp(redis.url, { REDIS_KEY_PREFIX: randomPrefix(), REDIS_COMMAND_TIMEOUT_MS: '300' });
  });

  afterAll(async () => {
    await app?.close();
    await redis?.destroy();
  });

  it('fails closed with a 503 error within the command timeout, and holds nothing afterwards', async () => {
    const locks = app.app.get(LockService);
    const held: LockHandle = await locks.acquire('down:a', { leaseMs: 5_000 });
    await held.release();
    const stranded = await locks.acquire('down:c', { leaseMs: 5_000 });
    const live = locks.liveHolds;
    await redis.stop();
    // A release Redis cannot answer says so (503), and the hold is forgotten all the same: its lease runs out.
    const refused = await stranded.release().catch((e: unknown) => e);
    expect(refused).toBeInstanceOf(LockUnavailableError);
    expect((refused as LockUnavailableError).lockName).toBe('down:c');
    expect(locks.liveHolds).toBe(live - 1);
    const t0 = performance.now();
    const err = await locks.acquire('down:b', { leaseMs: 5_000, waitMs: 0 }).catch((e: unknown) => e);
    expect(performance.now() - t0).toBeLessThan(1_500);
    expect(err).toBeInstanceOf(LockUnavailableError);
    expect((err as LockUnavailableError).lockName).toBe('down:b');
    await redis.start();
    await waitUntil(
      'redis back',
      async () =>
        await locks.inspect('down:b').then(
          () => true,
          () => false,
        ),
      10_000,
    );
    expect(await locks.inspect('down:b')).toBeNull();
  });

  it('a try that timed out while Redis was frozen leaves no lock held once Redis answers again (not for its whole lease)', async () => {
    const locks = app.app.get(LockService);
    await waitUntil(
      'redis answering',
      async () =>
        (await locks.inspect('frozen:a').then(
          () => true,
          () => false,
        )) || 'not yet',
      10_000,
    );
    const pid = redis.pid!;
    process.kill(pid, 'SIGSTOP');
    let err: unknown;
    try {
      err = await locks.acquire('frozen:a', { leaseMs: 60_000, waitMs: 0 }).catch((e: unknown) => e);
    } finally {
      process.kill(pid, 'SIGCONT');
    }
    expect(err).toBeInstanceOf(LockUnavailableError);
    expect((err as LockUnavailableError).lockName).toBe('frozen:a');
    // The try reached Redis when it woke up and took the lock; it is given back long before its 60 s lease ends.
    await waitUntil('the lock free', async () => (await locks.inspect('frozen:a')) === null || 'still held', 5_000, 50);
    const again = await locks.acquire('frozen:a', { leaseMs: 5_000, waitMs: 0 });
    await again.release();
  });
});
