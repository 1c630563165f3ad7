import type Redis from 'ioredis';
import request from 'supertest';
import { reminderKey, settingsKeys } from '../../src/features/close-reminder/close-reminder.keys';
import { KeyBuilder } from '../../src/platform/redis/key-builder';
import { RedisService } from '../../src/platform/redis/redis.service';
import { ScriptArg, ScriptRegistry } from '../../src/platform/scripts/script-registry.service';
import { RedisClusterHandle, startRedisCluster } from '../harness/redis-cluster';
import { rawConnection } from '../harness/redis-process';
import { reminderKit, ReminderKit } from '../support/close-reminder';
import { CREDS, startTestApp, TestApp } from '../support/test-app';

/**
 * Close reminders on a 3-master Redis Cluster: each order's record lives under
 * the order's own tag (spread over the masters), the merchants' settings under
 * one tag; every close-reminder script runs there, and the whole flow works:
 * settings saved, listed and removed; reminders scheduled, sent, cancelled
 * before they are due and withdrawn after.
 */
describe('close reminders on a 3-master cluster', () => {
  let cluster: RedisClusterHandle;
  let raw: Redis[];
  let t: TestApp;
  let k: ReminderKit;
  let keyBuilder: KeyBuilder;
  /** The close-reminder scripts that ran (the real calls still run). */
  const ran = new Set<string>();

  beforeAll(async () => {
    cluster = await startRedisCluster({ masters: 3 });
    raw = cluster.nodes.map((n) => rawConnection(n));
    // startTestApp sets REDIS_URL; an empty value means unset, so the cluster is the only topology.
    t = await startTestApp('', {
      REDIS_CLUSTER_NODES: cluster.envValue,
      REDIS_COMMAND_TIMEOUT_MS: '1000',
      RATE_LIMIT_ENABLED: 'false',
      CHANNEL_LATENCY_MS: '2',
      CLOSE_REMINDER_MIN_LEFT_SECONDS: '10',
    });
    k = reminderKit(t);
    keyBuilder = t.app.get(KeyBuilder);
    const scripts = t.app.get(ScriptRegistry);
    const original = scripts.run.bind(scripts);
    jest.spyOn(scripts, 'run').mockImplementation(((script: string, keys: readonly string[], args: readonly ScriptArg[] = []) => {
      if (script.startsWith('close-reminder/')) ran.add(script);
      return original(script, keys, args);
    }) as ScriptRegistry['run']);
  });

  afterAll(async () => {
    jest.restoreAllMocks();
    await t?.close();
    raw?.forEach((r) => r.disconnect());
    await cluster?.destroy();
  });

  /** The index of the master that holds `key` (-1 when none does). */
  const holderOf = async (key: string) => {
    const slot = Number(await raw[0].cluster('KEYSLOT', key));
    const range = (await raw[0].cluster('SLOTS')).find(([start, end]) => slot >= start && slot <= end)!;
    const i = cluster.nodes.findIndex((n) => n.port === range[2][1]);
    return (await raw[i].exists(key)) === 1 ? i : -1;
  };
  const admin = { 'x-admin-key': CREDS.adminKey };

  it('settings: put, list a page at a time, read and delete', async () => {
    expect(t.app.get(RedisService).isCluster).toBe(true);
    for (const id of ['m_c1', 'm_c2', 'm_c3']) {
      expect((await request(t.server).put(`/admin/close-reminder/merchants/${id}`).set(admin).send({ enabled: true, leadSeconds: 59 })).status).toBe(201);
    }
    const first = await request(t.server).get('/admin/close-reminder/merchants?limit=2').set(admin);
    const second = await request(t.server).get(`/admin/close-reminder/merchants?limit=2&after=${first.body.next}`).set(admin);
    expect([...first.body.items, ...second.body.items].map((i: { merchantId: string }) => i.merchantId)).toEqual(['m_c1', 'm_c2', 'm_c3']);
    expect((await request(t.server).delete('/admin/close-reminder/merchants/m_c3').set(admin)).status).toBe(204);
    expect((await request(t.server).get('/admin/close-reminder/merchants/m_c3').set(admin)).status).toBe(404);
    expect((await request(t.server).get('/admin/close-reminder/merchants').set(admin)).body.items.map((i: { merchantId: string }) => i.merchantId)).toEqual([
      'm_c1',
      'm_c2',
    ]);
    const [hash, index, version] = settingsKeys(keyBuilder);
    const holder = await holderOf(hash);
    expect(holder).toBeGreaterThanOrEqual(0);
    expect([await holderOf(index), await holderOf(version)]).toEqual([holder, holder]);
    expect(ran).toEqual(new Set(['close-reminder/settings-put', 'close-reminder/settings-delete']));
  });

  it('reminders on every master: scheduled, sent, cancelled before due, withdrawn after sent', async () => {
    const ids: string[] = [];
    for (let i = 0; i < 25; i++) ids.push(await k.create(i % 2 ? 'm_c1' : 'm_c2', `p_cl${i}`));
    const payer = (id: string) => `p_cl${ids.indexOf(id)}`;
    // Paid right after creation, well before they are due (one second after): cancelled.
    const early: string[] = [];
    for (let i = 25; i < 30; i++) {
      const id = await k.create('m_c1', `p_cl${i}`);
      ids.push(id);
      early.push(id);
      expect(await k.pay(payer(id), id)).toBe('PAID');
    }

    const sent = await k.settled(ids, 20_000);
    const late = ids.slice(0, 5);
    for (const id of ids.slice(0, 25)) expect(sent.get(id)?.state).toBe('sent');
    await Promise.all(late.map(async (id) => expect(await k.pay(payer(id), id)).toBe('PAID')));
    await k.settled(late, 20_000, (r) => r?.state === 'withdrawn');
    const settled = await k.settled(ids, 5000);

    for (const id of ids) {
      const reminders = (await k.inbox(payer(id))).map((m) => m.outerBizId);
      if (early.includes(id)) expect({ id, state: settled.get(id)?.state, reminders }).toEqual({ id, state: 'cancelled', reminders: [] });
      else if (late.includes(id)) expect({ id, state: settled.get(id)?.state, reminders }).toEqual({ id, state: 'withdrawn', reminders: [] });
      else expect({ id, state: settled.get(id)?.state, reminders }).toEqual({ id, state: 'sent', reminders: [id] });
    }
    const holders = new Set(await Promise.all(ids.map((id) => holderOf(reminderKey(keyBuilder, id)))));
    expect(holders).toEqual(new Set([0, 1, 2]));
    for (const s of ['schedule', 'transition', 'settle']) expect(ran).toContain(`close-reminder/${s}`);
  }, 60_000);
});
