import 'reflect-metadata';
import type { NestFastifyApplication } from '@nestjs/platform-fastify';
import { existsSync } from 'node:fs';
import { createServer, Server } from 'node:net';
import { AppConfig } from './platform/config/app-config';
import { ConfigError, loadConfig, noRedisConfigured } from './platform/config/load-config';
import { createApp } from './create-app';

/** Exit status of a setting that is missing or invalid (EX_CONFIG): no Redis configured, a bad value, … */
const EXIT_CONFIG = 78;
/** Exit status of a start that could not complete (port in use, a launcher's step refused, Redis unreachable, …). */
const EXIT_STARTUP_FAILED = 1;

/**
 * What a development launcher may add around a start: `npm start` (scripts/dev/start.ts) supervises a local
 * redis-server this way and hands its address in REDIS_URL. The service itself starts nothing but the app.
 */
export interface StartHooks {
  /** Runs once the settings are valid and the HTTP port is held, before the app connects to Redis. An error stops the start (exit 1) with its message. */
  beforeConnect?: () => Promise<void>;
  /** Runs after the app has closed (or a start has stopped), before the process exits. */
  afterClose?: () => Promise<void>;
}

async function main(hooks: StartHooks): Promise<void> {
  if (existsSync('.env')) process.loadEnvFile('.env');
  let config: AppConfig;
  try {
    config = loadConfig();
    // The service never starts a Redis of its own: no Redis settings is a configuration error outside production too.
    if (config.redis.topology.mode === 'none') throw noRedisConfigured(false);
  } catch (err) {
    if (err instanceof ConfigError) {
      console.error(`Configuration error: ${err.message}`);
      process.exit(EXIT_CONFIG);
    }
    throw err;
  }

  // Hold the HTTP port from the first moment: a port in use stops the start before anything runs (no launcher
  // step, no Nest start-up lines), and nothing else can take the port while the app starts.
  let reservation: Server;
  try {
    reservation = await reservePort(config.host, config.port);
  } catch (err) {
    console.error(listenFailure(config, err));
    process.exit(EXIT_STARTUP_FAILED);
  }

  let app: NestFastifyApplication | undefined;
  /** Stops whatever this start has started (the app, then what the launcher started) and exits. */
  const abort = async (message: string, status = EXIT_STARTUP_FAILED): Promise<never> => {
    console.error(message);
    reservation.close();
    await within(app?.close(), 5_000);
    await hooks.afterClose?.().catch(() => undefined);
    process.exit(status);
  };

  try {
    await hooks.beforeConnect?.();
  } catch (err) {
    return abort(err instanceof Error ? err.message : String(err));
  }
  try {
    app = await createApp(config);
  } catch (err) {
    // A setting only Redis can refuse (DURABILITY_REPLICAS above the replicas there are, in production).
    if (err instanceof ConfigError) return abort(`Configuration error: ${err.message}`, EXIT_CONFIG);
    return abort(`startup failed: ${err instanceof Error ? err.message : String(err)}`);
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
      await hooks.afterClose?.();
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
    const other = config.port < 65535 ? config.port + 1 : config.port - 1;
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

/** Starts the service (`node dist/main.js` does so with no hooks). */
export function start(hooks: StartHooks = {}): void {
  main(hooks).catch((err) => {
    console.error('startup failed:', err instanceof Error ? err.message : err);
    process.exit(EXIT_STARTUP_FAILED);
  });
}

if (require.main === module) start();
