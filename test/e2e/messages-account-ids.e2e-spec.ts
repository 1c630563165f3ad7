import Redis from 'ioredis';
import request from 'supertest';
import type { PullResultDto as Page } from '../../src/features/messages/dto/pull.dto';
import { FEED_TTL_MS } from '../../src/features/messages/broadcast-feed';
import { broadcastKeys, inboxKeys } from '../../src/features/messages/message.keys';
import { KeyBuilder } from '../../src/platform/redis/key-builder';
import { CREDS, TestApp, userToken, useAppOnOwnRedis } from '../support/test-app';
import { setTimeout as sleep } from 'node:timers/promises';

/**
 * Account ids that spell another kind of key. `broadcast` is a valid account
 * id, and an inbox was once tagged with its bare account id, the broadcast
 * feed with the bare word `broadcast`: one message to that account wrote into
 * the feed's own keys, and once each instance read the feed again (within a
 * second) every account's GET /messages and GET /messages/unread-count
 * answered 500. Keys now carry their kind (`{a:<account>}`, `{bc}`), so the
 * account is an account like any other.
 */

const SERVICE = { 'x-service-token': CREDS.serviceToken };
const ADMIN = { 'x-admin-key': CREDS.adminKey };
const asUser = (accountId: string) => ({ authorization: `Bearer ${userToken(accountId)}` });

describe('an account called "broadcast" over HTTP', () => {
  let t: TestApp;
  let raw: Redis;

  const pull = (accountId: string) => request(t.server).get('/messages').set(asUser(accountId));
  const unreadCount = (accountId: string) => request(t.server).get('/messages/unread-count').set(asUser(accountId));
  /** Pull and unread count of `accountId`, both asserted 200. */
  const inbox = async (accountId: string) => {
    const [page, count] = await Promise.all([pull(accountId), unreadCount(accountId)]);
    expect({ accountId, pull: page.status, unreadCount: count.status }).toEqual({ accountId, pull: 200, unreadCount: 200 });
    return { titles: (page.body as Page).messages.map((m) => m.title), unread: (page.body as Page).unread, count: count.body.unread as number };
  };

  const suite = useAppOnOwnRedis({ RATE_LIMIT_ENABLED: 'false' });
  beforeAll(() => {
    ({ t, raw } = suite);
  });

  it('a message to account "broadcast" stays in its inbox: after the broadcast sync every account still pulls (200), and broadcasts still reach everyone', async () => {
    // One account pulled before the write (it has taken the feed in already), one pulls only after it.
    expect(await inbox('acc_before')).toEqual({ titles: [], unread: 0, count: 0 });
    const keysBefore = new Set(await raw.keys(`${t.config.redis.keyPrefix}:*`));

    const written = await request(t.server)
      .post('/messages')
      .set(SERVICE)
      .send({ accountId: 'broadcast', bizType: 'PAYMENT_SUCCESS', outerBizId: 'order-1', title: 'Paid', content: '¥12.00 paid to Coffee Corner' });
    expect(written.status).toBe(201);
    const added = (await raw.keys(`${t.config.redis.keyPrefix}:*`)).filter((k) => !keysBefore.has(k));

    // Each instance reads the feed again once its copy is FEED_TTL_MS old: every pull after that takes it in.
    await sleep(FEED_TTL_MS + 300);
    for (const acc of ['acc_before', 'acc_after']) expect(await inbox(acc)).toEqual({ titles: [], unread: 0, count: 0 });
    expect(await inbox('broadcast')).toEqual({ titles: ['Paid'], unread: 1, count: 1 });
    // The write made keys of the account's inbox only: none of them is a key of the broadcast feed.
    const keys = t.app.get(KeyBuilder);
    expect(added.filter((k) => broadcastKeys(keys).includes(k))).toEqual([]);
    expect(added.filter((k) => !inboxKeys(keys, 'broadcast').includes(k))).toEqual([]);
    expect(added.length).toBeGreaterThan(0);

    // A broadcast to everyone still reaches every account, the one called "broadcast" included.
    const sent = await request(t.server)
      .post('/admin/messages/broadcast')
      .set(ADMIN)
      .send({ title: 'Double 11', content: '20% back on every payment', audience: 'all' });
    expect(sent.status).toBe(200);
    await sleep(FEED_TTL_MS + 300);
    expect(await inbox('acc_before')).toEqual({ titles: ['Double 11'], unread: 1, count: 1 });
    expect(await inbox('acc_after')).toEqual({ titles: ['Double 11'], unread: 1, count: 1 });
    expect(await inbox('broadcast')).toEqual({ titles: ['Paid', 'Double 11'], unread: 2, count: 2 });
  });
});
