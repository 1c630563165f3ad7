import { AsyncLocalStorage } from 'node:async_hooks';
import { randomUUID } from 'node:crypto';
import { Injectable, Logger, OnApplicationShutdown } from '@nestjs/common';
import { AppConfig } from '../config/app-config';
import { ApiError } from '../http/api-error';
import { KeyBuilder } from '../redis/key-builder';
import { isRedisUnavailable } from '../redis/redis-unavailable.error';
import { RedisService } from '../redis/redis.service';
import { ScriptCode, ScriptError } from '../scripts/script-errors';
import { ScriptRegistry } from '../scripts/script-registry.service';
import { LockContendedError, LockLostError, LockUnavailableError } from './lock.errors';
import { LockMetrics } from './lock.metrics';
import type { AcquireOptions, LockHandle, LockMode, LockPolicy, LockState } from './lock.types';
import { LeaseRenewer, type Renewable } from './lease-renewer';
import { LockWaiters } from './lock-waiters';
import { type LockKeys, lockKeys } from './lock-keys';

export const LOCK_NAME_RE = /^[A-Za-z0-9_.:-]{1,128}$/;
export const MAX_LEASE_MS = 10 * 60_000;
export const MAX_WAIT_MS = 5 * 60_000;
/** The fencing counter outlives its lock by this long; after that, tokens still never go below the Redis clock in µs. */
const FENCE_KEEP_MS = 60 * 60_000;
/** Used when a business has no policy of its own (LOCK_POLICIES can override it as `default`). */
export const DEFAULT_POLICY: LockPolicy = { leaseMs: 30_000, waitMs: 0 };
/** Built-in per-business settings; LOCK_POLICIES overrides them. */
export const BUILT_IN_POLICIES: ReadonlyMap<string, LockPolicy> = new Map([
  ['order', { leaseMs: 10_000, waitMs: 0 }],
  ['payment-plan', { leaseMs: 30_000, waitMs: 0 }],
]);

/** A lock held by a withLock in the current call chain; `active` turns false at its release. */
interface ChainHold {
  owner: string;
  active: boolean;
}

/** Held: [1, fencing token (decimal string: past 2^31, exact), lease end, hold count]; contended: [0, ms until it may be free]. */
type AcquireReply = [1, string, number, number] | [0, number];

/**
 * Reentrant, fenced, renewable Redis locks (exclusive and read/write), for
 * every module and, through LocksController, for other internal services.
 * See README "Locks" for the data model and the guarantees.
 *
 * - A lock is one hash: per owner a hold count, a lease end and a fencing
 *   token. Only the owner releases; at count 0 it is deleted and a release
 *   message goes out. All times come from the Redis clock.
 * - Waiters sleep on that message (LockWaiters: one subscription per lock per
 *   process) and re-check at least every `wakeCheckMs` and when the holder's
 *   lease ends, so a lost message costs at most that long. Every wait,
 *   subscribing included, ends by its deadline.
 * - A watchdog renews the lease every third of it while the hold lives; if the
 *   lease is lost anyway, the hold's `signal` aborts (never a rejection).
 * - Reentrancy follows the async call chain: `withLock` records the owner in
 *   AsyncLocalStorage, and a nested acquire of the same lock reuses it.
 * - Redis unreachable: fails closed with LockUnavailableError (503).
 */
@Injectable()
export class LockService implements OnApplicationShutdown {
  private readonly logger = new Logger(LockService.name);
  /** The locks the current async call chain holds (withLock), by name. */
  private readonly chain = new AsyncLocalStorage<ReadonlyMap<string, ChainHold>>();
  private readonly waiters: LockWaiters;
  private readonly holds = new Set<Hold>();
  /** @internal the watchdogs of every hold, on one timer per renewal interval */
  readonly renewer = new LeaseRenewer();
  /** Identifies this process in owner tokens (for operators reading GET /locks/{name}). */
  private readonly instance = randomUUID().slice(0, 8);

  constructor(
    private readonly scripts: ScriptRegistry,
    private readonly keys: KeyBuilder,
    private readonly config: AppConfig,
    private readonly metrics: LockMetrics,
    redis: RedisService,
  ) {
    this.waiters = new LockWaiters(() => redis.subscriber());
  }

  /** Lease and wait of a business: LOCK_POLICIES, else the built-in ones, else `default`. */
  policy(business = 'default'): LockPolicy {
    const own = this.config.locks.policies;
    return own.get(business) ?? BUILT_IN_POLICIES.get(business) ?? own.get('default') ?? DEFAULT_POLICY;
  }

