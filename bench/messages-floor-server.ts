/**
 * The "floor" of the messages benchmark: the least a Node HTTP server can do for
 * POST /messages and GET /messages. Bare Fastify 5 + ioredis, two routes, no
 * Nest, no validation, no auth, no logging, no metrics, no rate limit.
 *
 * The work per request is the service's own, taken from the same build the
 * full stack runs (DIST): its config loader (same key prefix, retention and
 * per-account cap from the same env), KeyBuilder and inboxKeys (same keys),
 * MessagesStore (same script arguments, same parsing of the script's reply)
 * and MessagesService (toStored for writes, toDto and the response for pulls,
 * the once-a-second broadcast feed), constructed by hand rather than by Nest's
 * DI. Scripts are the build's lua/ loaded by the project's script loader and
 * run by EVALSHA as the service sends them (`evalScript`), on a connection with the service's
 * ioredis options (src/platform/redis/redis-options.ts) whose writes are coalesced as on the service's
 * command connection (src/platform/redis/coalesce-writes.ts). The one thing the service does
 * that this server does not is count metrics (a no-op stands in).
 *
 * The account comes from the x-account-id header on GET (there is no token to
 * take it from) and from the body on POST (as for the service).
 *
 * Env: the full stack's env (bench/lib/full-stack.ts fullEnv: REDIS_URL, REDIS_KEY_PREFIX, ...),
 * PORT, DIST (a build's dist/ dir; its scripts come from DIST/../lua).
 * Started by bench/messages.ts in its own process: `node --import tsx bench/messages-floor-server.ts`.
 */
import Fastify from 'fastify';
import { join } from 'node:path';
import type { MessagesMetrics } from '../src/features/messages/messages.metrics';
import type { WriteMessageCommand } from '../src/features/messages/message.commands';
import type { ScriptRegistry } from '../src/platform/scripts/script-registry.service';
import { connectScriptRedis, serveUntilSignal } from './lib/bare-server';
import { requireFromBuild } from './lib/full-stack';

/** MessagesMetrics without prom-client: the floor counts nothing. */
const NO_METRICS = (() => {
  const counter = { inc: () => undefined };
  return { written: counter, duplicates: counter, pulled: counter, remindersSent: counter, broadcasts: counter } as unknown as MessagesMetrics;
})();

async function main(): Promise<void> {
  const dist = process.env.DIST;
  if (!dist) throw new Error('DIST (a build of the service) is required');
  const { loadConfig } = requireFromBuild<typeof import('../src/platform/config/load-config')>(dist, 'platform/config/load-config');
  const { standaloneOrSentinelOptions } = requireFromBuild<typeof import('../src/platform/redis/redis-options')>(dist, 'platform/redis/redis-options');
  const { KeyBuilder } = requireFromBuild<typeof import('../src/platform/redis/key-builder')>(dist, 'platform/redis/key-builder');
  const { MessagesStore } = requireFromBuild<typeof import('../src/features/messages/messages.store')>(dist, 'features/messages/messages.store');
  const { messagesConfig } = requireFromBuild<typeof import('../src/features/messages/messages.config')>(dist, 'features/messages/messages.config');
  const { BroadcastFeed } = requireFromBuild<typeof import('../src/features/messages/broadcast-feed')>(dist, 'features/messages/broadcast-feed');
  const { MessagesService } = requireFromBuild<typeof import('../src/features/messages/messages.service')>(dist, 'features/messages/messages.service');

  const config = loadConfig(process.env);
  if (config.redis.topology.mode !== 'standalone') throw new Error('the floor needs REDIS_URL');
  const scripts = await connectScriptRedis(config.redis.topology.url, standaloneOrSentinelOptions(config.redis), join(dist, '..', 'lua'));
  const store = new MessagesStore(scripts as unknown as ScriptRegistry, new KeyBuilder(config), messagesConfig.of(config));
  const messages = new MessagesService(store, new BroadcastFeed(store), NO_METRICS);

  const app = Fastify({ logger: false });
  app.post('/messages', async (req, reply) => {
    const r = await messages.write(req.body as WriteMessageCommand);
    void reply.status(r.duplicate ? 200 : 201);
    return r;
  });
  app.get('/messages', (req) => {
    const q = req.query as { after?: string; limit?: string };
    return messages.pull(String(req.headers['x-account-id']), q.after, q.limit === undefined ? 20 : Number(q.limit));
  });
  await serveUntilSignal('messages-floor-server', config.port, app, scripts.redis);
}

main().catch((err) => {
  console.error('messages-floor-server failed:', err);
  process.exit(1);
});
