/**
 * The floor of the seckill benchmark: the least a Node HTTP server can do for a flash-sale reservation and a
 * cached listing page. Bare Fastify 5 + one ioredis connection (writes coalesced as on the service's command
 * connection: see RedisWrites in lib/bare-server.ts), no auth, no validation, no logging, no metrics, no rate
 * limit, no order. The account comes from the body or the query because there is no token to take it from.
 *
 * - `POST /reserve/:activityId/:productId {account, quantity, requestId}`: the reservation id the service
 *   derives (sha256 of activity, product, account, request id), then the very same reserve script as the
 *   service (lua/features/seckill/reserve-5.lua, same source and SHA, loaded by the service's loader) by EVALSHA on the
 *   same keys of the same product (shard 0 with the hash tags the service loaded it with: src/features/seckill/seckill.keys.ts),
 *   eligible, no fall-over. 201 with the script's reply on RESERVED, 409 with it otherwise. One Redis call.
 * - `POST /reserve-order/:activityId/:productId {account, quantity, requestId}`: the same work as the service's
 *   reservation, without the service around it: the same reserve script with the order id it records, then on
 *   RESERVED the same buyer index writes (one HSET of the location and of the order id's entry, PEXPIREAT NX and
 *   GT), all on the service's keys (so the service's safety net and pending orders see these reservations as its
 *   own). The order itself is stored at its first use, as the service's is: not on this path. The activity's
 *   configuration is read once (GET) and kept. One script and three commands per reservation.
 * - `GET /products/:activityId?account&page&size`: GET of the page's cache key (the 16-hex md5 of the same
 *   inputs); on a miss, HGET of `available` of every product's shard 0 and SET … PX 2000 of the page. One Redis
 *   call on a hit.
 *
 * Env: PORT, REDIS_URL, KEY_PREFIX (the service's REDIS_KEY_PREFIX), PRODUCTS (comma-separated product ids of
 * the listed activity), LUA_DIR (default: the project's lua/).
 * Started by bench/seckill.ts in its own process: `node --import tsx bench/seckill-floor-server.ts`.
 */
import { createHash } from 'node:crypto';
import Fastify from 'fastify';
import type { AppConfig } from '../src/platform/config/app-config';
import { newOrderId } from '../src/features/orders/order.keys';
import { KeyBuilder } from '../src/platform/redis/key-builder';
import { activityKeys, buyerIndexKey, shardKeys } from '../src/features/seckill/seckill.keys';
import type { ActivityRecord } from '../src/features/seckill/seckill.types';
import { connectScriptRedis, serveUntilSignal } from './lib/bare-server';

const md5_16 = (s: string) => createHash('md5').update(s).digest('hex').slice(8, 24);
const rsvIdFor = (a: string, p: string, account: string, requestId: string) =>
  `sk_${createHash('sha256').update(`${a}\n${p}\n${account}\n${requestId}`).digest('hex').slice(0, 24)}`;

