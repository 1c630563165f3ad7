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