  /** A fresh owner token for one logical operation. */
  newOwner(): string {
    return `${this.instance}:${randomUUID()}`;
  }

  /**
   * Takes a hold, waiting up to `waitMs` for a contended lock. Throws
   * LockContendedError when the wait runs out, LockUnavailableError when Redis
   * cannot answer (fail closed), and a 409 for a reader asking to become writer.
   */
  async acquire(name: string, options: AcquireOptions = {}): Promise<LockHandle> {
    const keys = this.keysOf(name);
    const policy = this.policy(options.policy);
    const leaseMs = bounded('leaseMs', options.leaseMs ?? policy.leaseMs, 1, MAX_LEASE_MS);
    const waitMs = bounded('waitMs', options.waitMs ?? policy.waitMs, 0, MAX_WAIT_MS);
    const mode: LockMode = options.mode ?? 'write';
    const inChain = this.chain.getStore()?.get(name);
    const owner = options.owner ?? (inChain?.active ? inChain.owner : this.newOwner());
    const labels = this.metrics.forAcquire(options.policy ?? 'default', mode);
    const started = performance.now();
    const deadline = started + waitMs;
    let joined = false;
    try {
      for (;;) {
        const since = this.waiters.seen(keys.channel);
        const left = deadline - performance.now();
        // A waiting writer keeps new readers out; it renews that mark on every try (at least every
        // wakeCheckMs), so a writer that gives up stops blocking readers soon after.
        const intentMs = mode === 'write' ? Math.ceil(Math.min(left, 3 * this.config.locks.wakeCheckMs)) : 0;
        const sentAt = performance.now();
        // Others in this process wait for this lock and sleep until a release message wakes one of
        // them: if this caller gets it, the lock keeps the waiter mark so that its release publishes.
        const othersWait = this.waiters.waiting(keys.channel) > (joined ? 1 : 0);
        const reply = await this.tryAcquire(name, keys, owner, mode, leaseMs, intentMs, left > 0, othersWait);
        if (reply[0] === 1) {
          labels.acquired.inc();
          labels.wait.observe((performance.now() - started) / 1000);
          return this.hold(name, keys, owner, mode, leaseMs, reply, sentAt, options.watchdog ?? true);
        }
        const remaining = deadline - performance.now();
        if (remaining <= 0 || options.signal?.aborted) {
          labels.contended.inc();
          throw new LockContendedError(name, reply[1]);
        }
        if (!joined) {
          // Subscribe, then try again at once: a release between the first try and the
          // subscription would otherwise only be noticed by the periodic re-check.
          joined = true;
          await this.waitFor(this.waiters.join(keys.channel), remaining);
          continue;
        }
        const jitter = 0.8 + Math.random() * 0.4;
        const nap = Math.min(remaining, reply[1] + 1, this.config.locks.wakeCheckMs * jitter);
        await this.waiters.sleep(keys.channel, nap, since, mode === 'write', options.signal);
      }
    } catch (err) {
      if (err instanceof LockUnavailableError) labels.unavailable.inc();
      throw err;
    } finally {
      if (joined) this.waiters.leave(keys.channel);
    }
  }

  /**
   * Runs `fn` under the lock and always releases it. Inside `fn` (and
   * everything it awaits), acquiring the same lock again is reentrant: it
   * reuses this owner and counts one more hold. AsyncLocalStorage cannot tell
   * an awaited call from work `fn` merely starts (a timer, a promise left
   * running): such work shares the hold while `fn` runs, so start it with
   * `detached()` when it is a separate operation. Once the hold is released,
   * nothing started inside it can re-enter with its owner.
   */
  async withLock<T>(name: string, options: AcquireOptions, fn: (lock: LockHandle) => Promise<T>): Promise<T> {
    const lock = await this.acquire(name, options);
    const mine: ChainHold = { owner: lock.owner, active: true };
    const held = new Map(this.chain.getStore() ?? []);
    held.set(name, mine);
    try {
      return await this.chain.run(held, () => fn(lock));
    } finally {
      mine.active = false;
      await lock.release();
    }
  }

  /** Runs `fn` outside every lock the current call chain holds: what it acquires, it acquires as a new owner. */
  detached<T>(fn: () => T): T {
    return this.chain.exit(fn);
  }

  /** Extends an owner's lease (for HTTP callers; in-process holds have the watchdog). */
  async renew(name: string, owner: string, leaseMs: number): Promise<{ expiresAt: number }> {
    const keys = this.keysOf(name);
    const expiresAt = await this.run<number>(name, 'locks/renew', [keys.hash], [owner, bounded('leaseMs', leaseMs, 1, MAX_LEASE_MS)], owner);
    return { expiresAt };
  }

