/**
 * The rows of `npm run bench -- locks` behind one interface, so every row runs the same loop:
 *   engine           LockService (src/engines/locks), one Nest application context per client (config, metrics,
 *                    Redis, scripts, the lock module; no HTTP): its own command and pub/sub connections;
 *   redlock          redlock 5 with one Redis node (the ioredis-compatible beta), at its default retry and a what-if at 10 ms;
 *   redis-semaphore  its Mutex (SET NX PX, polls every retryInterval);
 *   fenced-floor     not a lock: the cheapest acquire that returns a fencing token (a string key and the engine's
 *                    fencing counter in one script, the peers' release in another); uncontended section only.
 * Every client has its own connection(s) with the service's connection options, so the rows differ only in the library.
 */
import './engine-bench';
import { Module } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import Redis, { type RedisOptions } from 'ioredis';
import { randomUUID } from 'node:crypto';
import { Mutex } from 'redis-semaphore';
import Redlock from 'redlock';
import { LockService, LocksModule, locksConfig } from '../../src/engines/locks';
import { ConfigModule } from '../../src/platform/config/config.module';
import { loadConfig } from '../../src/platform/config/load-config';
import { MetricsModule } from '../../src/platform/metrics/metrics.module';
import { standaloneOrSentinelOptions } from '../../src/platform/redis/redis-options';
import { RedisModule } from '../../src/platform/redis/redis.module';
import { RedisService } from '../../src/platform/redis/redis.service';
import { evalScript } from '../../src/platform/scripts/eval-script';
import { ScriptsModule } from '../../src/platform/scripts/scripts.module';

/** Every row: a 10 s lease, and an acquire waits up to 10 s for a held lock. */
export const LEASE_MS = 10_000;
export const WAIT_MS = 10_000;
const PREFIX = 'bench-locks';
/** How long the engine keeps a lock's fencing counter (lock.store). */
export const FENCE_KEEP_MS = 3_600_000;

/** `acquire` takes a name exclusively (waiting up to WAIT_MS) and resolves with its release; `sent`: commands sent so far, every connection. */
export type LockClient = { acquire(name: string): Promise<() => Promise<unknown>>; readonly sent: { n: number }; close(): Promise<void> };

/** A row: `commands` are what its client sends for an acquire + release (INFO commandstats names). */
export type LockLibrary = { id: string; label: string; settings: string; commands: readonly string[]; connect(): Promise<LockClient> };

/** Counts the commands a connection sends (ioredis routes every command through sendCommand). */
function counted<T extends Redis>(conn: T, sent: { n: number }): T {
  const send = conn.sendCommand.bind(conn);
  conn.sendCommand = ((...args: Parameters<Redis['sendCommand']>) => (sent.n++, send(...args))) as Redis['sendCommand'];
  return conn;
}

@Module({})
class LocksBenchRoot {}

const config = (redisUrl: string) => loadConfig({ NODE_ENV: 'test', LOG_LEVEL: 'silent', REDIS_URL: redisUrl, REDIS_KEY_PREFIX: PREFIX });

function engineLibrary(redisUrl: string): LockLibrary {
  const wakeCheckMs = locksConfig.of(config(redisUrl)).wakeCheckMs;
  return {
    id: 'engine',
    label: 'engine: LockService (pub/sub wake-up)',
    commands: ['evalsha', 'eval'],
    settings:
      `acquire(name, {leaseMs: ${LEASE_MS}, waitMs: ${WAIT_MS}}), a fresh owner per acquire, mode write, watchdog on; waiters sleep on the release message ` +
      `and re-check every LOCK_WAKE_CHECK_MS × 0.8–1.2 = ${wakeCheckMs} ms at the latest`,
    async connect() {
      const imports = [ConfigModule.forRoot(config(redisUrl)), MetricsModule, RedisModule, ScriptsModule, LocksModule];
      const app = await NestFactory.createApplicationContext({ module: LocksBenchRoot, imports }, { logger: ['error', 'warn'] });
      const service = app.get(LockService);
      const redis = app.get(RedisService);
      const sent = { n: 0 };
      counted(redis.client as Redis, sent);
      // The pub/sub connection opens at the first wait: counted from then on.
      const subscriber = redis.subscriber.bind(redis);
      redis.subscriber = () => (redis['subscriberConn'] ? subscriber() : counted(subscriber() as Redis, sent));
      await redis.warmUp();
      return {
        acquire: async (name) => {
          const h = await service.acquire(name, { leaseMs: LEASE_MS, waitMs: WAIT_MS });
          return () => h.release();
        },
        sent,
        close: () => app.close(),
      };
    },
  };
}

/** A peer's client: one connection with the service's options, commands counted; `lock` makes its acquire. */
function peer(redisUrl: string, options: RedisOptions, lib: Omit<LockLibrary, 'connect'>, lock: (conn: Redis) => Promise<LockClient['acquire']>): LockLibrary {
  return {
    ...lib,
    async connect() {
      const sent = { n: 0 };
      const conn = counted(new Redis(redisUrl, { ...options, lazyConnect: true, connectionName: 'bench-locks:peer' }), sent);
      conn.on('error', () => undefined);
      await conn.connect();
      return { acquire: await lock(conn), sent, close: async () => conn.disconnect() };
    },
  };
}

