/**
 * The floor of the red-envelopes benchmark: bare Fastify 5 + one ioredis connection running the service's own grab
 * script (loaded by its script loader: same source and SHA) by EVALSHA on the keys of sub-pool 0 of an activity the
 * service created; no auth, validation, logging, metrics, rate limit or crediting. `POST /grab/:activityId {account}`
 * answers 200 `{status, envelopeId?, amount?}`. With FLOOR_IDENTITY=jwt the account comes from the bearer token, verified
 * by the service's JwtVerifier (401 without a valid one): the floor plus the identity every app endpoint must have.
 * With FLOOR_CREDIT=inline a grab that got an envelope is also credited, as the service's crediting does it but in the
 * cheapest way (no consumer group): the wallet's credit script on the same keys, reference, kind and memo, then the
 * envelope settled as credited (the grabs of one event-loop turn in one call, as the service batches them).
 * Env: PORT, REDIS_URL, KEY_PREFIX, LUA_DIR, FLOOR_IDENTITY, FLOOR_CREDIT and the service's JWT_* settings.
 */
import Fastify from 'fastify';
import { JwtVerifier } from '../src/platform/auth/jwt-verifier.service';
import type { AppConfig } from '../src/platform/config/app-config';
import { loadConfig } from '../src/platform/config/load-config';
import { KeyBuilder } from '../src/platform/redis/key-builder';
import { activityKey, memoOf, poolKeys, type RainRecord as ActivityRecord } from '../src/features/red-envelope';
import { walletKeys } from '../src/features/wallet';
import { connectScriptRedis, serveUntilSignal } from './lib/bare-server';

async function main(): Promise<void> {
  const keys = new KeyBuilder({ redis: { keyPrefix: process.env.KEY_PREFIX ?? 'floor' } } as AppConfig);
  const { redis, command } = await connectScriptRedis(process.env.REDIS_URL ?? 'redis://127.0.0.1:6379', { maxRetriesPerRequest: 1 });
  const grab = command('red-envelope/grab');
  const placements = new Map<string, Promise<ActivityRecord>>();
  const placementOf = (id: string) => {
    if (!placements.has(id))
      placements.set(
        id,
        redis.get(activityKey(keys, id)).then((raw) => JSON.parse(raw ?? `{"activityId":"${id}","subPools":1}`) as ActivityRecord),
      );
    return placements.get(id)!;
  };
  const credit = process.env.FLOOR_CREDIT === 'inline' ? command('wallet/credit') : undefined;
  const settle = command('red-envelope/settle');
  type Pool = ReturnType<typeof poolKeys>;
  // The envelopes credited in one event-loop turn, by sub-pool, settled together.
  const toSettle = new Map<string, { k: Pool; ids: string[] }>();
  const settleSoon = (k: Pool, id: string) => {
    let batch = toSettle.get(k.env);
    if (!batch) {
      const b = { k, ids: [] as string[] };
      toSettle.set(k.env, b);
      setImmediate(() => {
        toSettle.delete(k.env);
        void settle(b.k.env, b.k.stats, 'credited', ...b.ids);
      });
      batch = b;
    }
    batch.ids.push(id);
  };
  const verifier = process.env.FLOOR_IDENTITY === 'jwt' ? new JwtVerifier(loadConfig(process.env)) : undefined;
  const app = Fastify({ logger: false });
  app.post<{ Params: { activityId: string }; Body?: { account?: string } }>('/grab/:activityId', async (req, reply) => {
    let account = req.body?.account ?? '';
    if (verifier) {
      const auth = req.headers.authorization ?? '';
      try {
        account = verifier.verify(auth.startsWith('Bearer ') ? auth.slice(7) : '');
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
  await serveUntilSignal('red-envelopes-floor-server', Number(process.env.PORT ?? 3100), app, redis);
}

main().catch((err) => {
  console.error('red-envelopes-floor-server failed:', err);
  process.exit(1);
});
