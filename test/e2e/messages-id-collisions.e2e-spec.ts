import request from 'supertest';
import type { MessageDto as Msg } from '../../src/features/messages/dto/pull.dto';
import { waitUntil } from '../harness/redis-process';
import { CREDS, useAppOnOwnRedis, userToken } from '../support/test-app';
import { setTimeout as sleep } from 'node:timers/promises';

/**
 * Where an id a caller chooses meets an id the service makes, in the message center: each test picks the caller's
 * id to spell the service's own, and proves the service's record stays its own.
 *
 * - A reminder's idempotency record is (REMINDER_<type>, actionId), and the actionId is handed to the business
 *   system that started the action: writing or withdrawing that pair as a message must not stop the reminder.
 * - A broadcast to everyone is named by its sequence (digits); a listed broadcast by its requestId: a requestId
 *   spelling a broadcast's sequence would show two broadcasts under one broadcastId.
 */
const REMINDER_DELAY_MS = 300;
const ctx = useAppOnOwnRedis({ RATE_LIMIT_ENABLED: 'false', PENDING_ACTION_DELAYS: `PASSWORD_RECOVERY:${REMINDER_DELAY_MS}` });
const SERVICE = { 'x-service-token': CREDS.serviceToken };
const ADMIN = { 'x-admin-key': CREDS.adminKey };
const http = () => request(ctx.t.server);
const pull = async (accountId: string): Promise<Msg[]> =>
  (
    await http()
      .get('/messages?limit=100')
      .set({ authorization: `Bearer ${userToken(accountId)}` })
  ).body.messages as Msg[];
const startAction = (accountId: string) => http().post('/pending-actions').set(SERVICE).send({ accountId, bizType: 'PASSWORD_RECOVERY' });
const reminders = (messages: Msg[]) => messages.filter((m) => m.bizType === 'REMINDER_PASSWORD_RECOVERY' && m.title === 'Still locked out?');

describe('message center: caller ids that spell the service’s own', () => {
  it('a message written as (REMINDER_PASSWORD_RECOVERY, actionId) before the reminder is due does not take the reminder’s place', async () => {
    const acc = 'acc_col_rw';
    const started = await startAction(acc);
    expect(started.status).toBe(201);
    const forged = await http().post('/messages').set(SERVICE).send({
      accountId: acc,
      bizType: 'REMINDER_PASSWORD_RECOVERY',
      outerBizId: started.body.actionId,
      title: 'Not the reminder',
      content: 'from a business system',
    });
    expect(forged.status).toBe(201);
    await waitUntil('the reminder', async () => reminders(await pull(acc)).length > 0, 5000, 50);
    await sleep(REMINDER_DELAY_MS + 300); // room for a second one, which must not come
    const inbox = await pull(acc);
    expect(reminders(inbox)).toHaveLength(1);
    expect(inbox.filter((m) => m.title === 'Not the reminder')).toHaveLength(1);
    // The reminder ended its action.
    expect((await http().delete(`/pending-actions/PASSWORD_RECOVERY/${acc}`).set(SERVICE)).body).toEqual({ wasPending: false });
  });

  it('withdrawing (REMINDER_PASSWORD_RECOVERY, actionId) before the reminder is due does not stop it', async () => {
    const acc = 'acc_col_wd';
    const started = await startAction(acc);
    const wd = await http()
      .post('/messages/withdraw')
      .set(SERVICE)
      .send({ accountId: acc, bizType: 'REMINDER_PASSWORD_RECOVERY', outerBizId: started.body.actionId });
    expect(wd.status).toBe(200);
    await waitUntil('the reminder', async () => reminders(await pull(acc)).length > 0, 5000, 50);
    expect(reminders(await pull(acc))).toHaveLength(1);
  });

  it('a listed broadcast’s requestId cannot spell a broadcast-to-all’s id: 400 naming requestId, nothing written', async () => {
    const acc = 'acc_col_bc';
    const all = await http().post('/admin/messages/broadcast').set(ADMIN).send({ title: 'To everyone', content: 'hello', audience: 'all' });
    expect(all.status).toBe(200);
    const id = all.body.broadcastId as string;
    expect(id).toMatch(/^\d+$/);
    const listed = await http()
      .post('/admin/messages/broadcast')
      .set(ADMIN)
      .send({ title: 'To one', content: 'hi', audience: [acc], requestId: id });
    expect(listed.status).toBe(400);
    expect(listed.body.details.map((d: { field: string }) => d.field)).toEqual(['requestId']);
    // One message under that broadcast id: the broadcast to everyone.
    const inbox = await pull(acc);
    expect(inbox.filter((m) => m.broadcastId === id).map((m) => m.title)).toEqual(['To everyone']);
    // A requestId with a letter in it is the caller's own.
    const ok = await http()
      .post('/admin/messages/broadcast')
      .set(ADMIN)
      .send({ title: 'To one', content: 'hi', audience: [acc], requestId: `r${id}` });
    expect(ok.status).toBe(200);
    expect(ok.body.broadcastId).toBe(`r${id}`);
  });
});
