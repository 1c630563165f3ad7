import { Injectable } from '@nestjs/common';
import type { LockPolicy } from './lock.types';
import { LocksConfig } from './locks.config';

/** Used when a business has no policy of its own (LOCK_POLICIES can override it as `default`). */
export const DEFAULT_POLICY: LockPolicy = { leaseMs: 30_000, waitMs: 0 };

/** Lock policies a module declares, by business name (e.g. `{ order: { leaseMs: 10_000, waitMs: 0 } }`). */
export type LockPolicyDeclarations = Readonly<Record<string, LockPolicy>>;

/**
 * The lease and wait of every business. The engine knows none of its callers:
 * each module declares its own businesses (`LocksModule.forFeature(...)`), and
 * LOCK_POLICIES overrides any of them, or `default`, by name.
 */
@Injectable()
export class LockPolicies {
  private readonly declared = new Map<string, { policy: LockPolicy; by: string }>();

  constructor(private readonly config: LocksConfig) {}

  /**
   * Declares the policies of `module`'s businesses. The same business declared
   * again with the same values is accepted; with other values it throws, which
   * stops the boot (two modules would otherwise share a lock setting by accident).
   */
  register(module: string, policies: LockPolicyDeclarations): void {
    for (const [business, policy] of Object.entries(policies)) {
      assertPolicy(module, business, policy);
      const earlier = this.declared.get(business);
      if (earlier && (earlier.policy.leaseMs !== policy.leaseMs || earlier.policy.waitMs !== policy.waitMs)) {
        throw new Error(
          `lock policy "${business}" is declared twice with different values: ${earlier.by} ${JSON.stringify(earlier.policy)}, ${module} ${JSON.stringify(policy)}`,
        );
      }
      if (!earlier) this.declared.set(business, { policy: { leaseMs: policy.leaseMs, waitMs: policy.waitMs }, by: module });
    }
  }

  /** Lease and wait of a business: LOCK_POLICIES, else the declared one, else `default` (LOCK_POLICIES, else DEFAULT_POLICY). */
  get(business = 'default'): LockPolicy {
    const own = this.config.policies;
    return own.get(business) ?? this.declared.get(business)?.policy ?? own.get('default') ?? DEFAULT_POLICY;
  }
}

function assertPolicy(module: string, business: string, p: LockPolicy): void {
  const ok = (v: unknown, min: number) => Number.isInteger(v) && (v as number) >= min;
  if (!ok(p?.leaseMs, 1) || !ok(p?.waitMs, 0)) {
    throw new Error(`lock policy "${business}" of ${module}: leaseMs must be an integer >= 1 and waitMs an integer >= 0`);
  }
}
