import { expectConfigError } from '../../../test/support/config-errors';
import { loadConfig } from '../../platform/config/load-config';
import { MessagesConfig, messagesConfig } from './messages.config';

describe('messages config slice', () => {
  it('defaults to 1,000 messages for 90 days and the built-in reminder delays', () => {
    expect(messagesConfig.load({})).toEqual({ maxPerAccount: 1000, retentionMs: 90 * 86_400_000, pendingActionDelays: new Map() });
  });

  it('reads the limits and the reminder delay overrides', () => {
    const cfg = messagesConfig.load({
      MESSAGES_MAX_PER_ACCOUNT: '50',
      MESSAGES_RETENTION_SECONDS: '2',
      PENDING_ACTION_DELAYS: 'PASSWORD_RECOVERY:300,BANK_CARD_BINDING:60000',
    });
    expect(cfg.maxPerAccount).toBe(50);
    expect(cfg.retentionMs).toBe(2000);
    expect([...cfg.pendingActionDelays]).toEqual([
      ['PASSWORD_RECOVERY', 300],
      ['BANK_CARD_BINDING', 60000],
    ]);
  });

  it.each([
    ['MESSAGES_MAX_PER_ACCOUNT', '9'],
    ['MESSAGES_RETENTION_SECONDS', '0'],
    ['PENDING_ACTION_DELAYS', 'password_recovery:300'],
    ['PENDING_ACTION_DELAYS', 'PASSWORD_RECOVERY'],
    ['PENDING_ACTION_DELAYS', 'PASSWORD_RECOVERY:-1'],
  ])('rejects %s=%p', (variable, value) => {
    expectConfigError(() => messagesConfig.load({ [variable]: value }), variable);
  });

  it('rejects a reminder delay for a type that is not an action type, at load (boot) time', () => {
    const err = expectConfigError(() => loadConfig({ PENDING_ACTION_DELAYS: 'PASSWORD_RECOVERY:300,NO_SUCH_ACTION:5' }), 'PENDING_ACTION_DELAYS');
    expect(err.message).toMatch(/names NO_SUCH_ACTION, which is not an action type \(.*PASSWORD_RECOVERY/);
  });

  it('is built by loadConfig and provided to the module as MessagesConfig', () => {
    const config = loadConfig({ MESSAGES_MAX_PER_ACCOUNT: '20' });
    expect(config.slices.has('messages')).toBe(true);
    expect(messagesConfig.token).toBe(MessagesConfig);
    expect(messagesConfig.of(config).maxPerAccount).toBe(20);
    expect(messagesConfig.provider.useFactory(config)).toBe(messagesConfig.of(config));
  });
});
