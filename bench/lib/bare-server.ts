/** What the baseline (floor) servers share: Redis with the service's scripts, listen-until-signal. */
import Redis, { type RedisOptions } from 'ioredis';
import { coalesceCommandWrites } from '../../src/platform/redis/coalesce-writes';
import { evalScript } from '../../src/platform/scripts/eval-script';
import { DEFAULT_LUA_DIR, loadAllScripts } from '../../src/platform/scripts/script-loader';

/**
 * How a baseline server's connection sends its commands. `coalesce` (the default): as the service's command
 * connection does (the writes of one event-loop turn in one syscall: src/platform/redis/coalesce-writes.ts);
 * `plain`: one write per command; `autopipeline`: ioredis auto-pipelining. BASELINE_REDIS_WRITES picks one, to A/B them.
 */
export function redisWritesFromEnv(): 'coalesce' | 'plain' | 'autopipeline' {
  const v = process.env.BASELINE_REDIS_WRITES ?? 'coalesce';
  if (v !== 'coalesce' && v !== 'plain' && v !== 'autopipeline') throw new Error(`BASELINE_REDIS_WRITES must be coalesce, plain or autopipeline, not ${v}`);
  return v;
}

/** One script as an ioredis command: EVALSHA, and EVAL when Redis answers NOSCRIPT. Keys first, then arguments. */
export type ScriptCommand = (...keysAndArgs: (string | number | Buffer)[]) => Promise<unknown>;

/**
 * The baseline servers' Redis: one connection to `url`, and every script under LUA_DIR (else the project's lua/) loaded
 * by the service's own loader (same source, includes inlined, same SHA), checked by SHA and called as the service calls
 * them (`evalScript`). `command(id)` is script `id` bound to the connection; `run` is ScriptRegistry.run's contract.
 */
export async function connectScriptRedis(url: string, options: RedisOptions, luaDir = process.env.LUA_DIR ?? DEFAULT_LUA_DIR) {
  const scripts = loadAllScripts(luaDir);
  const writes = redisWritesFromEnv();
  const redis = new Redis(url, { ...options, enableAutoPipelining: writes === 'autopipeline', lazyConnect: true });
  if (writes === 'coalesce') coalesceCommandWrites(redis);
  await redis.connect();
  for (const def of scripts.values()) {
    const sha = await redis.script('LOAD', def.source);
    if (sha !== def.sha) throw new Error(`script ${def.id} loaded with sha ${String(sha)}, expected ${def.sha}`);
  }
  const command = (id: string): ScriptCommand => {
    const def = scripts.get(id);
    if (!def) throw new Error(`no script ${id} under ${luaDir}`);
    return (...kv) => evalScript(redis, def, kv.slice(0, def.numberOfKeys) as string[], kv.slice(def.numberOfKeys));
  };
  const run = <T = unknown>(id: string, keys: readonly string[], args: readonly (string | number | Buffer)[] = []) =>
    Promise.resolve().then(() => command(id)(...keys, ...args) as Promise<T>);
  return { redis, scripts, command, run };
}

/** Listens on 127.0.0.1:`port`; on SIGTERM/SIGINT closes the server and Redis and exits 0. */
export async function serveUntilSignal(
  name: string,
  port: number,
  server: { listen(opts: { port: number; host: string }): Promise<unknown>; close(): Promise<unknown> },
  redis: Redis,
): Promise<void> {
  const close = () => void server.close().then(() => (redis.disconnect(), process.exit(0)));
  process.once('SIGTERM', close);
  process.once('SIGINT', close);
  await server.listen({ port, host: '127.0.0.1' });
  console.error(`${name} listening on 127.0.0.1:${port}`);
}
