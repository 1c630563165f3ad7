/**
 * The service of the idle-commands benchmark: the build in DIST started as main.ts starts it (createApp, listen), so
 * every background worker runs, plus GROUPS order-event consumer groups with a handler that does nothing (the service
 * starts none itself). It loads the build's public entry only (create-app).
 */
import { requireBuildEntry } from './lib/full-stack';

async function main(): Promise<void> {
  const { createApp, loadConfig, OrderEventsService } = requireBuildEntry(process.env.DIST!);
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
