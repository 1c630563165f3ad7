import 'reflect-metadata';
import type { NestFastifyApplication } from '@nestjs/platform-fastify';
import { existsSync } from 'node:fs';
import { createServer, Server } from 'node:net';
import { AppConfig } from './platform/config/app-config';
import { ConfigError, loadConfig } from './platform/config/load-config';
import { createApp } from './create-app';
import { ManagedRedis, ManagedRedisError, neighbourPort } from './platform/redis/managed-redis';

/** Exit status of a start that could not complete (port in use, managed Redis refused, Redis unreachable, …). */
const EXIT_STARTUP_FAILED = 1;

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

  // Hold the HTTP port from the first moment: a port in use stops the start before anything runs (no managed
  // Redis, no Nest start-up lines), and nothing else can take the port while the app starts.
  let reservation: Server;
  try {
    reservation = await reservePort(config.host, config.port);
  } catch (err) {
    console.error(listenFailure(config, err));
    process.exit(EXIT_STARTUP_FAILED);
  }

  let managed: ManagedRedis | undefined;
  let app: NestFastifyApplication | undefined;
  /** Stops whatever this start has started (the app, then the managed redis-server) and exits. */
  const abort = async (message: string, status = EXIT_STARTUP_FAILED): Promise<never> => {
    console.error(message);
    reservation.close();
    await within(app?.close(), 5_000);
    await managed?.stop();
    process.exit(status);
  };

  try {
    if (config.redis.topology.mode === 'managed') {
      console.log('[managed-redis] no Redis configured (REDIS_URL, REDIS_SENTINELS or REDIS_CLUSTER_NODES): starting a local redis-server for development');
      managed = await ManagedRedis.start(config.redis.topology);
    }
    app = await createApp(config);
  } catch (err) {
    // A setting only Redis can refuse (DURABILITY_REPLICAS above the replicas there are, in production).
    if (err instanceof ConfigError) return abort(`Configuration error: ${err.message}`, 78);
    return abort(err instanceof ManagedRedisError ? err.message : `startup failed: ${err instanceof Error ? err.message : String(err)}`);
  }
  const nest = app;

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
      await nest.close();
      await managed?.stop();
      process.exit(0);
    } catch (err) {
      console.error('shutdown failed', err);
      process.exit(1);
    }
  };
  process.once('SIGTERM', () => void shutdown('SIGTERM'));
  process.once('SIGINT', () => void shutdown('SIGINT'));

  try {
    await new Promise<void>((r) => reservation.close(() => r()));
    await nest.listen({ port: config.port, host: config.host });
  } catch (err) {
    return abort(listenFailure(config, err));
  }
  const shown = config.host === '0.0.0.0' ? 'localhost' : config.host;
  console.log(`redis-pay listening on http://${shown}:${config.port}` + (config.swaggerEnabled ? ` — Swagger UI at http://${shown}:${config.port}/docs` : ''));
}

/** Listens on host:port with a bare server that drops every connection, so the port is ours until the app listens. */
function reservePort(host: string, port: number): Promise<Server> {
  return new Promise((resolve, reject) => {
    const srv = createServer((sock) => sock.destroy());
    srv.once('error', reject);
    srv.listen({ port, host }, () => {
      srv.off('error', reject);
      resolve(srv);
    });
  });
}

/** What to tell the user when the HTTP port cannot be had. */
function listenFailure(config: AppConfig, err: unknown): string {
  const where = `${config.host}:${config.port}`;
  const code = (err as NodeJS.ErrnoException | undefined)?.code;
  if (code === 'EADDRINUSE') {
    const other = neighbourPort(config.port);
    return (
      `Cannot listen on ${where}: the port is already in use (another redis-pay, or another program). ` +
      `Choose another port with PORT, for example PORT=${other} npm start, or stop the program that holds ${config.port}.`
    );
  }
  return `Cannot listen on ${where}: ${err instanceof Error ? err.message : String(err)}. Check PORT and HOST.`;
}

/** Waits for `p` at most `ms` (errors ignored). */
async function within(p: Promise<unknown> | undefined, ms: number): Promise<void> {
  if (!p) return;
  let timer: NodeJS.Timeout | undefined;
  await Promise.race([p.catch(() => undefined), new Promise((r) => (timer = setTimeout(r, ms)))]).finally(() => clearTimeout(timer));
}

main().catch((err) => {
  console.error('startup failed:', err instanceof Error ? err.message : err);
  process.exit(1);
});
