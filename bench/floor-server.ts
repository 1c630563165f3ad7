/**
 * The "floor" of the http-floor benchmark: the least a Node HTTP server can do
 * for POST /diagnostics/touch. Bare Fastify 5 + ioredis, one route that parses
 * the JSON body, runs the very same Lua script as the service (same source,
 * includes inlined by the service's own loader, same SHA) by EVALSHA through
 * `defineCommand`, and returns the same JSON shape. No auth, no validation, no
 * logging, no metrics, no rate limit. The account comes from the body because
 * there is no token to take it from.
 *
 * Env: PORT, REDIS_URL, KEY_PREFIX (default `floor`), LUA_DIR (default: the project's lua/).
 * Started by bench/http-floor.ts in its own process: `node --import tsx bench/floor-server.ts`.
 */
import Fastify from 'fastify';
import { connectTouchRedis } from './lib/touch-redis';

interface TouchBody {
  account: string;
  label: string;
  ttlSeconds?: number;
}

async function main(): Promise<void> {
  const port = Number(process.env.PORT ?? 3100);
  const prefix = process.env.KEY_PREFIX ?? 'floor';
  const { redis, touch } = await connectTouchRedis();

  const app = Fastify({ logger: false });
  app.post('/diagnostics/touch', async (req) => {
    const { account, label, ttlSeconds } = req.body as TouchBody;
    const [count, serverTimeMs] = await touch(`${prefix}:diagnostics:{${account}}:visits:${label}`, (ttlSeconds ?? 3600) * 1000);
    return { accountId: account, label, count, serverTimeMs };
  });

  const close = async () => {
    await app.close();
    redis.disconnect();
    process.exit(0);
  };
  process.once('SIGTERM', () => void close());
  process.once('SIGINT', () => void close());

  await app.listen({ port, host: '127.0.0.1' });
  console.error(`floor-server listening on 127.0.0.1:${port}`);
}

main().catch((err) => {
  console.error('floor-server failed:', err);
  process.exit(1);
});
