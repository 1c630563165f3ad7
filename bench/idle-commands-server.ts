/**
 * The service of the idle-commands benchmark: the build in DIST started as main.ts starts it (its config
 * loader on this env, createApp, listen), so every background worker its modules start runs (delay-queue
 * processors, reminders, ...), plus GROUPS order-event consumer groups (OrderEventsService.consume from the
 * same build, a handler that does nothing): the service itself starts none, and a consumer group is what
 * the order-events change is about.
 *
 * Env: the full stack's env (bench/lib/full-stack.ts fullEnv), DIST (a build's dist/ dir), GROUPS.
 * Started by bench/idle-commands.ts in its own process: `node --import tsx bench/idle-commands-server.ts`.
 */
import type { NestFastifyApplication } from '@nestjs/platform-fastify';
import type { AppConfig } from '../src/platform/config/app-config';
import type { OrderEventsService } from '../src/features/orders/order-events.service';
import { requireFromBuild } from './lib/full-stack';

async function main(): Promise<void> {
  const dist = process.env.DIST;
  if (!dist) throw new Error('DIST is not set');
  const groups = Number(process.env.GROUPS ?? '0');
  const { loadConfig } = requireFromBuild<{ loadConfig(env?: NodeJS.ProcessEnv): AppConfig }>(dist, 'platform/config/load-config');
  const { createApp } = requireFromBuild<{ createApp(c: AppConfig): Promise<NestFastifyApplication> }>(dist, 'create-app');
  const events = requireFromBuild<{ OrderEventsService: typeof OrderEventsService }>(dist, 'features/orders/order-events.service');
  const config = loadConfig(process.env);
  const app = await createApp(config);
  app.enableShutdownHooks();
  for (let i = 0; i < groups; i++) {
    await app.get(events.OrderEventsService).consume(`idle-bench-${i}`, async () => undefined, { consumer: `idle-bench-${i}` });
  }
  await app.listen({ port: config.port, host: config.host });
}

main().catch((err: unknown) => {
  console.error(err);
  process.exit(1);
});
