import type Redis from 'ioredis';
import type { AppConfig } from '../../src/platform/config/app-config';
import { visitsKey } from '../../src/platform/diagnostics/diagnostics.keys';
import { KeyBuilder } from '../../src/platform/redis/key-builder';
import { connectScriptRedis } from './bare-server';

/** Runs lua/platform/diagnostics/touch-1.lua for one key: `[count, serverTimeMs]`. */
export type TouchCommand = (key: string, ttlMs: number) => Promise<[number, number]>;

/**
 * The baseline servers' Redis: one ioredis connection that sends its commands as the service's command
 * connection does (by default: see RedisWrites in bare-server.ts), and the exact touch script the
 * service runs, loaded and checked by sha.
 */
export async function connectTouchRedis(): Promise<{ redis: Redis; touch: TouchCommand }> {
  const { redis, command } = await connectScriptRedis(process.env.REDIS_URL ?? 'redis://127.0.0.1:6379', {
    maxRetriesPerRequest: 1,
    commandTimeout: 1000,
  });
  return { redis, touch: command('diagnostics/touch') as TouchCommand };
}

/** The body both baselines accept: the account comes from the body (no auth). */
export interface TouchBody {
  account: string;
  label: string;
  ttlSeconds?: number;
}

/** The service's key builder, one per prefix (the baselines use one prefix). */
const builders = new Map<string, KeyBuilder>();
const builderOf = (prefix: string) => {
  let b = builders.get(prefix);
  if (!b) builders.set(prefix, (b = new KeyBuilder({ redis: { keyPrefix: prefix } } as AppConfig)));
  return b;
};

/** The baselines' handler: the same key and JSON as the service's POST /diagnostics/touch. */
export async function answerTouch(touch: TouchCommand, prefix: string, body: TouchBody) {
  const { account, label, ttlSeconds } = body;
  const [count, serverTimeMs] = await touch(visitsKey(builderOf(prefix), account, label), (ttlSeconds ?? 3600) * 1000);
  return { accountId: account, label, count, serverTimeMs };
}
