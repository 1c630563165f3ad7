import { DelayQueueService } from '../../src/engines/delay-queue/delay-queue.service';
import { MessagesModule, MessagesService } from '../../src/features/messages';
import type { WriteMessageCommand } from '../../src/features/messages/message.commands';
import { PendingActionsService, REMINDER_QUEUE } from '../../src/features/messages/pending-actions.service';
import { InvalidArgumentError } from '../../src/platform/core/domain.error';
import { buildModule, eventually, rejection, useModuleRedis } from '../support/module-tier';
import { setTimeout as sleep } from 'node:timers/promises';

/**
 * The message center built alone (MessagesModule on the platform and engines; it imports no other feature) against a
 * real redis-server: idempotent writes, gap-free pulls, read state, broadcasts, withdraws, and the reminders of
 * unfinished actions on the delay queue, including the queue failing under them.
 */
const REMINDER_DELAY_MS = 300;
const redis = useModuleRedis();

async function setup() {
  const m = await buildModule(redis, { feature: MessagesModule, env: { PENDING_ACTION_DELAYS: `PASSWORD_RECOVERY:${REMINDER_DELAY_MS}` } });
  const sut = m.get(MessagesService);
  const write = (accountId: string, outerBizId: string, extra: Partial<WriteMessageCommand> = {}) =>
    sut.write({ accountId, bizType: 'PAYMENT', outerBizId, title: 'Payment successful', content: `paid ${outerBizId}`, ...extra });
  /** Every message the account sees, oldest first, pulled `pageSize` at a time from the start. */
  const pullAll = async (accountId: string, pageSize: number, between?: () => Promise<unknown>) => {
    const ids: string[] = [];
    for (let after = '1'; ;) {
      const page = await sut.pull(accountId, after, pageSize);
      ids.push(...page.messages.map((x) => x.outerBizId));
      if (!page.hasMore) return ids;
      after = page.latestId!;
      await between?.();
    }
  };
  return { m, sut, write, pullAll, pending: m.get(PendingActionsService), queue: m.get(DelayQueueService) };
}