/** The peers' key, the shape of the engine's lock hash (`<prefix>:locks:{name}:h`). */
const peerKey = (name: string, suffix: string) => `${PREFIX}:locks:{${name}}:${suffix}`;

function redlockLibrary(redisUrl: string, options: RedisOptions, retryDelay: number, retryJitter: number, id: string): LockLibrary {
  const retryCount = Math.ceil(WAIT_MS / retryDelay);
  const label = `redlock: retry every ${retryDelay} ± ${retryJitter} ms ${id === 'redlock' ? '(default)' : '(what-if)'}`;
  const settings = `new Redlock([client], {retryDelay: ${retryDelay}, retryJitter: ${retryJitter}, retryCount: ${retryCount}, driftFactor: 0.01}); acquire([key], ${LEASE_MS}); lock.release()`;
  return peer(redisUrl, options, { id, label, settings, commands: ['evalsha', 'eval'] }, async (conn) => {
    const redlock = new Redlock([conn], { retryCount, retryDelay, retryJitter, driftFactor: 0.01 });
    return async (name) => {
      const lock = await redlock.acquire([peerKey(name, 'rl')], LEASE_MS);
      return () => lock.release();
    };
  });
}

function semaphoreLibrary(redisUrl: string, options: RedisOptions): LockLibrary {
  const settings = `new Mutex(client, key, {lockTimeout: ${LEASE_MS}, acquireTimeout: ${WAIT_MS}, retryInterval: 10}) per acquire; acquire(); release()`;
  const lib = { id: 'redis-semaphore', label: 'redis-semaphore Mutex: retry every 10 ms (default)', settings, commands: ['set', 'evalsha', 'eval'] };
  return peer(redisUrl, options, lib, async (conn) => async (name) => {
    const m = new Mutex(conn, peerKey(name, 'sem'), { lockTimeout: LEASE_MS, acquireTimeout: WAIT_MS, retryInterval: 10 });
    await m.acquire();
    return () => m.release();
  });
}

/** TIME; SET key owner NX PX; the fencing counter with its clock floor (the token never goes back). KEYS: lock, fence; ARGV: owner, lease, keep. */
export const FENCED_ACQUIRE_LUA =
  "local t = redis.call('TIME') local now = t[1] .. string.sub('00000' .. t[2], -6) " +
  "if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) == false then return 0 end " +
  "local prev = redis.call('SET', KEYS[2], now, 'PX', ARGV[3], 'GET') " +
  "if prev and tonumber(prev) >= tonumber(now) then now = string.format('%.0f', tonumber(prev) + 1) redis.call('SET', KEYS[2], now, 'PX', ARGV[3]) end " +
  'return now';
/** The peers' release: DEL only if it still holds our owner. */
export const OWNER_RELEASE_LUA = "if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end return 0";

function fencedFloorLibrary(redisUrl: string, options: RedisOptions): LockLibrary {
  const lib = {
    id: 'fenced-floor',
    label: "reference: the cheapest fenced lock (string key + the engine's fencing counter; 2 scripts; not a working engine)",
    commands: ['evalsha', 'eval'],
    settings:
      `acquire: one script (TIME; SET key owner NX PX ${LEASE_MS}; the fencing counter raised above the previous token), release: GET = owner → DEL in a script; ` +
      'EVALSHA as the engine sends them; no waiting, watchdog, reentrancy, read/write or metrics (an acquire of a taken lock throws); uncontended section only',
  };
  return peer(redisUrl, options, lib, async (conn) => {
    const script = async (source: string, numberOfKeys: number) => ({ source, numberOfKeys, sha: String(await conn.script('LOAD', source)) });
    const [acquire, release] = await Promise.all([script(FENCED_ACQUIRE_LUA, 2), script(OWNER_RELEASE_LUA, 1)]);
    const instance = randomUUID().slice(0, 8);
    return async (name) => {
      const [owner, key] = [`${instance}:${randomUUID()}`, peerKey(name, 'ff')];
      if ((await evalScript(conn, acquire, [key, peerKey(name, 'ff-fence')], [owner, LEASE_MS, FENCE_KEEP_MS])) === 0)
        throw new Error(`fenced-floor: ${name} is taken`);
      return () => evalScript(conn, release, [key], [owner]);
    };
  });
}

/** Every row in report order; the peers get the service's own connection options. */
export function allLibraries(redisUrl: string) {
  const options = standaloneOrSentinelOptions(config(redisUrl).redis);
  return {
    options,
    libs: [
      engineLibrary(redisUrl),
      redlockLibrary(redisUrl, options, 200, 100, 'redlock'),
      semaphoreLibrary(redisUrl, options),
      redlockLibrary(redisUrl, options, 10, 5, 'redlock-10ms'),
    ],
    fencedFloor: fencedFloorLibrary(redisUrl, options),
  };
}
