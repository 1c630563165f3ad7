import { Injectable } from '@nestjs/common';
import { KeyBuilder } from '../redis/key-builder';
import { ScriptRegistry } from '../scripts/script-registry.service';

/** Typed wrapper of `lua/diagnostics/touch-1.lua`. */
@Injectable()
export class DiagnosticsService {
  constructor(
    private readonly scripts: ScriptRegistry,
    private readonly keys: KeyBuilder,
  ) {}

  async touch(accountId: string, label: string, ttlMs: number): Promise<{ count: number; serverTimeMs: number }> {
    const key = this.keys.tagged('diagnostics', accountId).key(`visits:${label}`);
    const [count, serverTimeMs] = await this.scripts.run<[number, number]>('diagnostics/touch', [key], [ttlMs]);
    return { count, serverTimeMs };
  }
}