  /** Gives back one hold of `owner`; LockLostError when it holds none. */
  async release(name: string, owner: string): Promise<{ holdCount: number }> {
    return this.releaseWith(name, this.keysOf(name), owner);
  }

  private releaseWith(name: string, keys: LockKeys, owner: string): Promise<{ holdCount: number }> {
    return this.run<number>(name, 'locks/release', [keys.hash], [owner, keys.channel], owner).then((holdCount) => {
      if (holdCount === 0) this.metrics.released.inc();
      return { holdCount };
    });
  }

  /** The lock as it is now, or null when nobody holds it. */
  async inspect(name: string): Promise<LockState | null> {
    const keys = this.keysOf(name);
    const r = await this.run<Array<string | number | null>>(name, 'locks/inspect', [keys.hash, keys.fence], []);
    if (!r[0]) return null;
    const holders: LockState['holders'] = [];
    for (let i = 3; i + 2 < r.length; i += 3) holders.push({ owner: String(r[i]), count: Number(r[i + 1]), expiresAt: Number(r[i + 2]) });
    return { name, mode: r[0] === 'r' ? 'read' : 'write', holders, ttlMs: Number(r[1]), fencingToken: Number(r[2]) };
  }

  /** Holds with a watchdog still alive in this process (the watchdogs stop at shutdown; the leases then run out on their own). */
  get liveHolds(): number {
    return this.holds.size;
  }

  onApplicationShutdown(): void {
    for (const h of this.holds) h.stopWatchdog();
    this.renewer.clear();
  }

  private keysOf(name: string): LockKeys {
    if (typeof name !== 'string' || !LOCK_NAME_RE.test(name)) throw new ApiError(400, 'VALIDATION_FAILED', 'lock name must be 1-128 characters of A-Z a-z 0-9 _ . : -');
    // The name is a valid tag id (LOCK_NAME_RE is narrower than the key builder's rule).
    return lockKeys(this.keys, name);
  }

  /**
   * `waits`: the caller waits if the lock is taken, so the lock is marked for its release to be published.
   * `othersWait`: other callers in this process wait for it, so the mark stays even if this one gets it.
   */
  private tryAcquire(name: string, keys: LockKeys, owner: string, mode: LockMode, leaseMs: number, intentMs: number, waits: boolean, othersWait: boolean): Promise<AcquireReply> {
    const args = [owner, mode === 'write' ? 'w' : 'r', leaseMs, Math.max(0, intentMs), FENCE_KEEP_MS, waits ? '1' : '0', othersWait ? '1' : '0'];
    return this.run<AcquireReply>(name, 'locks/acquire', [keys.hash, keys.fence], args, owner);
  }

  /** Runs a lock script; maps Redis outages to LockUnavailableError and result codes to lock errors. */
  private run<T>(name: string, script: string, keys: string[], args: Array<string | number>, owner?: string): Promise<T> {
    // Chained, not awaited (each async layer is a promise more on every acquire and release).
    return this.scripts.run<T>(script, keys, args).catch((err: unknown) => {
      if (isRedisUnavailable(err)) throw new LockUnavailableError(name, err);
      if (err instanceof ScriptError && err.code === ScriptCode.NOT_FOUND) throw new LockLostError(name, owner ?? '');
      if (err instanceof ScriptError && err.code === ScriptCode.CONFLICT) {
        throw new ApiError(409, 'LOCK_UPGRADE_REFUSED', `Lock ${name}: a reader cannot become the writer while it holds a read lock (release it first)`);
      }
      throw err;
    });
  }

  /** Resolves when `p` does or `ms` have passed (a subscription that hangs must not hold a waiter past its deadline). */
  private async waitFor(p: Promise<unknown>, ms: number): Promise<void> {
    let timer: NodeJS.Timeout | undefined;
    await Promise.race([p, new Promise<void>((r) => (timer = setTimeout(r, Math.max(0, ms))))]);
    clearTimeout(timer);
  }

  private hold(name: string, keys: LockKeys, owner: string, mode: LockMode, leaseMs: number, reply: [1, string, number, number], sentAt: number, watchdog: boolean): LockHandle {
    const h = new Hold(this, name, keys, owner, mode, Number(reply[1]), reply[2], reply[3], leaseMs, sentAt + leaseMs, (hold) => this.holds.delete(hold));
    // Only holds with a watchdog need stopping at shutdown; the others (HTTP) may be released by name and owner alone.
    if (watchdog) {
      this.holds.add(h);
      h.startWatchdog();
    }
    return h;
  }

