import { expectConfigError } from '../../../test/support/config-errors';
import { loadConfig } from '../../platform/config/load-config';
import { OrdersConfig, ordersConfig } from './orders.config';

describe('orders config slice', () => {
  it('defaults to 90 days, 100,000 events per stream, a 2 s first query and 20 ms channels that succeed', () => {
    expect(ordersConfig.load({})).toEqual({
      retentionMs: 90 * 86_400_000,
      eventsMaxLen: 100_000,
      queryDelayMs: 2000,
      channelLatencyMs: 20,
      channelOutcomes: new Map(),
      balanceChannel: 'wallet',
    });
  });

  it('reads every setting', () => {
    const cfg = ordersConfig.load({
      ORDERS_RETENTION_SECONDS: String(3 * 86_400),
      ORDERS_EVENTS_MAXLEN: '5000',
      ORDERS_QUERY_DELAY_MS: '50',
      CHANNEL_LATENCY_MS: '0',
      CHANNEL_OUTCOMES: 'quickpay.pay=unknown,quickpay.query=failure',
      BALANCE_CHANNEL: 'simulated',
    });
    expect(cfg).toEqual({
      retentionMs: 3 * 86_400_000,
      eventsMaxLen: 5000,
      queryDelayMs: 50,
      channelLatencyMs: 0,
      channelOutcomes: new Map([
        ['quickpay.pay', 'unknown'],
        ['quickpay.query', 'failure'],
      ]),
      balanceChannel: 'simulated',
    });
  });

  it.each([
    ['ORDERS_RETENTION_SECONDS', '86400'],
    ['ORDERS_EVENTS_MAXLEN', '999'],
    ['BALANCE_CHANNEL', 'bank'],
    ['ORDERS_QUERY_DELAY_MS', '-5'],
    ['ORDERS_QUERY_DELAY_MS', 'soon'],
    ['CHANNEL_LATENCY_MS', '60001'],
    ['CHANNEL_OUTCOMES', 'quickpay.pay=maybe'],
  ])('rejects %s=%p', (variable, value) => {
    expectConfigError(() => ordersConfig.load({ [variable]: value }), variable);
  });

  it('stops loadConfig (the boot) on a bad orders setting, naming it', () => {
    const err = expectConfigError(() => loadConfig({ NODE_ENV: 'test', ORDERS_QUERY_DELAY_MS: '-5' }), 'ORDERS_QUERY_DELAY_MS');
    expect(err.message).toMatch(/^ORDERS_QUERY_DELAY_MS must not be less than 10/);
  });

  it('is built by loadConfig and provided to the module as OrdersConfig', () => {
    const config = loadConfig({ ORDERS_QUERY_DELAY_MS: '75' });
    expect(config.slices.has('orders')).toBe(true);
    expect(ordersConfig.token).toBe(OrdersConfig);
    expect(ordersConfig.provider.useFactory(config)).toBe(ordersConfig.of(config));
    expect(ordersConfig.of(config).queryDelayMs).toBe(75);
  });
});
