import type Redis from 'ioredis';
import { DelayQueueService } from '../../src/engines/delay-queue/delay-queue.service';
import type { MessageDto } from '../../src/features/messages/dto/pull.dto';
import { MessagesService } from '../../src/features/messages/messages.service';
import { inboxKeys } from '../../src/features/messages/message.keys';
import { PENDING_ACTION_TYPES } from '../../src/features/messages/pending-action.types';
import { PendingActionsService, REMINDER_QUEUE } from '../../src/features/messages/pending-actions.service';
import { KeyBuilder } from '../../src/platform/redis/key-builder';
import { rawConnection, waitUntil } from '../harness/redis-process';
import { randomPrefix, RedisServerHandle, startRedisServer } from '../harness/redis-server';
import { startTestApp, TestApp } from '../support/test-app';
import { setTimeout as sleep } from 'node:timers/promises';

/**
 * Reminders for unfinished actions on two app instances sharing one key
 * prefix (two deployed replicas), with PASSWORD_RECOVERY due after 300 ms:
 * one message per unfinished start, none after a finish, and the race of a
 * finish against the reminder firing at the same moment.
 */

const DELAY_MS = 300;
const ACTION = 'PASSWORD_RECOVERY';
const REMINDER = `REMINDER_${ACTION}`;

describe(`${PendingActionsService.name} on two instances`, () => {
  let redis: RedisServerHandle;
  let raw: Redis;
  let apps: TestApp[];
  let pending: PendingActionsService[];
  let messages: MessagesService;
  let keyBuilder: KeyBuilder;
  let dq: DelayQueueService;

  beforeAll(async () => {
    redis = await startRedisServer();
    raw = rawConnection(redis);
    const env = { REDIS_KEY_PREFIX: randomPrefix(), PENDING_ACTION_DELAYS: `${ACTION}:${DELAY_MS}` };
    apps = await Promise.all([startTestApp(redis.url, env), startTestApp(redis.url, env)]);
    pending = apps.map((t) => t.app.get(PendingActionsService));
    messages = apps[0].app.get(MessagesService);
    keyBuilder = apps[0].app.get(KeyBuilder);
    dq = apps[1].app.get(DelayQueueService);
  });

  afterAll(async () => {
    await Promise.all((apps ?? []).map((t) => t.close()));
    raw?.disconnect();
    await redis?.destroy();
  });

  const remindersOf = async (accountId: string): Promise<MessageDto[]> =>
    (await messages.pull(accountId, undefined, 100)).messages.filter((m) => m.bizType === REMINDER);
  const pendingRecord = (accountId: string) => raw.hget(inboxKeys(keyBuilder, accountId)[4], `pa:${ACTION}`);
  /** Until every reminder scheduled so far has been delivered or cancelled. */
  const queueSettled = () =>
    waitUntil(
      'the reminder queue to settle',
      async () => {
        const s = await dq.stats(REMINDER_QUEUE);
        return s.pending + s.ready + s.inFlight === 0 || JSON.stringify(s);
      },
      10_000,
    );

  it('uses the configured delay', () => {
    expect(pending.map((p) => p.delayOf(ACTION))).toEqual([DELAY_MS, DELAY_MS]);
  });

  it('an action left unfinished becomes exactly one reminder message, after its delay', async () => {
    const acc = 'rem-once';
    const { actionId, remindAt } = await pending[0].start({ accountId: acc, bizType: ACTION, context: { channel: 'sms' } });
    expect(await pendingRecord(acc)).toBe(actionId);
    await waitUntil('the reminder', async () => (await remindersOf(acc)).length > 0, 5_000);
    await sleep(DELAY_MS); // time for a second delivery, if there were one
    await queueSettled();

    const type = PENDING_ACTION_TYPES[ACTION];
    const got = await remindersOf(acc);
    expect(got).toEqual([
      expect.objectContaining({
        bizType: REMINDER,
        outerBizId: actionId,
        title: type.title,
        content: type.content,
        url: type.url,
        needPush: true,
        read: false,
      }),
    ]);
    expect(Date.parse(got[0].storedAt)).toBeGreaterThanOrEqual(remindAt);
    // The reminder ended the action.
    expect(await pendingRecord(acc)).toBeNull();
    expect(await pending[1].finish({ accountId: acc, bizType: ACTION })).toBe(false);
  });

  it('starting the same action twice keeps one record and sends one reminder, for the second start', async () => {
    const acc = 'rem-twice';
    const first = await pending[0].start({ accountId: acc, bizType: ACTION });
    await sleep(100);
    const second = await pending[1].start({ accountId: acc, bizType: ACTION });
    expect(await pendingRecord(acc)).toBe(second.actionId);
    expect((await dq.stats(REMINDER_QUEUE)).pending).toBe(1);
    await waitUntil('the reminder', async () => (await remindersOf(acc)).length > 0, 5_000);
    await sleep(DELAY_MS);
    await queueSettled();

    const got = await remindersOf(acc);
    expect(got.map((m) => m.outerBizId)).toEqual([second.actionId]);
    expect(got[0].outerBizId).not.toBe(first.actionId);
    expect(Date.parse(got[0].storedAt)).toBeGreaterThanOrEqual(second.remindAt);
  });

  it('finishing before the delay sends nothing, even well past the delay', async () => {
    const acc = 'rem-finished';
    const { remindAt } = await pending[0].start({ accountId: acc, bizType: ACTION });
    await sleep(100);
    expect(await pending[1].finish({ accountId: acc, bizType: ACTION })).toBe(true);
    expect(await pendingRecord(acc)).toBeNull();
    await sleep(remindAt + 3 * DELAY_MS - Date.now());
    await queueSettled();
    expect(await remindersOf(acc)).toEqual([]);
    expect(await pending[0].finish({ accountId: acc, bizType: ACTION })).toBe(false);
  });

  it('finish racing the reminder (200 accounts, finishes from 120 ms before to 150 ms after the due time): a message or wasPending, never both, never two', async () => {
    const accounts = Array.from({ length: 200 }, (_, i) => `race-${i}`);
    const started = await Promise.all(accounts.map((acc, i) => pending[i % 2].start({ accountId: acc, bizType: ACTION })));
    const finished = await Promise.all(
      accounts.map(async (acc, i) => {
        // Spread around the due time; the instance that did not start it finishes it.
        await sleep(started[i].remindAt - 120 + (i % 40) * 7 - Date.now());
        return pending[(i + 1) % 2].finish({ accountId: acc, bizType: ACTION });
      }),
    );
    await queueSettled();
    await sleep(100);

    const outcomes = await Promise.all(
      accounts.map(async (acc, i) => {
        const n = (await remindersOf(acc)).length;
        const wasPending = finished[i];
        const ok = (wasPending && n === 0) || (!wasPending && n === 1);
        return { acc, wasPending, messages: n, ok };
      }),
    );
    expect(outcomes.filter((o) => !o.ok)).toEqual([]);
    // Both sides of the race happened.
    const finishedFirst = outcomes.filter((o) => o.wasPending).length;
    expect(finishedFirst).toBeGreaterThan(0);
    expect(finishedFirst).toBeLessThan(accounts.length);
    expect(await Promise.all(accounts.map(pendingRecord))).toEqual(accounts.map(() => null));
  });
});
