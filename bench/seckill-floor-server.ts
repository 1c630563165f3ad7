/**
 * The floor of the seckill benchmarks: bare Fastify 5 + one ioredis connection (writes coalesced as the service's),
 * no auth, validation, logging, metrics or rate limit; the account comes from the body or the query.
 * - `POST /reserve/:activityId/:productId {account, quantity, requestId}`: the service's reservation id, then its
 *   reserve-5.lua (same SHA) by EVALSHA on shard 0 with the hash tags the service loaded it with. 201 on RESERVED.
 * - `POST /reserve-order/...`: the same with the order id recorded and, on RESERVED, the service's buyer index writes
 *   (HSET, PEXPIREAT NX and GT); the order is stored at its first use, as the service's is.
 * - `GET /products/:activityId?account&page&size`: GET of the page's 16-hex cache key; on a miss, HGET of each
 *   product's `available` and SET … PX 2000.
 * Env: PORT, REDIS_URL, KEY_PREFIX, PRODUCTS (the listed product ids), LUA_DIR.
 */
import { createHash } from 'node:crypto';
import Fastify from 'fastify';
import type { AppConfig } from '../src/platform/config/app-config';
import { newOrderId } from '../src/features/orders';
import { KeyBuilder } from '../src/platform/redis/key-builder';
import { activityKeys, buyerIndexKey, shardKeys, type SaleRecord as ActivityRecord } from '../src/features/seckill';
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
  const app = Fastify({ logger: false });
  type Reserve = { Params: { activityId: string; productId: string }; Body: { account: string; quantity: number; requestId: string } };
  for (const withOrder of [false, true])
    app.post<Reserve>(withOrder ? '/reserve-order/:activityId/:productId' : '/reserve/:activityId/:productId', async (req, reply) => {
      const { activityId, productId } = req.params;
      const { account, quantity, requestId } = req.body;
      const a = await activity(activityId);
      const p = a.products.find((x) => x.productId === productId)!;
      const k = shardKeys(keys, activityId, productId, 0, p);
      const rsvId = rsvIdFor(activityId, productId, account, requestId);
      const orderId = withOrder ? newOrderId(a.merchantId, rsvId) : '';
      const r = (await (withOrder
        ? reserve(k.stock, k.rsv, k.holds, k.claims, k.due, rsvId, account, quantity, 1, a.payWindowMinutes * 60_000, 0, '', '', orderId)
        : reserve(k.stock, k.rsv, k.holds, k.claims, k.due, rsvId, account, quantity, 1, 60_000, 0))) as unknown[];
      if (r[0] !== 'RESERVED' || !withOrder) {
        void reply.status(r[0] === 'RESERVED' ? 201 : 409);
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
    });
  const shard = async (id: string, productId: string) =>
    shardKeys(
      keys,
      id,
      productId,
      0,
      (await activity(id)).products.find((x) => x.productId === productId)!,
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
