/**
 * The floor of the pay cost account (bench/costs.ts): the same Redis work as the service's
 * `POST /payment-plans/{planId}/pay` of a PENDING one-leg plan on a simulated channel that answers at once, done by
 * bare Fastify 5 + one ioredis connection (writes coalesced as on the service's command connection: see redisWritesFromEnv in
 * lib/bare-server.ts), no auth, no validation, no logging, no metrics, no rate limit.
 *
 * `POST /pay/:planId`: the service's scripts (same source and SHA, loaded by the service's loader), on the same keys,
 * with the same arguments, in the same order, as the service's commandstats and MONITOR show for a pay:
 * orders/read (order + plan), locks/acquire (the plan lock, writer, 30 s lease), orders/read again, delay-queue/schedule
 * (the plan's resume entry), orders/write (order and plan PAYING), delay-queue/schedule (the resume entry again),
 * orders/write (the leg SENT), orders/channel-ledger (pay), orders/write (the leg SUCCEEDED), orders/write (order and
 * plan PAID, with its order.paid event), delay-queue/cancel (the resume entry, then the order's expiry entry),
 * locks/release. 200 with the plan's status, 409 when a script refuses. Thirteen scripts, no other command.
 *
 * Env: PORT, REDIS_URL, KEY_PREFIX (the service's REDIS_KEY_PREFIX), LUA_DIR (default: the project's lua/),
 * ORDERS_EVENTS_MAXLEN, ORDERS_RETENTION_SECONDS (the service's defaults unless set).
 */
import { randomUUID } from 'node:crypto';
import Fastify from 'fastify';
import type { AppConfig } from '../src/platform/config/app-config';
import { lockKeys } from '../src/engines/locks/lock.keys';
import { queueKeys } from '../src/engines/delay-queue/delay-queue.keys';
import { EXPIRY_QUEUE, RESUME_QUEUE } from '../src/features/orders/order-queues';
import { orderIndexKey, orderKeys, orderNumberKeyOf, channelLedgerKey } from '../src/features/orders/order.keys';
import { legReference } from '../src/features/orders/order-queues';
import { planLockName } from '../src/features/orders/order-locks';
import { KeyBuilder } from '../src/platform/redis/key-builder';
import { connectScriptRedis, serveUntilSignal } from './lib/bare-server';

const fields = (flat: string[]) => {
  const o: Record<string, string> = {};
  for (let i = 0; i < flat.length; i += 2) o[flat[i]] = flat[i + 1];
  return o;
};

async function main(): Promise<void> {
  const port = Number(process.env.PORT ?? 3100);
  const keys = new KeyBuilder({ redis: { keyPrefix: process.env.KEY_PREFIX ?? 'floor' } } as AppConfig);
  const { redis, run } = await connectScriptRedis(process.env.REDIS_URL ?? 'redis://127.0.0.1:6379', { maxRetriesPerRequest: 1 });
  const maxLen = Number(process.env.ORDERS_EVENTS_MAXLEN ?? 100_000);
  const retentionMs = Number(process.env.ORDERS_RETENTION_SECONDS ?? 90 * 86_400) * 1000;
  const owner = randomUUID().slice(0, 8);
  const resumes = queueKeys(keys, RESUME_QUEUE);
  const expiry = queueKeys(keys, EXPIRY_QUEUE);

  const app = Fastify({ logger: false });
  app.post<{ Params: { planId: string } }>('/pay/:planId', async (req, reply) => {
    const { planId } = req.params;
    const orderId = planId.slice(0, planId.lastIndexOf('_'));
    const [order, plan, events] = orderKeys(keys, orderId, planId);
    const read = async () => {
      const [, o, p] = await run<[number, string[], string[]]>('orders/read', [order, plan]);
      return { o: fields(o), p: fields(p) };
    };
    const { o } = await read();
    const lock = lockKeys(keys, planLockName(planId));
    const token = `${owner}:${randomUUID()}`;
    const [held, fence, leaseEnd] = await run<[number, string, number]>('locks/acquire', [lock.hash, lock.fence], [token, 'w', 30_000, 0, 3_600_000, 0, 0]);
    if (held !== 1) return reply.code(409).send({ error: 'LOCK_CONTENDED' });
    try {
      const { p } = await read();
      const index = orderIndexKey(keys, orderNumberKeyOf(o.merchantId, o.merchantOrderNo));
      let versions = [Number(o.version), Number(p.version)];
      const write = async (orderPatch: object | undefined, planPatch: object, event = '', clock: string[] = []) => {
        const [c, ov, pv] = await run<number[]>(
          'orders/write',
          [order, plan, events, index],
          [
            'plan',
            fence,
            orderPatch ? versions[0] : '',
            JSON.stringify(orderPatch ?? {}),
            versions[1],
            JSON.stringify(planPatch),
            event,
            maxLen,
            orderPatch && !event ? o.expiresAt : '',
            retentionMs,
            clock.length / 2,
            0,
            ...clock,
          ],
        );
        if (c !== 0) throw Object.assign(new Error(`write refused: ${c}`), { statusCode: 409 });
        versions = [ov, pv];
      };
      const legs = (status: string) =>
        JSON.stringify((JSON.parse(p.instructions) as { method: string; amount: number }[]).map(({ method, amount }) => ({ method, amount, status })));
      // The resume entry, due once the lock's lease is over (plus the query delay), armed before each step that may stop.
      const armResume = () =>
        run('delay-queue/schedule', resumes.keys, [planId, 'at', Number(leaseEnd) + 30_000, JSON.stringify({ planId }), 'replace', resumes.channel]);
      await armResume();
      await write({ status: 'PAYING' }, { status: 'PAYING' });
      await armResume();
      await write(undefined, { instructions: legs('SENT') });
      const leg = (JSON.parse(p.instructions) as { method: string; amount: number }[])[0];
      const ledger = channelLedgerKey(keys, leg.method, legReference({ planId, legStamp: p.legStamp ?? '' }, 0));
      await run('orders/channel-ledger', [ledger], ['pay', leg.amount, 'success', retentionMs]);
      await write(undefined, { instructions: legs('SUCCEEDED') });
      await write({ status: 'PAID', paidPlan: planId, activePlan: '' }, { status: 'PAID' }, 'order.paid', ['paidAt', '0']);
      await run('delay-queue/cancel', resumes.keys, [planId, resumes.channel]);
      await run('delay-queue/cancel', expiry.keys, [orderId, expiry.channel]);
      return { planId, status: 'PAID' };
    } finally {
      await run('locks/release', [lock.hash], [token, lock.channel]);
    }
  });
  await serveUntilSignal('pay-floor-server', port, app, redis);
}

main().catch((err) => {
  console.error('pay-floor-server failed:', err);
  process.exit(1);
});
