/**
 * The lock libraries of `npm run bench -- locks` behind one small interface, so every row of the
 * benchmark runs the same loop:
 *
 *   engine          LockService from a build (dist/), in its own Nest application context (config,
 *                   metrics, Redis connections, script registry, the lock module; no HTTP). One
 *                   client = one context = its own command and pub/sub connections.
 *   redlock         redlock 5 (beta; the ioredis-compatible line) with one Redis "node".
 *   redis-semaphore redis-semaphore's Mutex (SET NX PX, then polls every retryInterval).
 *   fenced-floor    not a library: the cheapest lock that returns a fencing token (a string key and
 *                   the engine's fencing counter, two scripts), a reference row for the uncontended
 *                   section only (it never waits, so it cannot take part in a hand-off).
 *
 * Every client has its own ioredis connection(s) with the service's own connection options (from
 * the same build: no auto-pipelining, offline queue off), so the rows differ only in the library.
 */
import { NestFactory } from '@nestjs/core';
import { Module } from '@nestjs/common';
import Redis, { type RedisOptions } from 'ioredis';
import { randomUUID } from 'node:crypto';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { Mutex } from 'redis-semaphore';
import Redlock from 'redlock';
import type { LockService } from '../../src/engines/locks/lock.service';
import { evalScript } from '../../src/platform/scripts/eval-script';
import { requireFromBuild, ROOT } from './full-stack';
import { FENCE_KEEP_MS, FENCED_STRING_ACQUIRE_LUA, OWNER_RELEASE_LUA } from './locks-lua';

/** Every row: a 10 s lease, and an acquire waits up to 10 s for a held lock. */
export const LEASE_MS = 10_000;
export const WAIT_MS = 10_000;
/** Key prefix of the engine (REDIS_KEY_PREFIX); the peers' keys are built to the same shape. */
export const KEY_PREFIX = 'bench-locks';

/** Releases the hold it was returned with. */
export type Release = () => Promise<void>;

export interface LockClient {
  /** Takes `name` exclusively (lease LEASE_MS), waiting up to WAIT_MS; rejects when the wait runs out. */
  acquire(name: string): Promise<Release>;
  /** Commands this client has sent to Redis so far (every connection it owns, pub/sub included). */
  readonly requests: number;
  close(): Promise<void>;
}

export interface LockLibrary {
  id: string;
  label: string;
  /** The library's settings in this benchmark, for the report. */
  settings: string;
  /**
   * The commands its clients send for an acquire + release (INFO commandstats names). Commands a
   * script runs are listed there too; these are the ones the client itself sends.
   */
  commands: readonly string[];
  /** A new client with its own connections. */
  connect(): Promise<LockClient>;
}

/** Counts the commands a connection sends (ioredis routes every command, scripts included, through sendCommand). */
function countCommands(conn: Redis, onCommand: () => void): void {
  const send = conn.sendCommand.bind(conn);
  conn.sendCommand = ((...args: Parameters<Redis['sendCommand']>) => {
    onCommand();
    return send(...args);
  }) as Redis['sendCommand'];
}

/** Loaded once per build: what every engine client needs. */
interface EngineBuild {
  config: ReturnType<typeof import('../../src/platform/config/load-config').loadConfig>;
  /** The lock engine's settings (its config slice). */
  locks: import('../../src/engines/locks/locks.config').LocksConfig;
  redisOptions: RedisOptions;
  modules: {
    ConfigModule: typeof import('../../src/platform/config/config.module').ConfigModule;
    MetricsModule: typeof import('../../src/platform/metrics/metrics.module').MetricsModule;
    RedisModule: typeof import('../../src/platform/redis/redis.module').RedisModule;
    /** The build's scripts module when the script registry has its own (else RedisModule provides it). */
    ScriptsModule?: unknown;
  };
  RedisService: typeof import('../../src/platform/redis/redis.service').RedisService;
  LockService: typeof import('../../src/engines/locks/lock.service').LockService;
  /** The build's lock module when it has one; else LockService and LockMetrics are provided directly. */
  lockModule?: unknown;
  LockMetrics?: unknown;
}

/** The root module of an engine client; its imports and providers come with each context (forRoot-style). */
@Module({})
class LocksBenchRoot {}

