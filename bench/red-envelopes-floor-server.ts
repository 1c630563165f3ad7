/**
 * The floor of the red-envelopes benchmark: the least a Node HTTP server can do for a grab. Bare Fastify 5 + one
 * ioredis connection (writes coalesced as on the service's command connection: see RedisWrites in lib/bare-server.ts),
 * no auth, no validation, no logging, no metrics, no rate limit, no crediting. The account comes from the body because
 * there is no token to take it from.
 *
 * `POST /grab/:activityId {account}`: the very same grab script as the service (lua/red-envelope/grab-6.lua, same
 * source and SHA, loaded by the service's loader so its includes are inlined) by EVALSHA on the same keys of sub-pool 0
 * of an activity the service created and loaded (`<prefix>:red-envelope:{p:<activity>:0:<4 chars>}:…`, from its record,
 * read once), no fall-over. 200 with
 * `{status, envelopeId?, amount?}`. One Redis call.
 *
 * With FLOOR_IDENTITY=jwt the account comes instead from the bearer token, verified as the service verifies it
 * (its JwtVerifier, built from the same JWT_* settings by the service's loadConfig; 401 without a valid one): the
 * floor plus the identity every app endpoint must have, and nothing else.
 *
 * Env: PORT, REDIS_URL, KEY_PREFIX (the service's REDIS_KEY_PREFIX), LUA_DIR (default: the project's lua/),
 * FLOOR_IDENTITY (jwt, or unset) with the service's JWT_* settings.
 * Started by bench/red-envelopes.ts in its own process: `node --import tsx bench/red-envelopes-floor-server.ts`.
 */
import Fastify from 'fastify';
import { JwtVerifier } from '../src/auth/jwt-verifier.service';
import type { AppConfig } from '../src/config/app-config';
import { loadConfig } from '../src/config/load-config';
import { activityKey, poolKeys, type PoolPlacement } from '../src/red-envelope/red-envelope-keys';
import { KeyBuilder } from '../src/redis/key-builder';
import { connectScriptRedis, serveUntilSignal } from './lib/bare-server';

async function main(): Promise<void> {
  const port = Number(process.env.PORT ?? 3100);
  const keys = new KeyBuilder({ redis: { keyPrefix: process.env.KEY_PREFIX ?? 'floor' } } as AppConfig);
  const { redis, command } = await connectScriptRedis(process.env.REDIS_URL ?? 'redis://127.0.0.1:6379', { maxRetriesPerRequest: 1 });
  const grab = command('red-envelope/grab');
  // Where each activity's sub-pools are (its record's tags), read once per activity.
  const placements = new Map<string, Promise<PoolPlacement>>();
  const placementOf = (activityId: string) => {
    let p = placements.get(activityId);
    if (!p) {
      p = redis.get(activityKey(keys, activityId)).then((raw) => (raw ? (JSON.parse(raw) as PoolPlacement) : { activityId, subPools: 1 }));
      placements.set(activityId, p);
    }
    return p;
  };

  const verifier = process.env.FLOOR_IDENTITY === 'jwt' ? new JwtVerifier(loadConfig(process.env)) : undefined;

  const app = Fastify({ logger: false });
  app.post<{ Params: { activityId: string }; Body: { account?: string } }>('/grab/:activityId', async (req, reply) => {
    let account = req.body?.account ?? '';
    if (verifier) {
      const auth = req.headers.authorization;
      try {
        if (!auth?.startsWith('Bearer ')) throw new Error('no bearer token');
        account = verifier.verify(auth.slice(7));
      } catch {
        return reply.code(401).send({ error: 'UNAUTHORIZED' });
      }
    }
    const k = poolKeys(keys, await placementOf(req.params.activityId), 0);
    const [status, envelopeId, amount] = (await grab(k.pool, k.grabs, k.claims, k.env, k.stats, k.credits, account, 0)) as [string, string?, number?];
    return envelopeId === undefined ? { status } : { status, envelopeId, amount };
  });
  await serveUntilSignal('red-envelopes-floor-server', port, app, redis);
}

main().catch((err) => {
  console.error('red-envelopes-floor-server failed:', err);
  process.exit(1);
});
