import { setTimeout as sleep } from 'node:timers/promises';
import { ReminderSettingsNotFoundError } from '../../src/features/close-reminder/close-reminder.errors';
import { MerchantSettings, SETTINGS_POLL_MS } from '../../src/features/close-reminder/merchant-settings';
import { InvalidArgumentError } from '../../src/platform/core/domain.error';
import { RedisService } from '../../src/platform/redis/redis.service';
import { randomPrefix, RedisServerHandle, startRedisServer } from '../harness/redis-server';
import { startTestApp, TestApp } from '../support/test-app';

/**
 * Merchants' close-reminder settings across instances, against a real
 * redis-server: two app instances on one Redis (same key prefix) each cache
 * what they read, and each sees a change made through the other within a
 * second (the shared settings version, polled every SETTINGS_POLL_MS).
 */
describe('close reminders: merchant settings on two instances', () => {
  let redis: RedisServerHandle;
  let a: TestApp;
  let b: TestApp;
  let sa: MerchantSettings;
  let sb: MerchantSettings;

  /** How long until `read` answers what `ok` wants, ms (Infinity when it never does within 3 s). */
  const timeUntil = async (read: () => Promise<unknown>, ok: (v: unknown) => boolean): Promise<number> => {
    const t0 = Date.now();
    while (Date.now() - t0 < 3000) {
      if (ok(await read())) return Date.now() - t0;
      await sleep(20);
    }
    return Infinity;
  };
  const enabledOf = (v: unknown) => (v as { enabled?: boolean } | null)?.enabled;

  beforeAll(async () => {
    redis = await startRedisServer();
    const env = { REDIS_KEY_PREFIX: randomPrefix() };
    a = await startTestApp(redis.url, env);
    b = await startTestApp(redis.url, env);
    sa = a.app.get(MerchantSettings);
    sb = b.app.get(MerchantSettings);
  });

  afterAll(async () => {
    await a?.close();
    await b?.close();
    await redis?.destroy();
  });

  it('a change made on one instance is seen by the other within a second, each time', async () => {
    expect(await sb.get('m_two')).toBeNull(); // b caches "no settings"
    const waits: number[] = [];
    for (const enabled of [true, false, true]) {
      await sa.save({ merchantId: 'm_two', enabled, leadSeconds: 300 });
      expect(enabledOf(await sa.get('m_two'))).toBe(enabled); // the instance that saved sees it at once
      waits.push(
        await timeUntil(
          () => sb.get('m_two'),
          (v) => enabledOf(v) === enabled,
        ),
      );
    }
    expect(Math.max(...waits)).toBeLessThan(1000);
    // b really caches between changes: after a wait it still answers without a new read of the settings hash.
    expect(waits.some((w) => w >= SETTINGS_POLL_MS / 10)).toBe(true);

    await sa.remove('m_two');
    expect(
      await timeUntil(
        () => sb.get('m_two'),
        (v) => v === null,
      ),
    ).toBeLessThan(1000);
  });

  it('the list is paged in id order and ends without a next', async () => {
    for (const id of ['m_p3', 'm_p1', 'm_p2']) await sa.save({ merchantId: id, enabled: true });
    const first = await sb.page('m_p', 2);
    expect(first.items.map((i) => i.merchantId)).toEqual(['m_p1', 'm_p2']);
    expect(first.next).toBe('m_p2');
    const second = await sb.page(first.next!, 2);
    expect(second.items.map((i) => i.merchantId)).toEqual(['m_p3']);
    expect(second.next).toBeUndefined();
  });

  it('a full last page has no next either', async () => {
    // Ids after every other merchant of this suite: these pages are the last ones.
    for (const id of ['z_last1', 'z_last2', 'z_last3', 'z_last4']) await sa.save({ merchantId: id, enabled: true });
    const whole = await sb.page('z_last', 4);
    expect(whole.items.map((i) => i.merchantId)).toEqual(['z_last1', 'z_last2', 'z_last3', 'z_last4']);
    expect(whole).not.toHaveProperty('next');
    const first = await sb.page('z_last', 2);
    expect(first.next).toBe('z_last2');
    const second = await sb.page(first.next!, 2);
    expect(second.items.map((i) => i.merchantId)).toEqual(['z_last3', 'z_last4']);
    expect(second).not.toHaveProperty('next');
    for (const id of ['z_last1', 'z_last2', 'z_last3', 'z_last4']) await sa.remove(id);
  });

  it('refuses a lead the service cannot honour (under CLOSE_REMINDER_MIN_LEFT_SECONDS + the visibility timeout: 90 s by default), naming leadSeconds and storing nothing', async () => {
    const err = await sa.save({ merchantId: 'm_short', enabled: true, leadSeconds: 89 }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(InvalidArgumentError);
    expect(err).toMatchObject({ code: 'VALIDATION_FAILED', details: [{ field: 'leadSeconds' }] });
    expect((err as Error).message).toContain('at least 90');
    await expect(sa.mustRead('m_short')).rejects.toBeInstanceOf(ReminderSettingsNotFoundError);
    expect((await sa.save({ merchantId: 'm_short', enabled: true, leadSeconds: 90 })).settings.leadSeconds).toBe(90);
    await sa.remove('m_short');
  });

  it('a merchant removed while its page is read does not end the listing there', async () => {
    for (const id of ['m_q1', 'm_q2', 'm_q3', 'm_q4']) await sa.save({ merchantId: id, enabled: true });
    // The page reads the index, then the settings: m_q2 is removed (through the other instance) in between.
    const redisB = b.app.get(RedisService);
    const real = redisB.command.bind(redisB);
    let reads = 0;
    const spy = jest.spyOn(redisB, 'command').mockImplementation(async (fn) => {
      const out = await real(fn);
      if (++reads === 1) await sa.remove('m_q2');
      return out;
    });
    let first;
    try {
      first = await sb.page('m_q', 2);
    } finally {
      spy.mockRestore();
    }
    expect(first.items.map((i) => i.merchantId)).toEqual(['m_q1']);
    expect(first.next).toBe('m_q2');
    const rest = await sb.page(first.next!, 10);
    expect(rest.items.map((i) => i.merchantId)).toEqual(['m_q3', 'm_q4']);
  });
});