describe('messages module', () => {
  it('a write is idempotent on (bizType, outerBizId): 20 concurrent writes store one message', async () => {
    const { sut, write } = await setup();
    const results = await Promise.all(Array.from({ length: 20 }, () => write('acct-1', 'pay-1')));
    expect(results.filter((r) => !r.duplicate)).toHaveLength(1);
    expect(new Set(results.map((r) => r.msgId)).size).toBe(1);
    const page = await sut.pull('acct-1', undefined, 50);
    expect(page.messages.map((x) => x.msgId)).toEqual([results[0].msgId]);
    expect(page.unread).toBe(1);
  });

  it('a withdrawn key stays withdrawn: a later write of it stores nothing', async () => {
    const { sut, write } = await setup();
    await write('acct-1', 'pay-1');
    expect(await sut.withdraw({ accountId: 'acct-1', bizType: 'PAYMENT', outerBizId: 'pay-1' })).toEqual({ withdrawn: true });
    expect(await write('acct-1', 'pay-1')).toEqual({ msgId: '', duplicate: true, withdrawn: true });
    expect(await sut.withdraw({ accountId: 'acct-1', bizType: 'PAYMENT', outerBizId: 'pay-1' })).toEqual({ withdrawn: false });
    expect((await sut.pull('acct-1', undefined, 50)).messages).toEqual([]);
    expect(await sut.unreadCount('acct-1')).toBe(0);
  });

  it('pulls are gap-free: paging by latestId sees every message once, in write order, with writes landing between pages', async () => {
    const { write, pullAll } = await setup();
    for (let i = 0; i < 25; i++) await write('acct-1', `w-${i}`);
    let late = 0;
    const seen = await pullAll('acct-1', 7, async () => {
      await write('acct-1', `late-${late++}`);
    });
    expect(seen).toEqual([...Array.from({ length: 25 }, (_, i) => `w-${i}`), ...Array.from({ length: late }, (_, i) => `late-${i}`)]);
    // Another account's inbox is apart.
    expect(await pullAll('acct-2', 7)).toEqual([]);
  });

  it('read state: one read, then all read, counted against the messages', async () => {
    const { sut, write } = await setup();
    const ids = [];
    for (let i = 0; i < 5; i++) ids.push((await write('acct-1', `r-${i}`)).msgId);
    expect(await sut.unreadCount('acct-1')).toBe(5);
    await sut.markRead('acct-1', ids[2]);
    expect(await sut.unreadCount('acct-1')).toBe(4);
    expect((await sut.get('acct-1', ids[2])).read).toBe(true);
    expect(await sut.markAllRead('acct-1')).toEqual({ marked: 4, unread: 0 });
    const page = await sut.pull('acct-1', undefined, 50);
    expect(page.messages.every((x) => x.read)).toBe(true);
    expect(page.unread).toBe(0);
  });

  it('a broadcast to all is one write that every account takes in once; the same request id makes no second one', async () => {
    const { sut, write } = await setup();
    await write('acct-1', 'before');
    const b = await sut.broadcast({ title: 'Maintenance', content: 'Tonight 2:00-3:00', audience: 'all', requestId: 'rq-1' });
    expect(b).toMatchObject({ audience: 'all', duplicate: false });
    expect(await sut.broadcast({ title: 'Maintenance', content: 'Tonight 2:00-3:00', audience: 'all', requestId: 'rq-1' })).toMatchObject({
      broadcastId: b.broadcastId,
      duplicate: true,
    });
    for (const account of ['acct-1', 'acct-2']) {
      const [first, again] = await Promise.all([sut.pull(account, undefined, 50), sut.pull(account, undefined, 50)]);
      const broadcasts = (p: typeof first) => p.messages.filter((x) => x.broadcastId === b.broadcastId);
      expect(broadcasts(first)).toHaveLength(1);
      expect(broadcasts(again)).toHaveLength(1);
      expect(broadcasts(await sut.pull(account, undefined, 50))).toHaveLength(1);
    }
    expect(await sut.unreadCount('acct-1')).toBe(2);
  });

  it('a broadcast to a list writes each inbox once, and its retry under the same request id writes none again', async () => {
    const { sut } = await setup();
    const cmd = { title: 'Coupon', content: '10% off', audience: ['a1', 'a2', 'a3', 'a2'], requestId: 'rq-list' };
    expect(await sut.broadcast(cmd)).toMatchObject({ audience: 'accounts', written: 3, duplicates: 0, duplicate: false });
    expect(await sut.broadcast(cmd)).toMatchObject({ written: 0, duplicates: 3, duplicate: true });
    for (const a of ['a1', 'a2', 'a3']) expect((await sut.pull(a, undefined, 50)).messages).toHaveLength(1);
  });

  it('a command the write refuses is an InvalidArgumentError naming the field, and nothing is stored', async () => {
    const { sut, write } = await setup();
    const err = await rejection(write('acct-1', 'bad', { ttlMs: 0 }));
    expect(err).toBeInstanceOf(InvalidArgumentError);
    expect((err as InvalidArgumentError).message).toMatch(/ttlMs/);
    expect(await sut.unreadCount('acct-1')).toBe(0);
  });

  it('an unfinished action gets one reminder after its delay; a finished one gets none', async () => {
    const { sut, pending } = await setup();
    await pending.start({ accountId: 'forgot', bizType: 'PASSWORD_RECOVERY' });
    await pending.start({ accountId: 'done', bizType: 'PASSWORD_RECOVERY' });
    expect(await pending.finish({ accountId: 'done', bizType: 'PASSWORD_RECOVERY' })).toBe(true);
    await eventually('the reminder', async () => (await sut.unreadCount('forgot')) === 1, 5000);
    await sleep(REMINDER_DELAY_MS);
    const [msg] = (await sut.pull('forgot', undefined, 50)).messages;
    expect(msg).toMatchObject({ bizType: 'REMINDER_PASSWORD_RECOVERY', needPush: true });
    expect(await sut.unreadCount('done')).toBe(0);
  });

  it('the delay queue failing under start or finish leaves the reminder right: a failed schedule then a retry give one; a failed cancel gives none', async () => {
    const { sut, pending, queue } = await setup();
    jest.spyOn(queue, 'schedule').mockRejectedValueOnce(new Error('queue down'));
    await expect(pending.start({ accountId: 'retried', bizType: 'PASSWORD_RECOVERY' })).rejects.toThrow('queue down');
    await pending.start({ accountId: 'retried', bizType: 'PASSWORD_RECOVERY' });

    await pending.start({ accountId: 'finished', bizType: 'PASSWORD_RECOVERY' });
    jest.spyOn(queue, 'cancel').mockRejectedValueOnce(new Error('queue down'));
    await expect(pending.finish({ accountId: 'finished', bizType: 'PASSWORD_RECOVERY' })).rejects.toThrow('queue down');
    // The finish was recorded before the cancel: the reminder that still fires finds the action ended and writes nothing.
    expect(await queue.get(REMINDER_QUEUE, 'PASSWORD_RECOVERY:finished')).not.toBeNull();

    await eventually('the retried start’s reminder', async () => (await sut.unreadCount('retried')) === 1, 5000);
    await eventually(
      'both reminders handled',
      async () => {
        const s = await queue.stats(REMINDER_QUEUE);
        return s.pending + s.ready + s.inFlight === 0;
      },
      5000,
    );
    expect((await sut.pull('retried', undefined, 50)).messages).toHaveLength(1);
    expect(await sut.unreadCount('finished')).toBe(0);
  });
});