function loadEngineBuild(dist: string, redisUrl: string): EngineBuild {
  const { loadConfig } = requireFromBuild<typeof import('../../src/platform/config/load-config')>(dist, 'platform/config/load-config');
  const { standaloneOrSentinelOptions } = requireFromBuild<typeof import('../../src/platform/redis/redis-options')>(dist, 'platform/redis/redis-options');
  // NODE_ENV=test: development credentials are accepted (nothing here serves HTTP).
  const config = loadConfig({ NODE_ENV: 'test', LOG_LEVEL: 'silent', REDIS_URL: redisUrl, REDIS_KEY_PREFIX: KEY_PREFIX });
  const lockModuleFile = ['locks.module.js', 'lock.module.js'].map((f) => join(dist, 'locks', f)).find((f) => existsSync(f));
  const lockModule = lockModuleFile
    ? Object.entries(require(lockModuleFile) as Record<string, unknown>).find(([k, v]) => k.endsWith('Module') && typeof v === 'function')?.[1]
    : undefined;
  return {
    config,
    locks: requireFromBuild<typeof import('../../src/engines/locks/locks.config')>(dist, 'engines/locks/locks.config').locksConfig.of(config),
    redisOptions: standaloneOrSentinelOptions(config.redis),
    modules: {
      ConfigModule: requireFromBuild<typeof import('../../src/platform/config/config.module')>(dist, 'platform/config/config.module').ConfigModule,
      MetricsModule: requireFromBuild<typeof import('../../src/platform/metrics/metrics.module')>(dist, 'platform/metrics/metrics.module').MetricsModule,
      RedisModule: requireFromBuild<typeof import('../../src/platform/redis/redis.module')>(dist, 'platform/redis/redis.module').RedisModule,
      ScriptsModule: existsSync(join(dist, 'scripts', 'scripts.module.js'))
        ? requireFromBuild<typeof import('../../src/platform/scripts/scripts.module')>(dist, 'platform/scripts/scripts.module').ScriptsModule
        : undefined,
    },
    RedisService: requireFromBuild<typeof import('../../src/platform/redis/redis.service')>(dist, 'platform/redis/redis.service').RedisService,
    LockService: requireFromBuild<typeof import('../../src/engines/locks/lock.service')>(dist, 'engines/locks/lock.service').LockService,
    lockModule,
    LockMetrics: lockModule ? undefined : requireFromBuild<Record<string, unknown>>(dist, 'engines/locks/lock.metrics').LockMetrics,
  };
}

/** The engine: one LockService per client, each in its own Nest application context with its own connections. */
export function engineLibrary(dist: string, redisUrl: string): LockLibrary & { wakeCheckMs: number; viaLockModule: boolean; redisOptions: RedisOptions } {
  const b = loadEngineBuild(dist, redisUrl);
  const options = { leaseMs: LEASE_MS, waitMs: WAIT_MS };
  return {
    id: 'engine',
    label: 'engine: LockService (pub/sub wake-up)',
    settings:
      `acquire(name, {leaseMs: ${LEASE_MS}, waitMs: ${WAIT_MS}}), default owner (a fresh token per acquire), mode write, watchdog on (the default); ` +
      `waiters sleep on the release message and re-check every LOCK_WAKE_CHECK_MS × 0.8–1.2 = ${b.locks.wakeCheckMs} ms (the default) at the latest`,
    commands: ['evalsha', 'eval'],
    wakeCheckMs: b.locks.wakeCheckMs,
    redisOptions: b.redisOptions,
    viaLockModule: b.lockModule !== undefined,
    async connect() {
      const app = await NestFactory.createApplicationContext(
        {
          module: LocksBenchRoot,
          imports: [
            b.modules.ConfigModule.forRoot(b.config),
            b.modules.MetricsModule,
            b.modules.RedisModule,
            ...(b.modules.ScriptsModule ? [b.modules.ScriptsModule as never] : []),
            ...(b.lockModule ? [b.lockModule as never] : []),
          ],
          providers: b.lockModule ? [] : [b.LockService, b.LockMetrics as never],
        },
        { logger: ['error', 'warn'], abortOnError: false },
      );
      const service: LockService = app.get(b.LockService);
      const redis = app.get(b.RedisService);
      let requests = 0;
      const count = () => void requests++;
      countCommands(redis.client as Redis, count);
      // The pub/sub connection is created on first use (the first wait): count it from then on.
      const subscriber = redis.subscriber.bind(redis);
      let counted = false;
      redis.subscriber = () => {
        const conn = subscriber();
        if (!counted) countCommands(conn as Redis, count);
        counted = true;
        return conn;
      };
      await redis.warmUp();
      return {
        acquire: async (name) => {
          const h = await service.acquire(name, options);
          return () => h.release();
        },
        get requests() {
          return requests;
        },
        close: () => app.close(),
      };
    },
  };
}

