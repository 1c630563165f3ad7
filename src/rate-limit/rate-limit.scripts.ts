import { Injectable } from '@nestjs/common';
import type { Caller } from '../http/caller';
import { KeyBuilder } from '../redis/key-builder';
import { ScriptRegistry } from '../scripts/script-registry.service';
import { rateLimitKey } from './rate-limit-keys';

export interface RateLimitLease {
  /** Requests granted (0 when the caller is over the limit). */
  granted: number;
  /** Requests left in the window after this grant, across all instances. */
  remaining: number;
  /** Milliseconds until the window ends. */
  resetMs: number;
}

/** Typed wrapper of `lua/core/rate-limit-1.lua`. */
@Injectable()
export class RateLimitScripts {
  constructor(
    private readonly scripts: ScriptRegistry,
    private readonly keys: KeyBuilder,
  ) {}

  /** The Redis key of `caller`'s window. */
  keyOf(caller: Caller): string {
    return rateLimitKey(this.keys, caller);
  }

  /** Leases up to `want` requests of the window at `key` (from keyOf), of `limit` per `windowMs`. */
  async lease(key: string, limit: number, windowMs: number, want: number): Promise<RateLimitLease> {
    const [granted, remaining, resetMs] = await this.scripts.run<[number, number, number]>('core/rate-limit', [key], [limit, windowMs, want]);
    return { granted, remaining, resetMs };
  }
}
