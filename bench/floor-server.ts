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
import type Redis from 'ioredis';
import type { AppConfig } from '../src/platform/config/app-config';
import { visitsKey } from '../src/platform/diagnostics/diagnostics.keys';
import { KeyBuilder } from '../src/platform/redis/key-builder';
import { connectScriptRedis, serveUntilSignal } from './lib/bare-server';

/** Runs lua/platform/diagnostics/touch-1.lua for one key: `[count, serverTimeMs]`. */
export type TouchCommand = (key: string, ttlMs: number) => Promise<[number, number]>;

/** The baselines' Redis (this one and bench/nest-minimal-server.ts): the connection and the exact touch script the service runs. */
export async function connectTouchRedis(): Promise<{ redis: Redis; touch: TouchCommand }> {
  const { redis, command } = await connectScriptRedis(process.env.REDIS_URL ?? 'redis://127.0.0.1:6379', { maxRetriesPerRequest: 1, commandTimeout: 1000 });
  return { redis, touch: command('diagnostics/touch') as TouchCommand };
}

/** The body both baselines accept: the account comes from the body (no auth). */
export interface TouchBody {
  account: string;
  label: string;
  ttlSeconds?: number;
}

const builders = new Map<string, KeyBuilder>();

/** The baselines' handler: the same key and JSON as the service's POST /diagnostics/touch. */
export async function answerTouch(touch: TouchCommand, prefix: string, { account, label, ttlSeconds }: TouchBody) {
  if (!builders.has(prefix)) builders.set(prefix, new KeyBuilder({ redis: { keyPrefix: prefix } } as AppConfig));
  const [count, serverTimeMs] = await touch(visitsKey(builders.get(prefix)!, account, label), (ttlSeconds ?? 3600) * 1000);
  return { accountId: account, label, count, serverTimeMs };
}

async function main(): Promise<void> {
  const port = Number(process.env.PORT ?? 3100);
  const prefix = process.env.KEY_PREFIX ?? 'floor';
  const { redis, touch } = await connectTouchRedis();

  const app = Fastify({ logger: false });
  app.post('/diagnostics/touch', (req) => answerTouch(touch, prefix, req.body as TouchBody));
  await serveUntilSignal('floor-server', port, app, redis);
}

if (require.main === module)
  main().catch((err) => {
    console.error('floor-server failed:', err);
    process.exit(1);
  });