/** One peer client's connection: the service's connection options, connected, commands counted. */
async function peerConnection(redisUrl: string, options: RedisOptions, onCommand: () => void): Promise<Redis> {
  const conn = new Redis(redisUrl, { ...options, lazyConnect: true, connectionName: 'bench-locks:peer' });
  conn.on('error', () => undefined);
  countCommands(conn, onCommand);
  await conn.connect();
  return conn;
}

/** Same key shape as the engine's lock hash (`<prefix>:locks:{name}:h`), one suffix per library. */
const peerKey = (name: string, suffix: string) => `${KEY_PREFIX}:locks:{${name}}:${suffix}`;

/**
 * redlock 5 with one client. An acquire retries every retryDelay ± retryJitter ms; retryCount is set
 * so that the retries span WAIT_MS, like the other rows' wait.
 */
export function redlockLibrary(
  redisUrl: string,
  redisOptions: RedisOptions,
  retryDelay: number,
  retryJitter: number,
  id = 'redlock',
  whatIf = false,
): LockLibrary {
  const retryCount = Math.ceil(WAIT_MS / retryDelay);
  return {
    id,
    label: `redlock: retry every ${retryDelay} ± ${retryJitter} ms${whatIf ? ' (what-if)' : retryDelay === 200 ? ' (default)' : ''}`,
    commands: ['evalsha', 'eval'],
    settings: `new Redlock([client], {retryDelay: ${retryDelay}, retryJitter: ${retryJitter}, retryCount: ${retryCount}, driftFactor: 0.01}); acquire([key], ${LEASE_MS}); lock.release(); no auto-extension (acquire() has none)`,
    async connect() {
      let requests = 0;
      const conn = await peerConnection(redisUrl, redisOptions, () => void requests++);
      const redlock = new Redlock([conn], { retryCount, retryDelay, retryJitter, driftFactor: 0.01 });
      return {
        acquire: async (name) => {
          const lock = await redlock.acquire([peerKey(name, 'rl')], LEASE_MS);
          return async () => {
            await lock.release();
          };
        },
        get requests() {
          return requests;
        },
        close: async () => {
          conn.disconnect();
        },
      };
    },
  };
}

/** redis-semaphore's Mutex: one SET NX PX per attempt, a fixed retryInterval between attempts, refresh timer on (its default). */
export function semaphoreLibrary(redisUrl: string, redisOptions: RedisOptions, retryInterval = 10): LockLibrary {
  const refreshInterval = Math.round(LEASE_MS * 0.8);
  return {
    id: 'redis-semaphore',
    commands: ['set', 'evalsha', 'eval'],
    label: `redis-semaphore Mutex: retry every ${retryInterval} ms${retryInterval === 10 ? ' (default)' : ''}`,
    settings:
      `new Mutex(client, key, {lockTimeout: ${LEASE_MS}, acquireTimeout: ${WAIT_MS}, retryInterval: ${retryInterval}}) per acquire (refreshInterval ${refreshInterval} ms, the default); ` +
      'acquire(); release()',
    async connect() {
      let requests = 0;
      const conn = await peerConnection(redisUrl, redisOptions, () => void requests++);
      return {
        acquire: async (name) => {
          const m = new Mutex(conn, peerKey(name, 'sem'), { lockTimeout: LEASE_MS, acquireTimeout: WAIT_MS, retryInterval });
          await m.acquire();
          return () => m.release();
        },
        get requests() {
          return requests;
        },
        close: async () => {
          conn.disconnect();
        },
      };
    },
  };
}