  /** @internal used by Hold */
  async renewHold(h: Hold): Promise<number> {
    return (await this.renew(h.name, h.owner, h.leaseMs)).expiresAt;
  }

  /** @internal used by Hold */
  releaseHold(h: Hold, keys: LockKeys): Promise<void> {
    return this.releaseWith(h.name, keys, h.owner).then(
      () => undefined,
      (err: unknown) => {
        if (!(err instanceof LockLostError)) throw err;
        // Already gone (the lease ran out): the hold's signal has said so, or says so now.
        this.metrics.lost.inc({ when: 'release' });
        this.logger.warn({ lock: h.name }, 'released a lock whose lease had already ended');
      },
    );
  }

  /** @internal used by Hold */
  noteLost(h: Hold, reason: string): void {
    this.metrics.lost.inc({ when: 'held' });
    this.logger.warn({ lock: h.name, reason }, 'lock lost while held');
  }
}

/** One hold: its watchdog, its lost-signal and its release. */
class Hold implements LockHandle, Renewable {
  /** Made on first use of `signal` (most holds never look at it). */
  private aborter?: AbortController;
  private lostWith?: LockLostError;
  /** A retry of a renewal Redis did not answer (the regular renewals come from the service's LeaseRenewer). */
  private retryTimer?: NodeJS.Timeout;
  /** Set by stopWatchdog (release, loss, shutdown): a renewal still on its way must not start another. */
  private stopped = false;
  private renewing?: Promise<void>;
  private released?: Promise<void>;

  constructor(
    private readonly service: LockService,
    readonly name: string,
    private readonly keys: LockKeys,
    readonly owner: string,
    readonly mode: LockMode,
    readonly fencingToken: number,
    public expiresAt: number,
    readonly holdCount: number,
    readonly leaseMs: number,
    /** When the lease surely ends, on this process's monotonic clock: the request's send time plus the lease. */
    private localDeadline: number,
    private readonly onEnd: (h: Hold) => void,
  ) {}

  get signal(): AbortSignal {
    if (!this.aborter) {
      this.aborter = new AbortController();
      if (this.lostWith) this.aborter.abort(this.lostWith);
    }
    return this.aborter.signal;
  }

  get renewEveryMs(): number {
    return this.leaseMs / 3;
  }

  startWatchdog(): void {
    this.service.renewer.add(this);
  }

  stopWatchdog(): void {
    this.stopped = true;
    this.service.renewer.delete(this);
    if (this.retryTimer) clearTimeout(this.retryTimer);
    this.retryTimer = undefined;
  }

  renewNow(): void {
    this.renewing = this.renewOnce();
  }

  release(): Promise<void> {
    if (!this.released) {
      // The watchdog stops first, and a renewal already on its way finishes
      // before the release: no renewal can land after it. (Chained, not an async
      // function: this runs on every release.)
      const giveBack = (): Promise<void> => (this.lostWith ? Promise.resolve() : this.service.releaseHold(this, this.keys));
      let p: Promise<void>;
      try {
        this.stopWatchdog();
        p = this.renewing ? this.renewing.then(giveBack) : giveBack();
      } catch (err) {
        p = Promise.reject(err as Error);
      }
      this.released = p.finally(() => this.onEnd(this));
    }
    return this.released;
  }

  private async renewOnce(): Promise<void> {
    const sentAt = performance.now();
    try {
      this.expiresAt = await this.service.renewHold(this);
      this.localDeadline = Math.max(this.localDeadline, sentAt + this.leaseMs);
      if (!this.stopped) this.service.renewer.add(this);
    } catch (err) {
      if (this.stopped) return;
      if (err instanceof LockLostError) return this.lose('the lease ended before it was renewed');
      // Redis did not answer: keep trying while the lease may still be ours, then give up.
      const left = this.localDeadline - performance.now();
      if (left <= 0) return this.lose('Redis could not renew the lease before it ended');
      this.retryTimer = setTimeout(() => this.renewNow(), Math.min(left, Math.max(50, this.leaseMs / 10)));
      this.retryTimer.unref();
    }
  }

  private lose(reason: string): void {
    this.stopWatchdog();
    this.service.noteLost(this, reason);
    this.lostWith = new LockLostError(this.name, this.owner);
    this.aborter?.abort(this.lostWith);
    this.onEnd(this);
  }
}

/** An in-process caller's option, checked like a request field (a bad value is a programming error, still a 400). */
function bounded(field: string, value: number, min: number, max: number): number {
  if (!Number.isInteger(value) || value < min || value > max) throw new ApiError(400, 'VALIDATION_FAILED', `${field} must be an integer from ${min} to ${max}`);
  return value;
}
