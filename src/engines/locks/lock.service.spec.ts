import { EventEmitter } from 'node:events';
import type { RedisService } from '../../platform/redis/redis.service';
import { systemClock } from '../workers/clock';
import { LockContendedError } from './lock.errors';
import type { LockMetrics } from './lock.metrics';
import { LockPolicies } from './lock-policies';
import { LockService } from './lock.service';
import type { AcquireCommand, AcquireResult, LockStore } from './lock.store';
import type { LocksConfig } from './locks.config';

const WAKE_CHECK_MS = 200;
const counter = () => ({ inc: () => undefined, observe: () => undefined });

/**
 * The waiting logic of LockService on fake time: a store whose lock is taken
 * until the test frees it, and a subscriber the test publishes on. Redis itself
 * is covered by test/e2e/locks-service.e2e-spec.ts.
 */
describe(`${LockService.name} waiting`, () => {
  let free: boolean;
  let tries: Array<AcquireCommand & { at: number }>;
  let freeInMs: number;
  let sub: EventEmitter & { subscribe: (ch: string) => Promise<unknown>; unsubscribe: () => Promise<unknown> };
  let locks: LockService;
  let t0: number;

  beforeEach(() => {
    jest.useFakeTimers();
    jest.spyOn(Math, 'random').mockReturnValue(0.5); // no jitter: a re-check comes exactly every WAKE_CHECK_MS
    free = false;
    freeInMs = 30_000;
    tries = [];
    t0 = performance.now();
    const store = {
      keys: (name: string) => ({ hash: `${name}:h`, fence: `${name}:fence`, channel: `${name}:released` }),
      acquire: (_name: string, _keys: unknown, cmd: AcquireCommand): Promise<AcquireResult> => {
        tries.push({ ...cmd, at: performance.now() - t0 });
        return Promise.resolve(free ? { held: true, fencingToken: 1, expiresAt: 0, holdCount: 1 } : { held: false, freeInMs });
      },
    } as unknown as LockStore;
    sub = Object.assign(new EventEmitter(), { subscribe: () => Promise.resolve(1), unsubscribe: () => Promise.resolve(0) });
    const config: LocksConfig = { policies: new Map(), wakeCheckMs: WAKE_CHECK_MS };
    const metrics = { forAcquire: () => ({ acquired: counter(), contended: counter(), unavailable: counter(), wait: counter() }) } as unknown as LockMetrics;
    const redis = { subscriber: () => sub } as unknown as RedisService;
    locks = new LockService(store, new LockPolicies(config), config, metrics, redis, systemClock);
  });

  afterEach(() => {
    locks.onApplicationShutdown();
    jest.restoreAllMocks();
    jest.useRealTimers();
  });

  /** When `p` settled, ms after the start (undefined while pending), and how. */
  function track<T>(p: Promise<T>): { at?: number; value?: T; error?: unknown } {
    const r: { at?: number; value?: T; error?: unknown } = {};
    p.then(
      (v) => Object.assign(r, { at: performance.now() - t0, value: v }),
      (e: unknown) => Object.assign(r, { at: performance.now() - t0, error: e }),
    );
    return r;
  }

  it('takes the lock at once on a release message', async () => {
    const got = track(locks.acquire('a', { waitMs: 10_000, watchdog: false }));
    await jest.advanceTimersByTimeAsync(50);
    expect(tries.map((t) => t.at)).toEqual([0, 0]); // a try, the subscription, a second try
    free = true;
    sub.emit('message', 'a:released', 'owner');
    await jest.advanceTimersByTimeAsync(0);
    expect(got.at).toBe(50);
  });

  it('re-checks every wakeCheckMs when no release message comes: a lost message costs one interval', async () => {
    const got = track(locks.acquire('a', { waitMs: 10_000, watchdog: false }));
    await jest.advanceTimersByTimeAsync(50);
    free = true; // the holder is gone, and nobody says so
    await jest.advanceTimersByTimeAsync(WAKE_CHECK_MS - 51);
    expect(got.at).toBeUndefined();
    await jest.advanceTimersByTimeAsync(1);
    expect(got.at).toBe(WAKE_CHECK_MS);
    expect(tries.map((t) => t.at)).toEqual([0, 0, WAKE_CHECK_MS]);
  });

  it("tries again when the holder's lease ends, before the next re-check", async () => {
    freeInMs = 30;
    const got = track(locks.acquire('a', { waitMs: 10_000, watchdog: false }));
    await jest.advanceTimersByTimeAsync(30);
    free = true;
    await jest.advanceTimersByTimeAsync(1);
    expect(got.at).toBe(31);
  });

  it("gives up at its deadline with the holder's remaining time", async () => {
    freeInMs = 10_000;
    const got = track(locks.acquire('a', { waitMs: 300, watchdog: false }));
    await jest.advanceTimersByTimeAsync(299);
    expect(got.at).toBeUndefined();
    await jest.advanceTimersByTimeAsync(1);
    expect(got.at).toBe(300);
    expect(got.error).toBeInstanceOf(LockContendedError);
    expect((got.error as LockContendedError).remainingTtlMs).toBe(10_000);
    expect(tries.map((t) => t.at)).toEqual([0, 0, WAKE_CHECK_MS, 300]);
  });

  it('stops waiting when the caller aborts', async () => {
    const ac = new AbortController();
    const got = track(locks.acquire('a', { waitMs: 10_000, signal: ac.signal, watchdog: false }));
    await jest.advanceTimersByTimeAsync(120);
    ac.abort();
    await jest.advanceTimersByTimeAsync(0);
    expect(got.at).toBe(120);
    expect(got.error).toBeInstanceOf(LockContendedError);
  });

  it('does not wait past its deadline for a subscription that never answers', async () => {
    sub.subscribe = () => new Promise(() => undefined);
    const got = track(locks.acquire('a', { waitMs: 300, watchdog: false }));
    await jest.advanceTimersByTimeAsync(300);
    expect(got.at).toBe(300);
    expect(got.error).toBeInstanceOf(LockContendedError);
  });

  it('has a waiting writer keep readers out for three re-checks at most, renewed on every try; a reader leaves no such mark', async () => {
    const ac = new AbortController();
    const waiting = [
      locks.acquire('w', { mode: 'write', waitMs: 60_000, signal: ac.signal, watchdog: false }),
      locks.acquire('r', { mode: 'read', waitMs: 60_000, signal: ac.signal, watchdog: false }),
    ].map((p) => p.catch((e: unknown) => e));
    await jest.advanceTimersByTimeAsync(WAKE_CHECK_MS);
    const writer = tries.filter((t) => t.mode === 'write');
    expect(writer.map((t) => [t.at, t.intentMs, t.waits])).toEqual([
      [0, 3 * WAKE_CHECK_MS, true],
      [0, 3 * WAKE_CHECK_MS, true],
      [WAKE_CHECK_MS, 3 * WAKE_CHECK_MS, true],
    ]);
    expect(tries.filter((t) => t.mode === 'read').map((t) => t.intentMs)).toEqual([0, 0, 0]);
    ac.abort();
    expect(await Promise.all(waiting)).toEqual([expect.any(LockContendedError), expect.any(LockContendedError)]);
  });
});
