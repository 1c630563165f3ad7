/**
 * The "floor" of the http-floor benchmark: the least a Node HTTP server can do
 * for POST /diagnostics/touch. Bare Fastify 5 + ioredis, one route that parses
 * the JSON body, runs the very same Lua script as the service (same source,
 * includes inlined by the service's own loader, same SHA) by EVALSHA as the
 * service sends it (`evalScript`, writes coalesced as on the service's command connection:
 * see redisWritesFromEnv in lib/bare-server.ts), and returns the same JSON shape. No auth, no validation, no
 * logging, no metrics, no rate limit. The account comes from the body because
 * there is no token to take it from.
 *
 * Env: PORT, REDIS_URL, KEY_PREFIX (default `floor`), LUA_DIR (default: the project's lua/).
 * Started by bench/http-floor.ts in its own process: `node --import tsx bench/floor-server.ts`.
 */
import Fastify from 'fastify';
import { answerTouch, connectTouchRedis, serveUntilSignal, type TouchBody } from './lib/bare-server';

async function main(): Promise<void> {
  const port = Number(process.env.PORT ?? 3100);
  const prefix = process.env.KEY_PREFIX ?? 'floor';
  const { redis, touch } = await connectTouchRedis();

  const app = Fastify({ logger: false });
  app.post('/diagnostics/touch', (req) => answerTouch(touch, prefix, req.body as TouchBody));
  await serveUntilSignal('floor-server', port, app, redis);
}

main().catch((err) => {
  console.error('floor-server failed:', err);
  process.exit(1);
});
