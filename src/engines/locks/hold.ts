import type { LeaseRenewer, Renewable } from './lease-renewer';
import { LockLostError } from './lock.errors';
import type { Clock, Timer } from '../workers/clock';
import type { LockKeys } from './lock.keys';
import type { LockHandle, LockMode } from './lock.types';

/** What a hold needs from the engine that issued it. */
export interface HoldHost {
  /** The watchdogs of every hold, on one timer per renewal interval. */
  readonly renewer: LeaseRenewer;
  readonly clock: Clock;
  /** Extends the hold's lease by its leaseMs; resolves to the new lease end. Rejects with LockLostError when it is gone. */
  renewHold(h: Hold): Promise<number>;
  /** Gives the hold back (a hold already gone is not an error). */
  releaseHold(h: Hold): Promise<void>;
  /** The lease ended while the hold lived. */
  noteLost(h: Hold, reason: string): void;
  /** The hold has ended (released or lost): the engine forgets it. */
  holdEnded(h: Hold): void;
}

/** Everything a hold starts with. */
export interface HoldOptions {
  host: HoldHost;
  name: string;
  /** The lock's keys, for the host's release. */
  keys: LockKeys;
  owner: string;
  mode: LockMode;
  fencingToken: number;
  /** The lease's end on the Redis clock (epoch ms). */
  expiresAt: number;
  holdCount: number;
  leaseMs: number;
  /** When the lease surely ends, on the host clock: the acquire's send time plus the lease. */
  localDeadline: number;
}

/** One hold: its watchdog, its lost-signal and its release. */
export class Hold implements LockHandle, Renewable {
  readonly name: string;
  /** @internal the lock's keys (the host releases with them) */
  readonly keys: LockKeys;
  readonly owner: string;
  readonly mode: LockMode;
  readonly fencingToken: number;
  expiresAt: number;
  readonly holdCount: number;
  readonly leaseMs: number;
  private readonly host: HoldHost;
  /** When the lease surely ends, on the host clock: the latest send time of an acquire or renewal plus the lease. */
  private localDeadline: number;
  /** Made on first use of `signal` (most holds never look at it). */
  private aborter?: AbortController;
  private lostWith?: LockLostError;
  /** A retry of a renewal Redis did not answer (the regular renewals come from the host's LeaseRenewer). */
  private retryTimer?: Timer;
  /** Set by stopWatchdog (release, loss, shutdown): a renewal still on its way must not start another. */
  private stopped = false;
  private renewing?: Promise<void>;
  private released?: Promise<void>;

  constructor(o: HoldOptions) {
    this.host = o.host;
    this.name = o.name;
    this.keys = o.keys;
    this.owner = o.owner;
    this.mode = o.mode;
    this.fencingToken = o.fencingToken;
    this.expiresAt = o.expiresAt;
    this.holdCount = o.holdCount;
    this.leaseMs = o.leaseMs;
    this.localDeadline = o.localDeadline;
  }

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
    this.host.renewer.add(this);
  }

  stopWatchdog(): void {
    this.stopped = true;
    this.host.renewer.delete(this);
    this.host.clock.clearTimeout(this.retryTimer);
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
      const giveBack = (): Promise<void> => (this.lostWith ? Promise.resolve() : this.host.releaseHold(this));
      let p: Promise<void>;
      try {
        this.stopWatchdog();
        p = this.renewing ? this.renewing.then(giveBack) : giveBack();
      } catch (err) {
        p = Promise.reject(err as Error);
      }
      this.released = p.finally(() => this.host.holdEnded(this));
    }
    return this.released;
  }

  private async renewOnce(): Promise<void> {
    const clock = this.host.clock;
    const sentAt = clock.now();
    try {
      this.expiresAt = await this.host.renewHold(this);
      this.localDeadline = Math.max(this.localDeadline, sentAt + this.leaseMs);
      if (!this.stopped) this.host.renewer.add(this);
    } catch (err) {
      if (this.stopped) return;
      if (err instanceof LockLostError) return this.lose('the lease ended before it was renewed');
      // Redis did not answer: keep trying while the lease may still be ours, then give up.
      const left = this.localDeadline - clock.now();
      if (left <= 0) return this.lose('Redis could not renew the lease before it ended');
      this.retryTimer = clock.setTimeout(() => this.renewNow(), Math.min(left, Math.max(50, this.leaseMs / 10)));
    }
  }

  private lose(reason: string): void {
    this.stopWatchdog();
    this.host.noteLost(this, reason);
    this.lostWith = new LockLostError(this.name, this.owner);
    this.aborter?.abort(this.lostWith);
    this.host.holdEnded(this);
  }
}
