import { Injectable } from '@nestjs/common';
import { KeyBuilder } from '../redis/key-builder';
import { ScriptRegistry } from '../scripts/script-registry.service';

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

  /** Leases up to `want` requests of `subject`'s window of `limit` per `windowMs`. */
  async lease(subject: string, limit: number, windowMs: number, want: number): Promise<RateLimitLease> {
    const key = this.keys.tagged('rate', subject).key('window');
    const [granted, remaining, resetMs] = await this.scripts.run<[number, number, number]>('core/rate-limit', [key], [limit, windowMs, want]);
    return { granted, remaining, resetMs };
  }
}
