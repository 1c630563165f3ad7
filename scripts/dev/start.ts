/**
 * `npm start`: the built service (dist/main.js) for development. With no Redis configured (REDIS_URL,
 * REDIS_SENTINELS or REDIS_CLUSTER_NODES, in the environment or .env) and NODE_ENV not production, it starts a
 * local redis-server (managed-redis.ts), hands the service its address in REDIS_URL, and stops it when the service
 * exits. Otherwise it only starts the service, which then behaves exactly as `npm run start:prod` or the image.
 *
 * The service runs in this process (run it with `node --import tsx`, as `npm start` does): SIGTERM and SIGINT
 * reach the service's own drain, which stops the redis-server after the app has closed; a kill -9 leaves only the
 * redis-server behind, and the next start stops it (its pid file) before starting another.
 */
import { existsSync } from 'node:fs';
import { resolve } from 'node:path';
import type { StartHooks } from '../../src/main';
import { LauncherSettingError, ManagedRedis, ManagedRedisError, managedRedisSettings } from './managed-redis';

const MAIN = resolve(__dirname, '../../dist/main.js');

/** What the service needs around its start: nothing when a Redis is configured (or in production), else a managed one. */
function managedRedisHooks(env: NodeJS.ProcessEnv): StartHooks {
  if (env.NODE_ENV === 'production' || env.REDIS_URL || env.REDIS_SENTINELS || env.REDIS_CLUSTER_NODES) return {};
  const settings = managedRedisSettings(env);
  env.REDIS_URL = `redis://127.0.0.1:${settings.port}`;
  let managed: ManagedRedis | undefined;
  return {
    beforeConnect: async () => {
      console.log('[managed-redis] no Redis configured (REDIS_URL, REDIS_SENTINELS or REDIS_CLUSTER_NODES): starting a local redis-server for development');
      try {
        managed = await ManagedRedis.start(settings);
      } catch (err) {
        throw err instanceof ManagedRedisError ? err : new ManagedRedisError(`[managed-redis] ${(err as Error).message}`, { cause: err });
      }
    },
    afterClose: async () => managed?.stop(),
  };
}

if (existsSync('.env')) process.loadEnvFile('.env');
if (!existsSync(MAIN)) {
  console.error(`${MAIN} is missing: build the service first (npm run build; npm start does)`);
  process.exit(1);
}
let hooks: StartHooks;
try {
  hooks = managedRedisHooks(process.env);
} catch (err) {
  if (!(err instanceof LauncherSettingError)) throw err;
  console.error(`Configuration error: ${err.message}`);
  process.exit(78); // EX_CONFIG, as the service's own settings
}
(require(MAIN) as typeof import('../../src/main')).start(hooks);
