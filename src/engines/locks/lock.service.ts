import { AsyncLocalStorage } from 'node:async_hooks';
import { randomUUID } from 'node:crypto';
import { Inject, Injectable, Logger, OnApplicationShutdown, Optional } from '@nestjs/common';
import { InvalidArgumentError } from '../../platform/core/domain.error';
import { RedisService } from '../../platform/redis/redis.service';
import { Hold, type HoldHost } from './hold';
import { LeaseRenewer } from './lease-renewer';
import { CLOCK, type Clock, systemClock } from '../workers/clock';
import { LockContendedError, LockLostError, LockUnavailableError } from './lock.errors';
import { LocksConfig } from './locks.config';
import type { LockKeys } from './lock.keys';
import { LockMetrics } from './lock.metrics';
import { LockPolicies } from './lock-policies';
import { type AcquireResult, LockStore } from './lock.store';
import type { AcquireOptions, LockHandle, LockMode, LockPolicy, LockState } from './lock.types';
import { LockWaiters } from './lock-waiters';

export const LOCK_NAME_RE = /^[A-Za-z0-9_.:-]{1,128}$/;
export const MAX_LEASE_MS = 10 * 60_000;
export const MAX_WAIT_MS = 5 * 60_000;
/** After a try that timed out: the first give-back after this, then at most this far apart. */
const GIVE_BACK_FIRST_DELAY_MS = 250;
const GIVE_BACK_MAX_DELAY_MS = 5_000;
/** Give-backs waiting for Redis at once, at most: in a long outage the leases end on their own. */
const GIVE_BACK_MAX_PENDING = 1_000;

/** A lock held by a withLock in the current call chain; `active` turns false at its release. */
interface ChainHold {
  owner: string;
  active: boolean;
}

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
export class LockService implements OnApplicationShutdown, HoldHost {
  private readonly logger = new Logger(LockService.name);
  /** Give-backs of timed-out tries still waiting for Redis (see giveBackLater). */
  private giveBacks = 0;
  /** The locks the current async call chain holds (withLock), by name. */
  private readonly chain = new AsyncLocalStorage<ReadonlyMap<string, ChainHold>>();
  /** withLock calls under way, in this process (the storage is on only while there is one). */
  private runs = 0;
  private readonly waiters: LockWaiters;
  private readonly holds = new Set<Hold>();
  /** @internal the time source of waits, renewals and deadlines */
  readonly clock: Clock;
  /** @internal the watchdogs of every hold, on one timer per renewal interval */
  readonly renewer: LeaseRenewer;
  /** Identifies this process in owner tokens (for operators reading GET /locks/{name}). */
  private readonly instance = randomUUID().slice(0, 8);

  constructor(
    private readonly store: LockStore,
    private readonly policies: LockPolicies,
    private readonly config: LocksConfig,
    private readonly metrics: LockMetrics,
    redis: RedisService,
    @Optional() @Inject(CLOCK) clock?: Clock,
  ) {
    this.clock = clock ?? systemClock;
    this.renewer = new LeaseRenewer(this.clock);
    this.waiters = new LockWaiters(() => redis.subscriber(), this.clock);
  }

  /** Lease and wait of a business: LOCK_POLICIES, else the one its module declared, else `default`. */
  policy(business = 'default'): LockPolicy {
    return this.policies.get(business);
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
    // A new owner token nobody else knows: this call is its only hold (neither reentrant nor the caller's own token).
    const freshOwner = options.owner === undefined && !inChain?.active;
    const owner = options.owner ?? (inChain?.active ? inChain.owner : this.newOwner());
    const labels = this.metrics.forAcquire(options.policy ?? 'default', mode);
    const clock = this.clock;
    const started = clock.now();
    const deadline = started + waitMs;
    let joined = false;
    try {
      for (;;) {
        const since = this.waiters.seen(keys.channel);
        const left = deadline - clock.now();
        // A waiting writer keeps new readers out; it renews that mark on every try (at least every
        // wakeCheckMs), so a writer that gives up stops blocking readers soon after.
        const intentMs = mode === 'write' ? Math.ceil(Math.min(left, 3 * this.config.wakeCheckMs)) : 0;
        const sentAt = clock.now();
        // Others in this process wait for this lock and sleep until a release message wakes one of
        // them: if this caller gets it, the lock keeps the waiter mark so that its release publishes.
        const othersWait = this.waiters.waiting(keys.channel) > (joined ? 1 : 0);
        const result = await this.store.acquire(name, keys, { owner, mode, leaseMs, intentMs, waits: left > 0, othersWait });
        if (result.held) {
          labels.acquired.inc();
          labels.wait.observe((clock.now() - started) / 1000);
          return this.hold(name, keys, owner, mode, leaseMs, result, sentAt, options.watchdog ?? true);
        }
        const remaining = deadline - clock.now();
        if (remaining <= 0 || options.signal?.aborted) {
          labels.contended.inc();
          throw new LockContendedError(name, result.freeInMs);
        }
        if (!joined) {
          // Subscribe, then try again at once: a release between the first try and the
          // subscription would otherwise only be noticed by the periodic re-check.
          joined = true;
          await this.waitFor(this.waiters.join(keys.channel), remaining);
          continue;
        }
        const jitter = 0.8 + Math.random() * 0.4;
        const nap = Math.min(remaining, result.freeInMs + 1, this.config.wakeCheckMs * jitter);
        await this.waiters.sleep(keys.channel, nap, since, mode === 'write', options.signal);
      }
    } catch (err) {
      if (err instanceof LockUnavailableError) {
        labels.unavailable.inc();
        // A try that timed out may still run once Redis answers again (it was on the wire when Redis stopped):
        // a fresh owner gives back whatever it got then, so that nobody holds the lock for a whole lease.
        if (freshOwner) this.giveBackLater(name, keys, owner, leaseMs);
      }
      throw err;
    } finally {
      if (joined) this.waiters.leave(keys.channel);
    }
  }

