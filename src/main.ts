import 'reflect-metadata';
import { existsSync } from 'node:fs';
import { AppConfig } from './config/app-config';
import { ConfigError, loadConfig } from './config/load-config';
import { createApp } from './create-app';
import { ManagedRedis } from './redis/managed-redis';

async function main(): Promise<void> {
  if (existsSync('.env')) process.loadEnvFile('.env');
  let config: AppConfig;
  try {
    config = loadConfig();
  } catch (err) {
    if (err instanceof ConfigError) {
      console.error(`Configuration error: ${err.message}`);
      process.exit(78); // EX_CONFIG
    }
    throw err;
  }

  let managed: ManagedRedis | undefined;
  if (config.redis.topology.mode === 'managed') {
    console.log('[managed-redis] no Redis configured (REDIS_URL, REDIS_SENTINELS or REDIS_CLUSTER_NODES): starting a local redis-server for development');
    managed = await ManagedRedis.start(config.redis.topology);
  }

  const app = await createApp(config);
  let shuttingDown = false;
  const shutdown = async (signal: string) => {
    if (shuttingDown) return;
    shuttingDown = true;
    console.log(JSON.stringify({ level: 'info', msg: `received ${signal}: draining`, time: Date.now() }));
    const force = setTimeout(() => {
      console.error(`shutdown took longer than ${config.shutdownGraceMs} ms; exiting`);
      process.exit(1);
    }, config.shutdownGraceMs);
    force.unref();
    try {
      // Stops accepting, waits for in-flight requests, stops workers, closes Redis.
      await app.close();
      await managed?.stop();
      process.exit(0);
    } catch (err) {
      console.error('shutdown failed', err);
      process.exit(1);
    }
  };
  process.once('SIGTERM', () => void shutdown('SIGTERM'));
  process.once('SIGINT', () => void shutdown('SIGINT'));

  await app.listen({ port: config.port, host: config.host });
  const shown = config.host === '0.0.0.0' ? 'localhost' : config.host;
  console.log(`redis-pay listening on http://${shown}:${config.port}` + (config.swaggerEnabled ? ` — Swagger UI at http://${shown}:${config.port}/docs` : ''));
}

main().catch((err) => {
  console.error('startup failed:', err instanceof Error ? err.message : err);
  process.exit(1);
});