async function main(): Promise<void> {
  const port = Number(process.env.PORT ?? 3100);
  const prefix = process.env.KEY_PREFIX ?? 'floor';
  const products = (process.env.PRODUCTS ?? '').split(',').filter(Boolean);
  const { redis, command } = await connectScriptRedis(process.env.REDIS_URL ?? 'redis://127.0.0.1:6379', { maxRetriesPerRequest: 1 });
  const reserve = command('seckill/reserve');
  const keys = new KeyBuilder({ redis: { keyPrefix: prefix } } as AppConfig);
  // The service's default unless the bench sets it (SECKILL_LIVE_RETENTION_SECONDS).
  const liveRetentionMs = Number(process.env.SECKILL_LIVE_RETENTION_SECONDS ?? 7 * 86_400) * 1000;
  const activities = new Map<string, Promise<ActivityRecord>>();
  const activity = (id: string) => {
    let a = activities.get(id);
    if (!a) {
      a = redis.get(activityKeys(keys, id).config).then((raw) => JSON.parse(raw!) as ActivityRecord);
      activities.set(id, a);
    }
    return a;
  };
  // Shard 0 of a product, with the placement (hash tags) the service loaded it with.
  const shard = async (id: string, productId: string) =>
    shardKeys(
      keys,
      id,
      productId,
      0,
      (await activity(id)).products.find((x) => x.productId === productId)!,
    );

  const app = Fastify({ logger: false });
  app.post<{ Params: { activityId: string; productId: string }; Body: { account: string; quantity: number; requestId: string } }>(
    '/reserve/:activityId/:productId',
    async (req, reply) => {
      const { activityId, productId } = req.params;
      const { account, quantity, requestId } = req.body;
      const k = await shard(activityId, productId);
      const r = (await reserve(
        k.stock,
        k.rsv,
        k.holds,
        k.claims,
        k.due,
        rsvIdFor(activityId, productId, account, requestId),
        account,
        quantity,
        1,
        60_000,
        0,
      )) as unknown[];
      void reply.status(r[0] === 'RESERVED' ? 201 : 409);
      return { outcome: r[0], detail: r.slice(1) };
    },
  );
  app.post<{ Params: { activityId: string; productId: string }; Body: { account: string; quantity: number; requestId: string } }>(
    '/reserve-order/:activityId/:productId',
    async (req, reply) => {
      const { activityId, productId } = req.params;
      const { account, quantity, requestId } = req.body;
      const a = await activity(activityId);
      const p = a.products.find((x) => x.productId === productId)!;
      const k = shardKeys(keys, activityId, productId, 0, p);
      const rsvId = rsvIdFor(activityId, productId, account, requestId);
      const payWindowMs = a.payWindowMinutes * 60_000;
      const orderId = newOrderId(a.merchantId, rsvId);
      const r = (await reserve(k.stock, k.rsv, k.holds, k.claims, k.due, rsvId, account, quantity, 1, payWindowMs, 0, '', '', orderId)) as unknown[];
      if (r[0] !== 'RESERVED') {
        void reply.status(409);
        return { outcome: r[0], detail: r.slice(1) };
      }
      const index = buyerIndexKey(keys, account);
      const keepUntil = a.endsAt + liveRetentionMs;
      const location = JSON.stringify({ activityId, productId, shard: 0, home: 0, requestId, at: Date.now() });
      await Promise.all([
        redis.hset(index, rsvId, location, `o:${orderId}`, rsvId),
        redis.pexpireat(index, keepUntil, 'NX'),
        redis.pexpireat(index, keepUntil, 'GT'),
      ]);
      void reply.status(201);
      return { reservationId: rsvId, orderId, amount: p.price * quantity, currency: p.currency, expiresAt: r[1], state: 'RESERVED' };
    },
  );
  app.get<{ Params: { activityId: string }; Querystring: { account: string; page?: string; size?: string } }>('/products/:activityId', async (req, reply) => {
    const { activityId } = req.params;
    const page = Number(req.query.page ?? 1);
    const size = Number(req.query.size ?? 8);
    const key = `${prefix}:cache:floor:${md5_16(JSON.stringify([req.query.account, activityId, 'products', page, size]))}`;
    const hit = await redis.get(key);
    void reply.header('content-type', 'application/json; charset=utf-8');
    if (hit !== null) return hit;
    const shown = products.slice((page - 1) * size, page * size);
    const available = await Promise.all(shown.map(async (p) => redis.hget((await shard(activityId, p)).stock, 'available')));
    const body = JSON.stringify({
      activityId,
      page,
      size,
      items: shown.map((p, i) => ({ productId: p, available: Number(available[i] ?? 0), soldOut: Number(available[i] ?? 0) <= 0 })),
    });
    await redis.set(key, body, 'PX', 2000);
    return body;
  });
  await serveUntilSignal('seckill-floor-server', port, app, redis);
}

main().catch((err) => {
  console.error('seckill-floor-server failed:', err);
  process.exit(1);
});
