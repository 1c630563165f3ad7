import { Injectable } from '@nestjs/common';
import { KeyBuilder } from '../redis/key-builder';
import { ScriptRegistry } from '../scripts/script-registry.service';
import { visitsKey } from './diagnostics.keys';

/** Typed wrapper of `lua/platform/diagnostics/touch-1.lua`. */
@Injectable()
export class DiagnosticsService {
  constructor(
    private readonly scripts: ScriptRegistry,
    private readonly keys: KeyBuilder,
  ) {}

  touch(accountId: string, label: string, ttlMs: number): Promise<{ count: number; serverTimeMs: number }> {
    const key = visitsKey(this.keys, accountId, label);
    return this.scripts.run<[number, number]>('diagnostics/touch', [key], [ttlMs]).then(([count, serverTimeMs]) => ({ count, serverTimeMs }));
  }
}
