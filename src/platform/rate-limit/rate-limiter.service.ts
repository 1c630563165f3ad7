import { Injectable } from '@nestjs/common';
import type { Caller } from '../http/caller';
import { AppConfig } from '../config/app-config';
import { type RateLimitLease, RateLimitScripts } from './rate-limit.scripts';

export interface RateLimitVerdict {
  allowed: boolean;
  limit: number;
  /** Requests left in the window (this instance's lease plus what Redis still holds). */
  remaining: number;
  /** Milliseconds until the caller may try again (when not allowed) or the window ends. */
  resetMs: number;
}

interface Lease {
  tokens: number;
  remainingInRedis: number;
  /** Local clock time at which the window (and so the lease) ends. */
  endsAt: number;
  /**
   * A lease request under way; concurrent requests of the caller wait for it, and share its failure:
   * with Redis down or hung, they all get its 503 at once rather than each waiting out a command timeout in turn.
   */
  pending?: Promise<unknown>;
}

/**
 * Per-caller rate limits whose state lives in Redis, spent in leases.
 *
 * Each instance takes `lease` requests at a time from the caller's counter in
 * Redis (one script call) and spends them locally, so most requests cost no
 * round trip. The counter in Redis counts every request granted to any
 * instance: callers never get more than the limit per window, whatever the
 * number of instances. The price is the other way round: requests leased by
 * one instance and not used there in the window are lost, so a caller spread
 * over N instances may be held up to N × (lease − 1) requests below the limit.
 * The lease is a tenth of the limit, at most RATE_LIMIT_MAX_LEASE; limits up
 * to 19 per window (or RATE_LIMIT_MAX_LEASE=1) are exact.
 */
@Injectable()
export class RateLimiter {
  /** By caller kind, then id: no key string is built per request. */
  private readonly leases = new Map<Caller['kind'], Map<string, Lease>>();
  private lastSweep = 0;

  constructor(
    private readonly config: AppConfig,
    private readonly scripts: RateLimitScripts,
  ) {}

  /**
   * Counts one request of `caller` against `limit` per window from this
   * instance's lease, when it has a token left: no Redis, no promise. Undefined
   * when only `take()` can decide.
   */
  takeLocal(caller: Caller, limit: number): RateLimitVerdict | undefined {
    const lease = this.leases.get(caller.kind)?.get(caller.id);
    if (!lease || lease.tokens <= 0) return undefined;
    const now = Date.now();
    return lease.endsAt > now ? spend(lease, limit, now) : undefined;
  }

  /** Counts one request of `caller` against `limit` per window. */
  take(caller: Caller, limit: number): Promise<RateLimitVerdict> {
    const now = Date.now();
    this.sweep(now);
    const ofKind = this.ofKind(caller.kind);
    const lease = ofKind.get(caller.id);
    if (lease !== undefined) return this.takeFrom(ofKind, caller, limit, lease, now);
    // No lease here (a caller's first request, every request of a sale's or a rain's new users): lease, and spend
    // from it as soon as it comes, without the loop's awaits.
    return this.refill(ofKind, caller, limit, undefined).then((fresh) =>
      fresh.tokens > 0 && fresh.endsAt > now ? spend(fresh, limit, now) : this.takeFrom(ofKind, caller, limit, fresh, now),
    );
  }

  private async takeFrom(ofKind: Map<string, Lease>, caller: Caller, limit: number, lease: Lease | undefined, now: number): Promise<RateLimitVerdict> {
    // Each pass spends a token, waits for a lease under way, or leases (which grants at least one or proves the window spent).
    for (let attempt = 0; attempt < 100; attempt++) {
      if (lease && lease.endsAt > now) {
        if (lease.tokens > 0) return spend(lease, limit, now);
        if (lease.pending) {
          await lease.pending;
          lease = ofKind.get(caller.id);
          continue;
        }
        if (lease.remainingInRedis === 0) {
          return { allowed: false, limit, remaining: 0, resetMs: lease.endsAt - now };
        }
      }
      lease = await this.refill(ofKind, caller, limit, lease);
    }
    // Lost a hundred races for tokens to concurrent requests of the same caller: treat as over the limit for now.
    return { allowed: false, limit, remaining: 0, resetMs: Math.max(1, (lease?.endsAt ?? now + 1000) - now) };
  }

  /** Leases more of the caller's window; the lease is `pending` (its concurrent requests wait for it) until Redis answers. */
  private refill(ofKind: Map<string, Lease>, caller: Caller, limit: number, previous: Lease | undefined): Promise<Lease> {
    const rl = this.config.rateLimit;
    const want = Math.max(1, Math.min(rl.maxLease, Math.floor(limit / 10)));
    const open = previous !== undefined && previous.endsAt > Date.now();
    const lease: Lease = open ? previous : { tokens: 0, remainingInRedis: limit, endsAt: Date.now() + rl.windowMs };
    let leased: Promise<RateLimitLease>;
    try {
      leased = this.scripts.lease(this.scripts.keyOf(caller), limit, rl.windowMs, want, !open);
    } catch (err) {
      leased = Promise.reject(err as Error);
    }
    const settled = leased.then(
      (r) => {
        lease.tokens += r.granted;
        lease.remainingInRedis = r.remaining;
        lease.endsAt = Date.now() + r.resetMs;
        lease.pending = undefined;
        return lease;
      },
      (err: unknown) => {
        ofKind.delete(caller.id);
        lease.pending = undefined;
        throw err;
      },
    );
    // The waiters get its outcome, a failure included; the caller of refill handles that failure, so it is never an unhandled one.
    lease.pending = settled;
    ofKind.set(caller.id, lease);
    return settled;
  }

  /** Forgets ended windows, at most once a second, so the map stays as small as the set of active callers. */
  private sweep(now: number): void {
    if (now - this.lastSweep < 1000) return;
    this.lastSweep = now;
    for (const ofKind of this.leases.values()) for (const [id, lease] of ofKind) if (lease.endsAt <= now && !lease.pending) ofKind.delete(id);
  }

  private ofKind(kind: Caller['kind']): Map<string, Lease> {
    let ofKind = this.leases.get(kind);
    if (!ofKind) this.leases.set(kind, (ofKind = new Map()));
    return ofKind;
  }
}

/** Spends one token of a lease whose window is still open. */
function spend(lease: Lease, limit: number, now: number): RateLimitVerdict {
  lease.tokens--;
  return { allowed: true, limit, remaining: lease.tokens + lease.remainingInRedis, resetMs: lease.endsAt - now };
}
