import { Injectable } from '@nestjs/common';
import { KeyBuilder } from '../redis/key-builder';
import { ScriptRegistry } from '../scripts/script-registry.service';

export interface RateLimitVerdict {
  allowed: boolean;
  remaining: number;
  resetMs: number;
}

/** Typed wrapper of `lua/core/rate-limit-1.lua`. */
@Injectable()
export class RateLimitScripts {
  constructor(
    private readonly scripts: ScriptRegistry,
    private readonly keys: KeyBuilder,
  ) {}

  /** Counts one request of `subject` against `limit` per `windowMs`. */
  async hit(subject: string, limit: number, windowMs: number): Promise<RateLimitVerdict> {
    const key = this.keys.tagged('rate', subject).key('window');
    const [allowed, remaining, resetMs] = await this.scripts.run<[number, number, number]>('core/rate-limit', [key], [limit, windowMs]);
    return { allowed: allowed === 1, remaining, resetMs };
  }
}
