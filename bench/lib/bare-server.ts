import Redis, { type RedisOptions } from 'ioredis';
import { DEFAULT_LUA_DIR, loadAllScripts, type ScriptDefinition } from '../../src/platform/scripts/script-loader';
import { coalesceCommandWrites } from '../../src/platform/redis/coalesce-writes';
import { evalScript } from '../../src/platform/scripts/eval-script';

/**
 * How a baseline server's connection sends its commands. `coalesce` (the default): as the service's command
 * connection does (auto-pipelining off, the writes of one event-loop turn in one syscall: src/platform/redis/coalesce-writes.ts);
 * `plain`: one write per command; `autopipeline`: ioredis auto-pipelining. BASELINE_REDIS_WRITES picks one, to A/B them.
 */
export type RedisWrites = 'coalesce' | 'plain' | 'autopipeline';

export function redisWritesFromEnv(): RedisWrites {
  const v = process.env.BASELINE_REDIS_WRITES ?? 'coalesce';
  if (v !== 'coalesce' && v !== 'plain' && v !== 'autopipeline') throw new Error(`BASELINE_REDIS_WRITES must be coalesce, plain or autopipeline, not ${v}`);
  return v;
}

/** One script as an ioredis command: EVALSHA, and EVAL when Redis answers NOSCRIPT. Keys first, then arguments. */
export type ScriptCommand = (...keysAndArgs: (string | number | Buffer)[]) => Promise<unknown>;

export interface ScriptRedis {
  redis: Redis;
  scripts: ReadonlyMap<string, ScriptDefinition>;
  /** The command of script `id` (e.g. `messages/write`), bound to the connection. */
  command(id: string): ScriptCommand;
  /** `ScriptRegistry.run`'s contract, without the service's error mapping: keys, then arguments. */
  run<T = unknown>(id: string, keys: readonly string[], args?: readonly (string | number | Buffer)[]): Promise<T>;
}

/**
 * The baseline servers' Redis: one ioredis connection to `url` with `options`, and every script
 * under `luaDir` (default: LUA_DIR, else the project's lua/) loaded by the service's own loader
 * (`loadAllScripts`: same source, includes inlined, same SHA), `SCRIPT LOAD`ed and checked by
 * their SHA, and called the way the service calls them (`evalScript`: EVALSHA, EVAL on NOSCRIPT).
 * `writes` overrides the options' auto-pipelining (see RedisWrites).
 */
export async function connectScriptRedis(
  url: string,
  options: RedisOptions,
  luaDir = process.env.LUA_DIR ?? DEFAULT_LUA_DIR,
  writes: RedisWrites = redisWritesFromEnv(),
): Promise<ScriptRedis> {
  const scripts = loadAllScripts(luaDir);
  const redis = new Redis(url, { ...options, enableAutoPipelining: writes === 'autopipeline', lazyConnect: true });
  if (writes === 'coalesce') coalesceCommandWrites(redis);
  await redis.connect();
  const shas = await Promise.all([...scripts.values()].map((def) => redis.script('LOAD', def.source)));
  [...scripts.values()].forEach((def, i) => {
    if (shas[i] !== def.sha) throw new Error(`script ${def.id} loaded with sha ${String(shas[i])}, expected ${def.sha}`);
  });
  const command = (id: string): ScriptCommand => {
    const def = scripts.get(id);
    if (!def) throw new Error(`no script ${id} under ${luaDir}`);
    return (...keysAndArgs) => evalScript(redis, def, keysAndArgs.slice(0, def.numberOfKeys) as string[], keysAndArgs.slice(def.numberOfKeys));
  };
  const commands = new Map([...scripts.keys()].map((id) => [id, command(id)]));
  return {
    redis,
    scripts,
    command,
    run: <T>(id: string, keys: readonly string[], args: readonly (string | number | Buffer)[] = []) => {
      const cmd = commands.get(id);
      if (!cmd) return Promise.reject(new Error(`no script ${id} under ${luaDir}`));
      return cmd(...keys, ...args) as Promise<T>;
    },
  };
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