/**
 * The reference row "fenced-floor": what any lock that returns a fencing token pays at least per
 * acquire + release, as ops/s next to the rows it bounds. redis-semaphore's acquire is one plain
 * SET NX PX; a fencing token needs a script (the counter has to move with the SET, atomically), so
 * this is the acquire script of the script-cost variant "fenced-string" and the peers' release
 * script, nothing else. Not a lock the service could use: no reentrancy, no read/write, no
 * watchdog, no metrics, no waiting (an acquire of a taken lock throws: the uncontended section
 * never contends, so that is a bug, and it should be loud).
 */
export function fencedFloorLibrary(redisUrl: string, redisOptions: RedisOptions): LockLibrary {
  return {
    id: 'fenced-floor',
    label: "reference: the cheapest fenced lock (string key + the engine's fencing counter; 2 scripts; not a working engine)",
    commands: ['evalsha', 'eval'],
    settings:
      `acquire: one script (TIME; SET key owner NX PX ${LEASE_MS}; fencing counter SET fence now PX ${FENCE_KEEP_MS} GET, raised above the previous token if the clock is behind it; returns the token), ` +
      "release: one script (GET = owner → DEL); both SCRIPT LOADed at connect and sent as EVALSHA (EVAL on NOSCRIPT); a fresh owner per acquire of the engine's " +
      'length (8-hex instance:uuid); no waiting, no watchdog, no reentrancy, no read/write, no metrics (the acquire of a taken lock throws); uncontended section only',
    async connect() {
      let requests = 0;
      const conn = await peerConnection(redisUrl, redisOptions, () => void requests++);
      // Sent as the engine's scripts are (evalScript: EVALSHA, EVAL on NOSCRIPT).
      const script = async (lua: string, numberOfKeys: number) => ({ source: lua, numberOfKeys, sha: (await conn.script('LOAD', lua)) as string });
      const [acquire, release] = await Promise.all([script(FENCED_STRING_ACQUIRE_LUA, 2), script(OWNER_RELEASE_LUA, 1)]);
      const instance = randomUUID().slice(0, 8);
      return {
        acquire: async (name) => {
          const owner = `${instance}:${randomUUID()}`;
          // The fence key shares the lock key's hash slot ({name}), like the engine's.
          const key = peerKey(name, 'ff');
          const token = await evalScript(conn, acquire, [key, peerKey(name, 'ff-fence')], [owner, LEASE_MS, FENCE_KEEP_MS]);
          if (token === 0) throw new Error(`fenced-floor: lock ${name} is taken (the uncontended section never contends)`);
          return async () => {
            if ((await evalScript(conn, release, [key], [owner])) !== 1) throw new Error(`fenced-floor: lock ${name} was not held at release`);
          };
        },
        get requests() {
          return requests;
        },
        close: async () => {
          conn.disconnect();
        },
      };
    },
  };
}

/**
 * Every row of the benchmark, in report order: the engine, the peers at their default retry, redlock
 * at 10 ms (what-if), and the uncontended section's reference row (fencedFloor: never in a hand-off).
 */
export function allLibraries(dist: string, redisUrl: string) {
  const engine = engineLibrary(dist, redisUrl);
  // The peers' connections get the service's own connection options (from the same build).
  const o = engine.redisOptions;
  return {
    engine,
    redlock: redlockLibrary(redisUrl, o, 200, 100),
    semaphore: semaphoreLibrary(redisUrl, o, 10),
    redlockFast: redlockLibrary(redisUrl, o, 10, 5, 'redlock-10ms', true),
    fencedFloor: fencedFloorLibrary(redisUrl, o),
  };
}

/** Versions of the packages in the run, for the environment section. */
export function packageVersions(): Record<string, string> {
  // Read from node_modules: redlock's package exports do not include its package.json.
  const v = (name: string) =>
    (JSON.parse(readFileSync(join(ROOT, 'node_modules', name, 'package.json'), 'utf8')) as { version: string }).version.replace(/^v/, '');
  return { redlock: v('redlock'), 'redis-semaphore': v('redis-semaphore'), ioredis: v('ioredis'), '@nestjs/core': v('@nestjs/core') };
}
