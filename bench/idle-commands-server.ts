/**
 * The service of the idle-commands benchmark: the build in DIST started as main.ts starts it (createApp, listen), so
 * every background worker runs, plus GROUPS order-event consumer groups with a handler that does nothing (the service
 * starts none itself). It loads the build's public files only: create-app and the orders module's index.
 */
import type { NestFastifyApplication } from '@nestjs/platform-fastify';
import { join } from 'node:path';
import type { AppConfig } from '../src/platform/config/app-config';
import type * as Orders from '../src/features/orders';

async function main(): Promise<void> {
  const dist = process.env.DIST!;
  const { loadConfig } = require(join(dist, 'platform/config/load-config')) as { loadConfig(env?: NodeJS.ProcessEnv): AppConfig };
  const { createApp } = require(join(dist, 'create-app')) as { createApp(c: AppConfig): Promise<NestFastifyApplication> };
  const { OrderEventsService } = require(join(dist, 'features/orders')) as typeof Orders;
  const config = loadConfig(process.env);
  const app = await createApp(config);
  app.enableShutdownHooks();
  for (let i = 0; i < Number(process.env.GROUPS ?? 0); i++)
    await app.get(OrderEventsService).consume(`idle-bench-${i}`, async () => undefined, { consumer: `idle-bench-${i}` });
  await app.listen({ port: config.port, host: config.host });
}

main().catch((err: unknown) => {
  console.error(err);
  process.exit(1);
});
