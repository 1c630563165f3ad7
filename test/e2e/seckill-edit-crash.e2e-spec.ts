import type { AppConfig } from '../../src/platform/config/app-config';
import { KeyBuilder } from '../../src/platform/redis/key-builder';
import { SPREAD_TAGS } from '../../src/platform/redis/slot-tags';
import { SHARD_PARTS, shardKeys } from '../../src/features/seckill/seckill.keys';
import { rawConnection, waitUntil } from '../harness/redis-process';
import { randomPrefix } from '../harness/redis-server';
import { activityBody, activityId } from '../support/seckill';
import { diedAtCrashPoint, type ServiceProcess, useServicesOnOwnRedis } from '../support/service-process';
import { CREDS } from '../support/test-app';

/**
 * An edit before the start that changes a product's shard count moves every shard's tag (spread tags: shard k of n),
 * so it loads the new shards, saves the record, then deletes the old shards. The built service (dist/main.js: run
 * `npx nest build` first) killed at each boundary, then a fresh instance on the same Redis:
 * - before the record is saved: the old record names the old shards, all still there (the pre-sale check is clean);
 *   the edit retried goes through, and the old shards are gone;
 * - after it is saved, before the old shards are deleted: the record names the new shards, all loaded; the old ones
 *   are left to expire with the sale's keys.
 */
const ADMIN = { 'x-admin-key': CREDS.adminKey, 'content-type': 'application/json' };

const ctx = useServicesOnOwnRedis();
const start = (prefix: string, crashAt?: string) => ctx.start(prefix, crashAt);

const json = async (r: Response) => ({ status: r.status, body: (await r.json().catch(() => ({}))) as Record<string, unknown> });
const send = (svc: ServiceProcess, method: string, path: string, body?: unknown) =>
  svc.call(path, { method, headers: ADMIN, ...(body ? { body: JSON.stringify(body) } : {}) }).then(json);
const check = async (svc: ServiceProcess, id: string) => (await send(svc, 'GET', `/admin/seckill/activities/${id}/check`)).body;

/** The stock keys of product p's shards (spread tags) of a count, and whether each exists, with its TTL. */
async function stockKeys(prefix: string, id: string, shards: number) {
  const keys = new KeyBuilder({ redis: { keyPrefix: prefix } } as AppConfig);
  const raw = rawConnection(ctx.redis);
  try {
    return await Promise.all(
      Array.from({ length: shards }, async (_, k) => {
        const all = shardKeys(keys, id, 'p', k, { shards, tags: SPREAD_TAGS });
        return { exists: await raw.exists(all.stock), ttl: await raw.pttl(all.stock), parts: SHARD_PARTS.length };
      }),
    );
  } finally {
    raw.disconnect();
  }
}

/** A sale starting in an hour (2 shards of product p), edited to 3 shards by an instance that dies at `point`. */
async function editKilledAt(point: string) {
  const prefix = randomPrefix();
  const doomed = await start(prefix, point);
  const id = activityId('edit');
  const startsAt = new Date(Date.now() + 3600_000).toISOString();
  const endsAt = new Date(Date.now() + 7200_000).toISOString();
  expect(
    (await send(doomed, 'POST', '/admin/seckill/activities', activityBody(id, [{ productId: 'p', stock: 6, shards: 2 }], { startsAt, endsAt }))).status,
  ).toBe(201);
  const edited = activityBody(id, [{ productId: 'p', stock: 6, shards: 3 }], { startsAt, endsAt });
  await send(doomed, 'PUT', `/admin/seckill/activities/${id}`, edited).catch(() => null);
  await diedAtCrashPoint(doomed, point);
  return { prefix, id, edited, fresh: await start(prefix) };
}

describe('seckill: an edit that moves the shards, killed at each step boundary, converges', () => {
  it('seckill.edit.before-save: the old record’s shards are all there; the retried edit goes through and drops them', async () => {
    const { prefix, id, edited, fresh } = await editKilledAt('seckill.edit.before-save');
    const stock = await send(fresh, 'GET', `/admin/seckill/activities/${id}`);
    expect((stock.body.products as { shards?: number; available: number }[])[0]).toMatchObject({ available: 6 });
    expect(await check(fresh, id)).toMatchObject({ ok: true, problems: [] });
    expect((await stockKeys(prefix, id, 2)).map((s) => s.exists)).toEqual([1, 1]);
    // Retried once the dead instance's activity lock has lapsed (its 120 s lease: the test deletes it instead of waiting).
    const raw = rawConnection(ctx.redis);
    const locks = await raw.keys(`${prefix}:locks:*${id}*`);
    expect(locks.length).toBeGreaterThan(0);
    await raw.del(...locks);
    raw.disconnect();
    await waitUntil('the retried edit', async () => (await send(fresh, 'PUT', `/admin/seckill/activities/${id}`, edited)).status === 200, 15_000, 200);
    expect(await check(fresh, id)).toMatchObject({ ok: true, problems: [] });
    expect((await stockKeys(prefix, id, 3)).map((s) => s.exists)).toEqual([1, 1, 1]);
    expect((await stockKeys(prefix, id, 2)).map((s) => s.exists)).toEqual([0, 0]);
  }, 60_000);

  it('seckill.edit.after-save: the record names the new shards, all loaded; the old ones expire with the sale', async () => {
    const { prefix, id, fresh } = await editKilledAt('seckill.edit.after-save');
    expect(await check(fresh, id)).toMatchObject({ ok: true, problems: [] });
    expect((await stockKeys(prefix, id, 3)).map((s) => s.exists)).toEqual([1, 1, 1]);
    const old = await stockKeys(prefix, id, 2);
    // Left over, but with the sale's expiry (its end + SECKILL_LIVE_RETENTION_SECONDS): nothing reads them.
    for (const s of old) expect(s.exists === 0 || s.ttl > 0).toBe(true);
  }, 60_000);
});
