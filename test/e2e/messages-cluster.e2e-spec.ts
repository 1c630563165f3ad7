import type Redis from 'ioredis';
import { broadcastKeys, inboxKeys } from '../../src/features/messages/message.keys';
import { MessagesService } from '../../src/features/messages/messages.service';
import { PendingActionsService } from '../../src/features/messages/pending-actions.service';
import { KeyBuilder } from '../../src/platform/redis/key-builder';
import { RedisService } from '../../src/platform/redis/redis.service';
import { ScriptArg, ScriptRegistry } from '../../src/platform/scripts/script-registry.service';
import { RedisClusterHandle, startRedisCluster } from '../harness/redis-cluster';
import { rawConnection, waitUntil } from '../harness/redis-process';
import { startTestApp, TestApp } from '../support/test-app';

/**
 * The message center on a 3-master Redis Cluster: an account's five keys
 * share its hash tag, so each inbox script runs on the master owning that
 * slot; broadcasts to everyone live under their own tag. Accounts are picked
 * so that each master owns one.
 */
describe(`${MessagesService.name} on a 3-master cluster`, () => {
  let cluster: RedisClusterHandle;
  let raw: Redis[];
  let t: TestApp;
  let svc: MessagesService;
  let scripts: ScriptRegistry;
  let keyBuilder: KeyBuilder;
  /** One account per master: accounts[i] lives on cluster.nodes[i]. */
  let accounts: string[];
  /** Which scripts ran under which hash tag (the real calls still run). */
  const ran = new Map<string, Set<string>>();

  beforeAll(async () => {
    cluster = await startRedisCluster({ masters: 3 });
    raw = cluster.nodes.map((n) => rawConnection(n));
    // startTestApp sets REDIS_URL; an empty value means unset, so the cluster is the only topology.
    t = await startTestApp('', { REDIS_CLUSTER_NODES: cluster.envValue, REDIS_COMMAND_TIMEOUT_MS: '1000', PENDING_ACTION_DELAYS: 'PASSWORD_RECOVERY:300' });
    svc = t.app.get(MessagesService);
    scripts = t.app.get(ScriptRegistry);
    keyBuilder = t.app.get(KeyBuilder);

    const original = scripts.run.bind(scripts);
    jest.spyOn(scripts, 'run').mockImplementation(((script: string, keys: readonly string[], args: readonly ScriptArg[] = []) => {
      // The account of an inbox (`{a:<account>}`), or `bc` for the broadcast feed (`{bc}`).
      const tag = /:messages:\{(?:a:)?([^}]+)\}:/.exec(keys[0] ?? '')?.[1] ?? '';
      ran.set(tag, (ran.get(tag) ?? new Set()).add(script));
      return original(script, keys, args);
    }) as ScriptRegistry['run']);

    const slots = await raw[0].cluster('SLOTS');
    const ownerOf = async (tag: string) => {
      const slot = Number(await raw[0].cluster('KEYSLOT', `{a:${tag}}`));
      const range = slots.find(([start, end]) => slot >= start && slot <= end)!;
      return cluster.nodes.findIndex((n) => n.port === range[2][1]);
    };
    const found: Array<string | undefined> = [undefined, undefined, undefined];
    for (let i = 0; i < 200 && found.some((a) => a === undefined); i++) found[await ownerOf(`acc-${i}`)] ??= `acc-${i}`;
    accounts = found as string[];
  });

  afterAll(async () => {
    jest.restoreAllMocks();
    await t?.close();
    raw?.forEach((r) => r.disconnect());
    await cluster?.destroy();
  });

  /** EVAL/EVALSHA calls a master has served so far. */
  const evalCalls = async (node: Redis) => {
    const info = await node.info('commandstats');
    return [...info.matchAll(/^cmdstat_eval(?:sha)?:calls=(\d+)/gm)].reduce((s, m) => s + Number(m[1]), 0);
  };

  it('runs on a cluster connection, with one account on each master', () => {
    expect(t.app.get(RedisService).isCluster).toBe(true);
    expect(accounts.every((a) => typeof a === 'string')).toBe(true);
    expect(new Set(accounts).size).toBe(3);
  });

  it("keeps an account's seven keys in one slot, on the master that owns the account's tag", async () => {
    for (const [owner, acc] of accounts.entries()) {
      const keys = inboxKeys(keyBuilder, acc);
      const slots = await Promise.all(keys.map(async (k) => Number(await raw[owner].cluster('KEYSLOT', k))));
      expect(new Set(slots)).toEqual(new Set([Number(await raw[owner].cluster('KEYSLOT', `{a:${acc}}`))]));
      await svc.write({ accountId: acc, bizType: 'PAYMENT_SUCCESS', outerBizId: 'placed', title: 'Placed', content: 'On its master' });
      expect(await raw[owner].zcard(keys[0])).toBe(1);
      await expect(raw[(owner + 1) % 3].zcard(keys[0])).rejects.toThrow(/^MOVED \d+ 127\.0\.0\.1:\d+/);
    }
  });

  it('runs every messages script, on the master of each account', async () => {
    // A broadcast first, so that each account's next pull takes it in (sync-broadcasts).
    const { broadcastId } = await svc.broadcast({ title: 'For everyone', content: 'On every master', audience: 'all' });
    for (const [owner, acc] of accounts.entries()) {
      const before = await evalCalls(raw[owner]);
      const m1 = await svc.write({ accountId: acc, bizType: 'PAYMENT_SUCCESS', outerBizId: 'm1', title: 'One', content: 'First' });
      expect(await svc.write({ accountId: acc, bizType: 'PAYMENT_SUCCESS', outerBizId: 'm1', title: 'One', content: 'First' })).toEqual({
        msgId: m1.msgId,
        duplicate: true,
      });
      const m2 = await svc.write({ accountId: acc, bizType: 'REFUND_SUCCESS', outerBizId: 'm2', title: 'Two', content: 'Second' });

      const page = await svc.pull(acc, '1', 20);
      expect(page.messages.map((m) => m.outerBizId)).toEqual(['placed', 'm1', 'm2', broadcastId]);
      expect(page.unread).toBe(4);
      expect(await svc.get(acc, m2.msgId)).toMatchObject({ outerBizId: 'm2', read: false });
      expect(await svc.markRead(acc, m2.msgId)).toEqual({ changed: true, unread: 3 });
      expect(await svc.markAllRead(acc)).toEqual({ marked: 3, unread: 0 });
      expect(await svc.remove(acc, m1.msgId)).toBe(0);
      expect((await svc.pull(acc, undefined, 20)).messages.map((m) => `${m.outerBizId}:${m.read}`)).toEqual(['placed:true', 'm2:true', `${broadcastId}:true`]);
      expect(await svc.withdraw({ accountId: acc, bizType: 'REFUND_SUCCESS', outerBizId: 'm2' })).toEqual({ withdrawn: true });
      const pending = t.app.get(PendingActionsService);
      await pending.start({ accountId: acc, bizType: 'BANK_CARD_BINDING' });
      expect(await pending.finish({ accountId: acc, bizType: 'BANK_CARD_BINDING' })).toBe(true);
      // Every inbox call went to this account's master.
      expect((await evalCalls(raw[owner])) - before).toBeGreaterThanOrEqual(13);
    }

    const all = scripts
      .list()
      .map((d) => d.id)
      .filter((id) => id.startsWith('messages/'))
      .sort();
    expect(all).toHaveLength(12);
    const inboxScripts = all.filter((id) => !['messages/broadcast', 'messages/recent-broadcasts'].includes(id));
    for (const acc of accounts) expect(`${acc}: ${[...(ran.get(acc) ?? [])].sort().join(' ')}`).toBe(`${acc}: ${inboxScripts.join(' ')}`);
    expect([...(ran.get('bc') ?? [])].sort()).toEqual(['messages/broadcast', 'messages/recent-broadcasts']);
    // The broadcast stream is one slot, on one master.
    const [stream] = broadcastKeys(keyBuilder);
    const holders = await Promise.all(
      raw.map((r) =>
        r.zcard(stream).then(
          (n) => n,
          () => -1,
        ),
      ),
    );
    expect(holders.filter((n) => n === 1)).toHaveLength(1);
  });

  it('a broadcast to all is taken in once by accounts on every master, with concurrent pulls', async () => {
    const { broadcastId } = await svc.broadcast({ title: 'Second', content: 'Everyone again', audience: 'all' });
    const pulls = await Promise.all(accounts.flatMap((acc) => [1, 2, 3].map(() => svc.pull(acc, undefined, 50))));
    expect(pulls.map((p) => p.messages.filter((m) => m.broadcastId === broadcastId).length)).toEqual(pulls.map(() => 1));
    const newcomer = (await svc.pull('cluster-newcomer', undefined, 50)).messages.map((m) => m.title);
    expect(newcomer).toEqual(['For everyone', 'Second']);
  });

  it('delivers a reminder for an unfinished action to an account on each master', async () => {
    const pending = t.app.get(PendingActionsService);
    const started = await Promise.all(accounts.map((acc) => pending.start({ accountId: acc, bizType: 'PASSWORD_RECOVERY' })));
    const reminders = async (acc: string) => (await svc.pull(acc, undefined, 50)).messages.filter((m) => m.bizType === 'REMINDER_PASSWORD_RECOVERY');
    await waitUntil('a reminder in every account', async () => (await Promise.all(accounts.map(reminders))).every((r) => r.length > 0), 10_000);
    await new Promise((r) => setTimeout(r, 300));
    const got = await Promise.all(accounts.map(reminders));
    expect(got.map((r) => r.map((m) => m.outerBizId))).toEqual(started.map((s) => [s.actionId]));
    expect(await Promise.all(accounts.map((acc) => pending.finish({ accountId: acc, bizType: 'PASSWORD_RECOVERY' })))).toEqual([false, false, false]);
  });
});
