import { Injectable } from '@nestjs/common';
import type { Caller } from '../http/caller';
import { KeyBuilder } from '../redis/key-builder';
import { RedisService } from '../redis/redis.service';
import { ScriptRegistry } from '../scripts/script-registry.service';
import { rateLimitKey } from './rate-limit.keys';

export interface RateLimitLease {
  /** Requests granted (0 when the caller is over the limit). */
  granted: number;
  /** Requests left in the window after this grant, across all instances. */
  remaining: number;
  /** Milliseconds until the window ends. */
  resetMs: number;
}

/**
 * Typed wrapper of `lua/platform/core/rate-limit-1.lua`, with a cheaper first lease: a window that does not exist yet is
 * opened by one `SET … PX … NX` holding the grant (a caller's first request, the usual case in a sale or a rain where
 * every request is a new user), and only a window that exists runs the script.
 */
@Injectable()
export class RateLimitScripts {
  constructor(
    private readonly scripts: ScriptRegistry,
    private readonly keys: KeyBuilder,
    private readonly redis: RedisService,
  ) {}

  /** The Redis key of `caller`'s window. */
  keyOf(caller: Caller): string {
    return rateLimitKey(this.keys, caller);
  }

  /**
   * Leases up to `want` requests of the window at `key` (from keyOf), of `limit` per `windowMs`. `opening`: the caller
   * has no open window this instance knows of, so the window most likely has to be opened: tried with SET NX first
   * (the counter set to the grant, its expiry the window), the script when the window is there after all.
   */
  lease(key: string, limit: number, windowMs: number, want: number, opening = false): Promise<RateLimitLease> {
    const grant = Math.min(want, limit);
    if (!opening || grant < 1) return this.runScript(key, limit, windowMs, want);
    // Chained, not awaited: a caller's first request pays this on its way in.
    return this.redis.client.set(key, grant, 'PX', windowMs, 'NX').then(
      (ok) => (ok === 'OK' ? { granted: grant, remaining: limit - grant, resetMs: windowMs } : this.runScript(key, limit, windowMs, want)),
      (err: unknown) => {
        throw this.redis.failure(err);
      },
    );
  }

  private async runScript(key: string, limit: number, windowMs: number, want: number): Promise<RateLimitLease> {
    const [granted, remaining, resetMs] = await this.scripts.run<[number, number, number]>('core/rate-limit', [key], [limit, windowMs, want]);
    return { granted, remaining, resetMs };
  }
}
