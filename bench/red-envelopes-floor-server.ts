/**
 * The floor of the red-envelopes benchmark: the least a Node HTTP server can do for a grab. Bare Fastify 5 + one
 * ioredis connection (writes coalesced as on the service's command connection: see RedisWrites in lib/bare-server.ts),
 * no auth, no validation, no logging, no metrics, no rate limit, no crediting. The account comes from the body because
 * there is no token to take it from.
 *
 * `POST /grab/:activityId {account}`: the very same grab script as the service (lua/features/red-envelope/grab-6.lua, same
 * source and SHA, loaded by the service's loader so its includes are inlined) by EVALSHA on the same keys of sub-pool 0
 * of an activity the service created and loaded (`<prefix>:red-envelope:{p:<activity>:0:<4 chars>}:…`, from its record,
 * read once), no fall-over. 200 with
 * `{status, envelopeId?, amount?}`. One Redis call.
 *
 * With FLOOR_IDENTITY=jwt the account comes instead from the bearer token, verified as the service verifies it
 * (its JwtVerifier, built from the same JWT_* settings by the service's loadConfig; 401 without a valid one): the
 * floor plus the identity every app endpoint must have, and nothing else.
 *
 * With FLOOR_CREDIT=inline a grab that got an envelope is also credited, as the service's crediting does it but in the
 * cheapest way (no consumer group): the wallet's credit script (lua/features/wallet/credit-3.lua, the same keys, reference, kind
 * and memo) and then the envelope settled as credited (lua/features/red-envelope/settle-2.lua, the grabs of one event-loop turn
 * in one call, as the service batches them). The grab's credit stream entry stays unread.
 *
 * Env: PORT, REDIS_URL, KEY_PREFIX (the service's REDIS_KEY_PREFIX), LUA_DIR (default: the project's lua/),
 * FLOOR_IDENTITY (jwt, or unset) with the service's JWT_* settings, FLOOR_CREDIT (inline, or unset).
 * Started by bench/red-envelopes.ts in its own process: `node --import tsx bench/red-envelopes-floor-server.ts`.
 */
import Fastify from 'fastify';
import { JwtVerifier } from '../src/platform/auth/jwt-verifier.service';
import type { AppConfig } from '../src/platform/config/app-config';
import { loadConfig } from '../src/platform/config/load-config';
import { memoOf } from '../src/features/red-envelope/red-envelope-activity.command';
import { activityKey, poolKeys, type PoolKeys } from '../src/features/red-envelope/red-envelope.keys';
import type { ActivityRecord } from '../src/features/red-envelope/red-envelope.types';
import { walletKeys } from '../src/features/wallet/wallet.keys';
import { KeyBuilder } from '../src/platform/redis/key-builder';
import { connectScriptRedis, serveUntilSignal } from './lib/bare-server';

async function main(): Promise<void> {
  const port = Number(process.env.PORT ?? 3100);
  const keys = new KeyBuilder({ redis: { keyPrefix: process.env.KEY_PREFIX ?? 'floor' } } as AppConfig);
  const { redis, command } = await connectScriptRedis(process.env.REDIS_URL ?? 'redis://127.0.0.1:6379', { maxRetriesPerRequest: 1 });
  const grab = command('red-envelope/grab');
  // Where each activity's sub-pools are (its record's tags), read once per activity.
  const placements = new Map<string, Promise<ActivityRecord>>();
  const placementOf = (activityId: string) => {
    let p = placements.get(activityId);
    if (!p) {
      p = redis.get(activityKey(keys, activityId)).then((raw) => (raw ? (JSON.parse(raw) as ActivityRecord) : ({ activityId, subPools: 1 } as ActivityRecord)));
      placements.set(activityId, p);
    }
    return p;
  };

  const credit = process.env.FLOOR_CREDIT === 'inline' ? command('wallet/credit') : undefined;
  const settle = command('red-envelope/settle');
  // The envelopes credited in one event-loop turn, by sub-pool, settled together.
  const toSettle = new Map<string, { k: PoolKeys; ids: string[] }>();
  const settleSoon = (k: PoolKeys, id: string) => {
    let b = toSettle.get(k.env);
    if (!b) {
      const batch = { k, ids: [] as string[] };
      toSettle.set(k.env, batch);
      setImmediate(() => {
        toSettle.delete(k.env);
        void settle(batch.k.env, batch.k.stats, 'credited', ...batch.ids);
      });
      b = batch;
    }
    b.ids.push(id);
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
    const a = await placementOf(req.params.activityId);
    const k = poolKeys(keys, a, 0);
    const [status, envelopeId, amount] = (await grab(k.pool, k.grabs, k.claims, k.env, k.stats, k.credits, account, 0)) as [string, string?, number?];
    if (credit && envelopeId !== undefined && status === 'GRABBED') {
      const w = walletKeys(keys, { kind: 'account', id: account });
      await credit(w.balances, w.ledger, w.refs, a.currency, Number(amount), envelopeId, 'red-envelope', memoOf(a.title));
      settleSoon(k, envelopeId);
    }
    return envelopeId === undefined ? { status } : { status, envelopeId, amount };
  });
  await serveUntilSignal('red-envelopes-floor-server', port, app, redis);
}

main().catch((err) => {
  console.error('red-envelopes-floor-server failed:', err);
  process.exit(1);
});
