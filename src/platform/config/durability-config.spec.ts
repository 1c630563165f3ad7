import { expectConfigError as configError } from '../../../test/support/config-errors';
import { loadConfig } from './load-config';

describe('durability settings', () => {
  it('default to no wait (0 replicas) with a 500 ms timeout', () => {
    expect(loadConfig({}).durability).toEqual({ replicas: { money: 0, messages: 0 }, timeoutMs: 500 });
  });

  it('give messages the money setting unless DURABILITY_MESSAGES_REPLICAS says otherwise', () => {
    expect(loadConfig({ DURABILITY_REPLICAS: '2' }).durability.replicas).toEqual({ money: 2, messages: 2 });
    expect(loadConfig({ DURABILITY_REPLICAS: '1', DURABILITY_MESSAGES_REPLICAS: '0' }).durability.replicas).toEqual({ money: 1, messages: 0 });
  });

  it('refuse values out of bounds, naming the variable', () => {
    configError(() => loadConfig({ DURABILITY_REPLICAS: '-1' }), 'DURABILITY_REPLICAS');
    configError(() => loadConfig({ DURABILITY_MESSAGES_REPLICAS: '17' }), 'DURABILITY_MESSAGES_REPLICAS');
    configError(() => loadConfig({ DURABILITY_TIMEOUT_MS: '0' }), 'DURABILITY_TIMEOUT_MS');
    configError(() => loadConfig({ DURABILITY_TIMEOUT_MS: '10001' }), 'DURABILITY_TIMEOUT_MS');
  });

  it('refuse a wait that the command timeout would cut, only when writes wait', () => {
    configError(() => loadConfig({ DURABILITY_REPLICAS: '1', DURABILITY_TIMEOUT_MS: '1000', REDIS_COMMAND_TIMEOUT_MS: '1000' }), 'DURABILITY_TIMEOUT_MS');
    expect(loadConfig({ DURABILITY_TIMEOUT_MS: '1000', REDIS_COMMAND_TIMEOUT_MS: '1000' }).durability.timeoutMs).toBe(1000);
    expect(loadConfig({ DURABILITY_REPLICAS: '1', DURABILITY_TIMEOUT_MS: '999', REDIS_COMMAND_TIMEOUT_MS: '1000' }).durability.timeoutMs).toBe(999);
  });
});
