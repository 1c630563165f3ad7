/**
 * The floor of the messages benchmark: bare Fastify 5 doing the service's own work for POST /messages and GET /messages
 * (the build's MessagesService, from its public entry create-app, in an application context whose
 * background workers are stopped: the same config, keys, scripts, Redis connection and JSON), without Nest's HTTP
 * layer, validation, auth, logging or the rate limit. The account comes from x-account-id on GET and from the body on POST.
 * Env: the full stack's env (PORT, REDIS_URL, REDIS_KEY_PREFIX, ...), DIST (a build's dist/ dir).
 */
import Fastify from 'fastify';
import type { MessagesService } from '../src/features/messages';
import { requireBuildEntry } from './lib/full-stack';

async function main(): Promise<void> {
  const build = requireBuildEntry(process.env.DIST!);
  const config = build.loadConfig(process.env);
  const ctx = await build.appContext(config, { workers: false });
  const messages = ctx.get(build.MessagesService);
  const app = Fastify({ logger: false });
  app.post('/messages', async (req, reply) => {
    const r = await messages.write(req.body as Parameters<MessagesService['write']>[0]);
    void reply.status(r.duplicate ? 200 : 201);
    return r;
  });
  app.get('/messages', (req) => {
    const q = req.query as { after?: string; limit?: string };
    return messages.pull(String(req.headers['x-account-id']), q.after, q.limit === undefined ? 20 : Number(q.limit));
  });
  await app.listen({ port: config.port, host: '127.0.0.1' });
  const stop = () =>
    void app
      .close()
      .then(() => ctx.close())
      .then(() => process.exit(0));
  process.once('SIGTERM', stop);
  process.once('SIGINT', stop);
}

main().catch((err) => {
  console.error('messages-floor-server failed:', err);
  process.exit(1);
});