  /**
   * Releases `owner`'s hold once Redis answers, trying again (backing off) until the lease would have ended anyway.
   * A release runs after the try it undoes: both go in order on the same connection. "Not held" means the try never
   * took the lock: done.
   */
  private giveBackLater(name: string, keys: LockKeys, owner: string, leaseMs: number): void {
    if (this.giveBacks >= GIVE_BACK_MAX_PENDING) return;
    this.giveBacks++;
    const until = this.clock.now() + leaseMs;
    const attempt = (delayMs: number): void => {
      const timer = setTimeout(() => {
        this.store.release(name, keys, owner).then(
          (holdCount) => {
            this.giveBacks--;
            if (holdCount === 0) this.logger.warn({ lock: name }, 'gave back a lock taken by a try that had timed out');
          },
          (err: unknown) => {
            if (err instanceof LockUnavailableError && this.clock.now() + delayMs < until) attempt(Math.min(2 * delayMs, GIVE_BACK_MAX_DELAY_MS));
            else this.giveBacks--;
          },
        );
      }, delayMs);
      timer.unref();
    };
    attempt(GIVE_BACK_FIRST_DELAY_MS);
  }

  /**
   * Runs `fn` under the lock and always releases it. Inside `fn` (and
   * everything it awaits), acquiring the same lock again is reentrant: it
   * reuses this owner and counts one more hold. AsyncLocalStorage cannot tell
   * an awaited call from work `fn` merely starts (a timer, a promise left
   * running): such work shares the hold while `fn` runs, so start it with
   * `detached()` when it is a separate operation. Once the hold is released,
   * nothing started inside it can re-enter with its owner. The storage is
   * switched off whenever no withLock is under way, so the rest of the
   * process does not pay for it.
   */
  async withLock<T>(name: string, options: AcquireOptions, fn: (lock: LockHandle) => Promise<T>): Promise<T> {
    const lock = await this.acquire(name, options);
    const mine: ChainHold = { owner: lock.owner, active: true };
    const held = new Map(this.chain.getStore() ?? []);
    held.set(name, mine);
    this.runs++;
    try {
      return await this.chain.run(held, () => fn(lock));
    } finally {
      // No withLock under way: switch the storage off (run() switches it on again). While it is on, Node 20 runs a
      // hook on every promise the process makes, ours or not (about 0.1-0.3 µs each, some 10 µs per HTTP request).
      if (--this.runs === 0) this.chain.disable();
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
    const expiresAt = await this.store.renew(name, this.keysOf(name), owner, bounded('leaseMs', leaseMs, 1, MAX_LEASE_MS));
    return { expiresAt };
  }

  /** Gives back one hold of `owner`; LockLostError when it holds none. */
  async release(name: string, owner: string): Promise<{ holdCount: number }> {
    return this.releaseWith(name, this.keysOf(name), owner);
  }

  private releaseWith(name: string, keys: LockKeys, owner: string): Promise<{ holdCount: number }> {
    return this.store.release(name, keys, owner).then((holdCount) => {
      if (holdCount === 0) this.metrics.released.inc();
      return { holdCount };
    });
  }

  /** The lock as it is now, or null when nobody holds it. */
  inspect(name: string): Promise<LockState | null> {
    try {
      return this.store.inspect(name, this.keysOf(name));
    } catch (err) {
      return Promise.reject(err as Error);
    }
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
    if (typeof name !== 'string' || !LOCK_NAME_RE.test(name)) throw new InvalidArgumentError('lock name must be 1-128 characters of A-Z a-z 0-9 _ . : -');
    // The name is a valid tag id (LOCK_NAME_RE is narrower than the key builder's rule).
    return this.store.keys(name);
  }

  /** Resolves when `p` does or `ms` have passed (a subscription that hangs must not hold a waiter past its deadline). */
  private async waitFor(p: Promise<unknown>, ms: number): Promise<void> {
    let timer: ReturnType<Clock['setTimeout']> | undefined;
    await Promise.race([p, new Promise<void>((r) => (timer = this.clock.setTimeout(r, ms)))]);
    this.clock.clearTimeout(timer);
  }

  private hold(
    name: string,
    keys: LockKeys,
    owner: string,
    mode: LockMode,
    leaseMs: number,
    held: AcquireResult & { held: true },
    sentAt: number,
    watchdog: boolean,
  ): LockHandle {
    const h = new Hold({
      host: this,
      name,
      keys,
      owner,
      mode,
      fencingToken: held.fencingToken,
      expiresAt: held.expiresAt,
      holdCount: held.holdCount,
      leaseMs,
      localDeadline: sentAt + leaseMs,
    });
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
  releaseHold(h: Hold): Promise<void> {
    return this.releaseWith(h.name, h.keys, h.owner).then(
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

  /** @internal used by Hold */
  holdEnded(h: Hold): void {
    this.holds.delete(h);
  }
}

/** An in-process caller's option, checked like a request field (a bad value is a programming error, still a 400). */
function bounded(field: string, value: number, min: number, max: number): number {
  if (!Number.isInteger(value) || value < min || value > max) throw new InvalidArgumentError(`${field} must be an integer from ${min} to ${max}`);
  return value;
}
