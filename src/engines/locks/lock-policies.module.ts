import { DynamicModule, Module } from '@nestjs/common';
import { LockPolicies, type LockPolicyDeclarations } from './lock-policies';

/** One module's declaration, as a value (so that Nest tells two modules' declarations apart). */
interface Declaration {
  module: string;
  policies: LockPolicyDeclarations;
}

const DECLARATION = Symbol('LOCK_POLICY_DECLARATION');
const REGISTRATION = Symbol('LOCK_POLICY_REGISTRATION');

/**
 * One module's lock policies, registered with the engine's `LockPolicies` when
 * the application is built (a conflict stops the boot). Imported through
 * `LocksModule.forFeature`; a module of its own so that the import does not
 * bring the engine's controller and services a second time.
 */
@Module({})
export class LockPoliciesModule {
  static forFeature(module: string, policies: LockPolicyDeclarations): DynamicModule {
    const declaration: Declaration = { module, policies };
    return {
      module: LockPoliciesModule,
      providers: [
        { provide: DECLARATION, useValue: declaration },
        {
          provide: REGISTRATION,
          useFactory: (registry: LockPolicies, d: Declaration) => registry.register(d.module, d.policies),
          inject: [LockPolicies, DECLARATION],
        },
      ],
    };
  }
}
