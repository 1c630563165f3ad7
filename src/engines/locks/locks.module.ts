import { DynamicModule, Global, Module } from '@nestjs/common';
import { LockMetrics } from './lock.metrics';
import { LockPolicies, type LockPolicyDeclarations } from './lock-policies';
import { LockPoliciesModule } from './lock-policies.module';
import { LockService } from './lock.service';
import { LockStore } from './lock.store';
import { locksConfig } from './locks.config';
import { LocksController } from './locks.controller';

/** The shared lock engine. Global: feature modules inject LockService. */
@Global()
@Module({
  controllers: [LocksController],
  providers: [locksConfig.provider, LockService, LockStore, LockPolicies, LockMetrics],
  exports: [LockService, LockPolicies],
})
export class LocksModule {
  /**
   * Declares the lock policies of the importing module's businesses, e.g.
   * `imports: [LocksModule.forFeature('orders', { order: { leaseMs: 10_000, waitMs: 0 } })]`.
   * LOCK_POLICIES still overrides any of them by name. The same business declared
   * by two modules with different values stops the boot.
   */
  static forFeature(module: string, policies: LockPolicyDeclarations): DynamicModule {
    return LockPoliciesModule.forFeature(module, policies);
  }
}
