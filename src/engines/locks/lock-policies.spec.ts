import { Global, Module } from '@nestjs/common';
import { Test } from '@nestjs/testing';
import { DEFAULT_POLICY, LockPolicies } from './lock-policies';
import { LockPoliciesModule } from './lock-policies.module';
import { LocksConfig } from './locks.config';

const configWith = (env: Array<[string, { leaseMs: number; waitMs: number }]>): LocksConfig => ({ policies: new Map(env), wakeCheckMs: 250 });

describe(LockPolicies.name, () => {
  it('gives a declared business its policy, and any other the default', () => {
    const p = new LockPolicies(configWith([]));
    p.register('orders', { order: { leaseMs: 10_000, waitMs: 0 } });
    expect(p.get('order')).toEqual({ leaseMs: 10_000, waitMs: 0 });
    expect(p.get('anything-else')).toEqual(DEFAULT_POLICY);
    expect(p.get()).toEqual(DEFAULT_POLICY);
  });

  it('lets LOCK_POLICIES override a declared business and the default by name', () => {
    const p = new LockPolicies(
      configWith([
        ['order', { leaseMs: 2_000, waitMs: 500 }],
        ['default', { leaseMs: 7_000, waitMs: 100 }],
      ]),
    );
    p.register('orders', { order: { leaseMs: 10_000, waitMs: 0 }, 'payment-plan': { leaseMs: 30_000, waitMs: 0 } });
    expect(p.get('order')).toEqual({ leaseMs: 2_000, waitMs: 500 });
    expect(p.get('payment-plan')).toEqual({ leaseMs: 30_000, waitMs: 0 });
    expect(p.get('anything-else')).toEqual({ leaseMs: 7_000, waitMs: 100 });
  });

  it('accepts the same declaration twice, and refuses a business declared again with other values', () => {
    const p = new LockPolicies(configWith([]));
    p.register('orders', { order: { leaseMs: 10_000, waitMs: 0 } });
    p.register('orders-again', { order: { leaseMs: 10_000, waitMs: 0 } });
    expect(() => p.register('billing', { order: { leaseMs: 5_000, waitMs: 0 } })).toThrow(/"order" is declared twice with different values: orders .* billing/);
    expect(p.get('order')).toEqual({ leaseMs: 10_000, waitMs: 0 });
  });

  it('refuses a policy whose lease or wait is not a usable integer', () => {
    const p = new LockPolicies(configWith([]));
    expect(() => p.register('m', { x: { leaseMs: 0, waitMs: 0 } })).toThrow(/"x" of m/);
    expect(() => p.register('m', { x: { leaseMs: 1_000, waitMs: -1 } })).toThrow(/"x" of m/);
    expect(() => p.register('m', { x: { leaseMs: 1.5, waitMs: 0 } })).toThrow(/"x" of m/);
  });
});

describe(LockPoliciesModule.name, () => {
  /** LockPolicies as LocksModule provides it: global. */
  function engine(env: Array<[string, { leaseMs: number; waitMs: number }]> = []) {
    @Global()
    @Module({ providers: [LockPolicies, { provide: LocksConfig, useValue: configWith(env) }], exports: [LockPolicies] })
    class Engine {}
    return Engine;
  }

  it("registers each importing module's policies at boot", async () => {
    const app = await Test.createTestingModule({
      imports: [
        engine(),
        LockPoliciesModule.forFeature('orders', { order: { leaseMs: 10_000, waitMs: 0 } }),
        LockPoliciesModule.forFeature('billing', { invoice: { leaseMs: 5_000, waitMs: 1_000 } }),
      ],
    }).compile();
    const p = app.get(LockPolicies);
    expect(p.get('order')).toEqual({ leaseMs: 10_000, waitMs: 0 });
    expect(p.get('invoice')).toEqual({ leaseMs: 5_000, waitMs: 1_000 });
    await app.close();
  });

  it('stops the boot when two modules declare one business with different values', async () => {
    const boot = Test.createTestingModule({
      imports: [
        engine(),
        LockPoliciesModule.forFeature('orders', { order: { leaseMs: 10_000, waitMs: 0 } }),
        LockPoliciesModule.forFeature('billing', { order: { leaseMs: 5_000, waitMs: 0 } }),
      ],
    }).compile();
    await expect(boot).rejects.toThrow(/lock policy "order" is declared twice with different values/);
  });
});
