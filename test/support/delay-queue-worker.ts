/**
 * One delay-queue worker process for the end-to-end tests (test/e2e/delay-queue.e2e-spec.ts).
 *
 * Boots the built application context from the environment, registers one
 * processor with `DelayQueueService.process()`, and records every delivery in
 * Redis under DQW_RECORD, a namespace of its own (never the engine's keys):
 *   <record>:log              "start|end <id> <attempt> <pid> <run> <localMs> <dueAt>", in order
 *   <record>:active           id -> "<pid>:<attempt>:<run>" while a handler of that id runs
 *   <record>:violations       one line per handler that started while a live process still ran the same id,
 *                             or got a payload that is not its own
 *   <record>:summary:<pid>    this process's fired/acked/retried/dead counters, written on a graceful stop
 * <run> numbers this process's handler calls: a log line or mark seen twice
 * with the same <run> is one write that the recorder's connection sent again
 * after a Redis restart, not a second delivery.
 *
 * Settings (env): REDIS_URL, REDIS_KEY_PREFIX and the app's other variables;
 * DQW_QUEUE, DQW_RECORD, DQW_CONCURRENCY, DQW_VISIBILITY_MS, DQW_MAX_ATTEMPTS,
 * DQW_POLL_MS, DQW_SLEEP_MS (each handler's run time; it ignores its abort
 * signal, like a handler stuck in a slow call).
 *
 * Run it as `node --require tsx/cjs test/support/delay-queue-worker.ts` with an
 * IPC channel: it sends {type: 'ready'} once the processor is registered and
 * exits when the channel closes (its parent died). Not through the `tsx` CLI,
 * which runs the program in a child process, so a kill -9 would hit the
 * wrapper only. SIGTERM stops it like `main.ts` does: `app.close()` (running
 * handlers get the grace, the rest is handed back), then the summary, exit 0.
 *
 * The application comes from dist/ (`npm run build`; `npm test` builds first):
 * Nest's dependency injection needs the decorator metadata that tsc emits and
 * tsx does not.
 */
import { NestFactory } from '@nestjs/core';
import Redis from 'ioredis';
import { join, resolve } from 'node:path';
import type { Delivery } from '../../src/engines/delay-queue/delay-queue.types';

const DIST = resolve(__dirname, '../../dist');
const fromDist = <M>(path: string): M => require(join(DIST, path)) as M;
const { loadConfig } = fromDist<typeof import('../../src/platform/config/load-config')>('platform/config/load-config');
const { AppModule } = fromDist<typeof import('../../src/app.module')>('app.module');
const { DelayQueueService } = fromDist<typeof import('../../src/engines/delay-queue/delay-queue.service')>('engines/delay-queue/delay-queue.service');
const { DelayQueueMetrics } = fromDist<typeof import('../../src/engines/delay-queue/delay-queue.metrics')>('engines/delay-queue/delay-queue.metrics');

interface Payload {
  id?: string;
}

const env = process.env;
const setting = (name: string, dflt?: number): number => {
  const v = env[name] === undefined ? dflt : Number(env[name]);
  if (v === undefined || !Number.isFinite(v)) throw new Error(`${name} must be a number`);
  return v;
};
const queue = env.DQW_QUEUE ?? '';
const record = env.DQW_RECORD ?? '';
if (!queue || !record) throw new Error('DQW_QUEUE and DQW_RECORD are required');
const sleepMs = setting('DQW_SLEEP_MS', 0);
const pid = process.pid;
let runs = 0;
const keys = { log: `${record}:log`, active: `${record}:active`, violations: `${record}:violations`, summary: `${record}:summary:${pid}` };

// Compare-and-delete: only the handler that set the mark clears it.
const CLEAR_MARK = "if redis.call('HGET', KEYS[1], ARGV[1]) == ARGV[2] then return redis.call('HDEL', KEYS[1], ARGV[1]) end return 0";

// Waits out a Redis restart (queues while disconnected), so the record has a gap only where the engine has one.
const rec = new Redis(env.REDIS_URL ?? '', { maxRetriesPerRequest: null });

function isAlive(p: number): boolean {
  try {
    process.kill(p, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/** Marks `id` as running here; a mark left by a process that no longer exists (kill -9) is stale, not an overlap. */
async function markActive(id: string, me: string): Promise<void> {
  if ((await rec.hsetnx(keys.active, id, me)) === 1) return;
  const holder = await rec.hget(keys.active, id);
  if (holder && holder !== me && isAlive(Number(holder.split(':')[0]))) await rec.rpush(keys.violations, `${id} ${me} overlaps ${holder}`);
  await rec.hset(keys.active, id, me);
}

async function handle(d: Delivery<Payload>): Promise<void> {
  const run = ++runs;
  const me = `${pid}:${d.attempt}:${run}`;
  await markActive(d.id, me);
  await rec.rpush(keys.log, `start ${d.id} ${d.attempt} ${pid} ${run} ${Date.now()} ${d.dueAt}`);
  if (d.payload?.id !== undefined && d.payload.id !== d.id) await rec.rpush(keys.violations, `${d.id} ${me} got the payload of ${d.payload.id}`);
  if (sleepMs > 0) await new Promise((r) => setTimeout(r, sleepMs));
  await rec.rpush(keys.log, `end ${d.id} ${d.attempt} ${pid} ${run} ${Date.now()} ${d.dueAt}`);
  await rec.eval(CLEAR_MARK, 1, keys.active, d.id, me);
}

async function main(): Promise<void> {
  const config = loadConfig(env);
  const app = await NestFactory.createApplicationContext(AppModule.forRoot(config), { logger: ['error', 'warn'] });
  const metrics = app.get(DelayQueueMetrics);

  let stopping = false;
  process.once('SIGTERM', () => {
    if (stopping) return;
    stopping = true;
    setTimeout(() => process.exit(70), 20_000).unref();
    void (async () => {
      await app.close();
      const count = async (c: typeof metrics.acked) => String((await c.get()).values.find((v) => v.labels.queue === queue)?.value ?? 0);
      await rec.hset(keys.summary, {
        fired: await count(metrics.fired),
        acked: await count(metrics.acked),
        retried: await count(metrics.retried),
        dead: await count(metrics.dead),
      });
      rec.disconnect();
      process.exit(0);
    })().catch((err: Error) => {
      console.error('stop failed:', err);
      process.exit(1);
    });
  });

  await app.get(DelayQueueService).process<Payload>(queue, handle, {
    concurrency: setting('DQW_CONCURRENCY', 10),
    retry: { visibilityMs: setting('DQW_VISIBILITY_MS', 30_000), attempts: setting('DQW_MAX_ATTEMPTS', 5) },
    pollMs: setting('DQW_POLL_MS', 1000),
  });
  process.send?.({ type: 'ready', pid });
}

process.on('disconnect', () => process.exit(1));
main().catch((err: Error) => {
  console.error('worker failed:', err);
  process.exit(1);
});
