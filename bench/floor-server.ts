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
import Redis from 'ioredis';
import { DEFAULT_LUA_DIR, loadAllScripts } from '../src/scripts/script-loader';

interface TouchBody {
  account: string;
  label: string;
  ttlSeconds?: number;
}

type TouchCommand = (key: string, ttlMs: number) => Promise<[number, number]>;

async function main(): Promise<void> {
  const port = Number(process.env.PORT ?? 3100);
  const prefix = process.env.KEY_PREFIX ?? 'floor';
  const luaDir = process.env.LUA_DIR ?? DEFAULT_LUA_DIR;
  const def = loadAllScripts(luaDir).get('diagnostics/touch');
  if (!def) throw new Error(`${luaDir}/diagnostics/touch-1.lua not found`);

  // The Redis options that matter for throughput match the service's (src/redis/redis-options.ts).
  const redis = new Redis(process.env.REDIS_URL ?? 'redis://127.0.0.1:6379', {
    lazyConnect: true,
    enableAutoPipelining: true,
    maxRetriesPerRequest: 1,
    commandTimeout: 1000,
  });
  redis.defineCommand('touch', { numberOfKeys: def.numberOfKeys, lua: def.source });
  await redis.connect();
  const sha = await redis.script('LOAD', def.source);
  if (sha !== def.sha) throw new Error(`touch script loaded with sha ${String(sha)}, expected ${def.sha}`);
  const touch = (redis as unknown as { touch: TouchCommand }).touch.bind(redis);

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
  console.error(`floor-server listening on 127.0.0.1:${port} (script sha ${def.sha})`);
}

main().catch((err) => {
  console.error('floor-server failed:', err);
  process.exit(1);
});
