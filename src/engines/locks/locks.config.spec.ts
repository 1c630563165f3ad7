import { expectConfigError } from '../../../test/support/config-errors';
import { loadConfig } from '../../platform/config/load-config';
import { LocksConfig, locksConfig } from './locks.config';

describe('locks config slice', () => {
  it('defaults to no policy overrides and a 250 ms wake check', () => {
    expect(locksConfig.load({})).toEqual({ policies: new Map(), wakeCheckMs: 250 });
  });

  it('reads LOCK_POLICIES and LOCK_WAKE_CHECK_MS', () => {
    const cfg = locksConfig.load({ LOCK_POLICIES: 'order:5000:0,default:7000:100', LOCK_WAKE_CHECK_MS: '40' });
    expect(cfg).toEqual({
      policies: new Map([
        ['order', { leaseMs: 5000, waitMs: 0 }],
        ['default', { leaseMs: 7000, waitMs: 100 }],
      ]),
      wakeCheckMs: 40,
    });
  });

  it.each([
    ['LOCK_POLICIES', 'Order:5000:0'],
    ['LOCK_POLICIES', 'order:5000'],
    ['LOCK_WAKE_CHECK_MS', '9'],
  ])('rejects %s=%p', (variable, value) => {
    expectConfigError(() => locksConfig.load({ [variable]: value }), variable);
  });

  it('stops loadConfig (the boot) on a bad lock setting, naming it', () => {
    expectConfigError(() => loadConfig({ LOCK_WAKE_CHECK_MS: '0' }), 'LOCK_WAKE_CHECK_MS');
  });

  it('is built by loadConfig and provided to the engine as LocksConfig', () => {
    const config = loadConfig({ LOCK_WAKE_CHECK_MS: '30' });
    expect(config.slices.has('locks')).toBe(true);
    expect(locksConfig.token).toBe(LocksConfig);
    expect(locksConfig.provider.useFactory(config)).toBe(locksConfig.of(config));
    expect(locksConfig.of(config).wakeCheckMs).toBe(30);
  });
});
