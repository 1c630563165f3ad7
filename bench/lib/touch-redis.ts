import Redis from 'ioredis';
import { DEFAULT_LUA_DIR, loadAllScripts } from '../../src/scripts/script-loader';

/** Runs lua/diagnostics/touch-1.lua for one key: `[count, serverTimeMs]`. */
export type TouchCommand = (key: string, ttlMs: number) => Promise<[number, number]>;

/**
 * The baseline servers' Redis: one ioredis connection with the options that
 * matter for throughput set as in the service (src/redis/redis-options.ts),
 * and the exact touch script the service runs, loaded and checked by sha.
 */
export async function connectTouchRedis(): Promise<{ redis: Redis; touch: TouchCommand }> {
  const luaDir = process.env.LUA_DIR ?? DEFAULT_LUA_DIR;
  const def = loadAllScripts(luaDir).get('diagnostics/touch');
  if (!def) throw new Error(`${luaDir}/diagnostics/touch-1.lua not found`);
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
  return { redis, touch: (redis as unknown as { touch: TouchCommand }).touch.bind(redis) };
}

/** The body both baselines accept: the account comes from the body (no auth). */
export interface TouchBody {
  account: string;
  label: string;
  ttlSeconds?: number;
}

/** The baselines' handler: the same key and JSON as the service's POST /diagnostics/touch. */
export async function answerTouch(touch: TouchCommand, prefix: string, body: TouchBody) {
  const { account, label, ttlSeconds } = body;
  const [count, serverTimeMs] = await touch(`${prefix}:diagnostics:{${account}}:visits:${label}`, (ttlSeconds ?? 3600) * 1000);
  return { accountId: account, label, count, serverTimeMs };
}

/** Listens on 127.0.0.1:`port`; on SIGTERM/SIGINT closes the server and Redis and exits 0. */
export async function serveUntilSignal(
  name: string,
  port: number,
  server: { listen(opts: { port: number; host: string }): Promise<unknown>; close(): Promise<unknown> },
  redis: Redis,
): Promise<void> {
  const close = async () => {
    await server.close();
    redis.disconnect();
    process.exit(0);
  };
  process.once('SIGTERM', () => void close());
  process.once('SIGINT', () => void close());
  await server.listen({ port, host: '127.0.0.1' });
  console.error(`${name} listening on 127.0.0.1:${port}`);
}
