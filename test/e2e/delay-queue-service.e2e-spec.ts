import { randomBytes } from 'node:crypto';
import { copyFileSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Logger } from '@nestjs/common';
import Redis from 'ioredis';
import { DelayQueueArgumentError } from '../../src/engines/delay-queue/delay-queue.errors';
import { queueKeys, registryKey } from '../../src/engines/delay-queue/delay-queue.keys';
import { DelayQueueService } from '../../src/engines/delay-queue/delay-queue.service';
import { DelayQueueStore } from '../../src/engines/delay-queue/delay-queue.store';
import type { Delivery, ProcessOptions, When } from '../../src/engines/delay-queue/delay-queue.types';
import { KeyBuilder } from '../../src/platform/redis/key-builder';
import { ScriptInvalidStateError, ScriptNotFoundError } from '../../src/platform/scripts/script.errors';
import { DEFAULT_LUA_DIR, loadScriptFile, type ScriptDefinition } from '../../src/platform/scripts/script-loader';
import { ScriptArg, ScriptRegistry } from '../../src/platform/scripts/script-registry.service';
import { rawConnection, waitUntil } from '../harness/redis-process';
import { RedisServerHandle, startRedisServer } from '../harness/redis-server';
import { startTestApp, TestApp } from '../support/test-app';
import { setTimeout as sleep } from 'node:timers/promises';

/**
 * The delay-queue API against a real redis-server: idempotent scheduling,
 * cancel in every state, reschedule/get/stats/dead letters, retries with
 * backoff, the Redis clock, and argument checks. Item states that need a
 * worker (ready, in flight, dead) are made by calling the claim/fail scripts
 * directly, so no test here depends on a processor's timing unless it is
 * about the processor.
 */
describe(DelayQueueService.name, () => {
  let redis: RedisServerHandle;
  let t: TestApp;
  let dq: DelayQueueService;
  let scripts: ScriptRegistry;
  let keyBuilder: KeyBuilder;
  let raw: Redis;

  beforeAll(async () => {
    redis = await startRedisServer();
    // No test here is about command timeouts: 10 s instead of the test app's 500 ms, so a busy machine (both cores
    // loaded, a GC pause) cannot turn a healthy Redis into "Command timed out" mid-test.
    t = await startTestApp(redis.url, { REDIS_COMMAND_TIMEOUT_MS: '10000' });
    dq = t.app.get(DelayQueueService);
    scripts = t.app.get(ScriptRegistry);
    keyBuilder = t.app.get(KeyBuilder);
    raw = rawConnection(redis);
  });

  afterAll(async () => {
    raw?.disconnect();
    await t?.close();
    await redis?.destroy();
  });

  afterEach(() => jest.restoreAllMocks());

  /** A queue name of its own for each test (one processor per queue per instance). */
  const newQueue = (name: string) => `${name}-${randomBytes(3).toString('hex')}`;
  const keysOf = (queue: string) => queueKeys(keyBuilder, queue);
  const run = <R>(queue: string, script: string, args: ScriptArg[]) => scripts.run<R>(`delay-queue/${script}`, keysOf(queue).keys, args);
  /** One claim step, as a worker runs it; returns the claimed deliveries. */
  const claimDeliveries = async (queue: string, want: number, maxAttempts = 5, visibilityMs = 30_000) => {
    const r = await run<Array<string | number>>(queue, 'claim', [want, visibilityMs, maxAttempts, 1000, keysOf(queue).channel]);
    const out: Array<{ id: string; token: number }> = [];
    for (let i = 6; i < r.length; i += CLAIMED_FIELDS) out.push({ id: String(r[i]), token: Number(r[i + 4]) });
    return out;
  };
  const claim = async (queue: string, want: number, maxAttempts = 5) => (await claimDeliveries(queue, want, maxAttempts)).map((d) => d.id);
  /** Makes `id` a dead letter through the scripts a worker runs: claim it, then fail its only allowed delivery. */
  const makeDead = async (queue: string, id: string, payload: unknown, error: string) => {
    await dq.schedule(queue, id, { dueAt: 1 }, payload);
    const [d] = await claimDeliveries(queue, 1, 1);
    expect(d.id).toBe(id);
    expect(await run<number>(queue, 'fail', [id, d.token, 1, 0, error, 'fail', keysOf(queue).channel])).toBe(2);
  };
  const redisNow = async () => {
    const [s, us] = await raw.time();
    return Number(s) * 1000 + Math.floor(Number(us) / 1000);
  };
  /** Every key stored for `queue`, with its type. */
  const storedKeys = async (queue: string) => {
    const found = await raw.keys(`${keyBuilder.prefix}:delay-queue:{q:${queue}}:*`);
    return Promise.all(found.map(async (key) => ({ key, type: await raw.type(key) })));
  };
  /** The keys that hold items: all but the fencing-token counter, which outlives them on purpose. */
  const itemKeys = async (queue: string) => (await storedKeys(queue)).filter((k) => k.key !== keysOf(queue).keys[SEQ]);
  /** Records every script call the app makes, with its result (the real call still runs). */
  const recordScripts = () => {
    const calls: Array<{ script: string; args: readonly ScriptArg[]; result: unknown }> = [];
    const original = scripts.run.bind(scripts);
    jest.spyOn(scripts, 'run').mockImplementation((async (script: string, keys: readonly string[], args: readonly ScriptArg[] = []) => {
      const result = await original(script, keys, args);
      calls.push({ script, args, result });
      return result;
    }) as ScriptRegistry['run']);
    return calls;
  };
  /** What each ack of `id` answered (an ack call carries (id, token) pairs and answers one flag per pair). */
  const ackResults = (calls: ReturnType<typeof recordScripts>, id: string) =>
    calls
      .filter((c) => c.script === 'delay-queue/ack')
      .flatMap((c) => c.args.flatMap((arg, i) => (i % 2 === 0 && arg === id ? [(c.result as number[])[i / 2]] : [])));

  describe('duplicate schedules', () => {
    it('scheduling an id again replaces its due time and payload, leaving one entry', async () => {
      const q = newQueue('dup');
      const first = await dq.schedule(q, 'order-1', { delayMs: 60_000 }, { v: 1 });
      const second = await dq.schedule(q, 'order-1', { delayMs: 120_000 }, { v: 2 });
      expect(first).toMatchObject({ written: true, created: true });
      expect(second).toMatchObject({ written: true, created: false });
      expect(second.dueAt - first.dueAt).toBeGreaterThanOrEqual(60_000);
      expect(second.dueAt - first.dueAt).toBeLessThan(62_000);

      const [pending, , , , payloads] = keysOf(q).keys;
      expect(await raw.zcard(pending)).toBe(1);
      expect(await raw.hlen(payloads)).toBe(1);
      expect(await dq.stats(q)).toMatchObject({ pending: 1, ready: 0, inFlight: 0, dead: 0, nextDueAt: second.dueAt });
      expect(await dq.get(q, 'order-1')).toEqual({ id: 'order-1', state: 'pending', at: second.dueAt, payload: { v: 2 }, attempts: 0 });
    });

    it('replacing a dead letter makes a fresh pending item: no dead entry, no delivery count, no error', async () => {
      const q = newQueue('dup-dead');
      await makeDead(q, 'job', { v: 1 }, 'Error: boom');
      expect(await dq.get(q, 'job')).toMatchObject({ state: 'dead', attempts: 1, lastError: 'Error: boom' });

      const r = await dq.schedule(q, 'job', { delayMs: 60_000 }, { v: 2 });
      expect(r).toMatchObject({ written: true, created: false });
      expect(await dq.get(q, 'job')).toEqual({ id: 'job', state: 'pending', at: r.dueAt, payload: { v: 2 }, attempts: 0 });
      expect(await dq.stats(q)).toMatchObject({ pending: 1, ready: 0, inFlight: 0, dead: 0 });
    });

    it("{ifExists: 'keep'} leaves the first entry untouched and reports its due time", async () => {
      const q = newQueue('keep');
      const first = await dq.schedule(q, 'x', { delayMs: 60_000 }, { v: 1 }, { ifExists: 'keep' });
      expect(first).toMatchObject({ written: true, created: true });
      const kept = await dq.schedule(q, 'x', { delayMs: 1_000 }, { v: 2 }, { ifExists: 'keep' });
      expect(kept).toEqual({ written: false, created: false, dueAt: first.dueAt });
      expect(await dq.get(q, 'x')).toMatchObject({ state: 'pending', at: first.dueAt, payload: { v: 1 } });
      expect(await raw.zcard(keysOf(q).keys[0])).toBe(1);
    });

    it('100 concurrent schedules of one id leave exactly one entry, delivered exactly once', async () => {
      const q = newQueue('dup-race');
      const results = await Promise.all(Array.from({ length: 100 }, (_, n) => dq.schedule(q, 'same', { delayMs: 0 }, { n })));
      expect(results.filter((r) => r.created)).toHaveLength(1);
      expect(results.every((r) => r.written)).toBe(true);
      const [pending, , , , payloads] = keysOf(q).keys;
      expect(await raw.zcard(pending)).toBe(1);
      expect(await raw.hlen(payloads)).toBe(1);
      const stored = (await dq.get<{ n: number }>(q, 'same'))!.payload;

      const seen: Array<{ n: number }> = [];
      const p = await dq.process<{ n: number }>(q, async (d) => void seen.push(d.payload));
      try {
        // Once the queue is empty nothing is left that could be delivered again.
        await waitUntil('the queue to drain', async () => seen.length > 0 && (await itemKeys(q)).length === 0, 5_000);
      } finally {
        await p.stop();
      }
      expect(seen).toEqual([stored]);
    });

    it('replacing an in-flight item aborts the running delivery, whose late ack then does nothing', async () => {
      const q = newQueue('dup-inflight');
      const calls = recordScripts();
      const started = deferred<Delivery<{ v: number }>>();
      const release = deferred();
      const p = await dq.process<{ v: number }>(q, async (d) => {
        started.resolve(d);
        await release.promise; // a handler that ignores its signal
      });
      try {
        await dq.schedule(q, 'job', { delayMs: 0 }, { v: 1 });
        const d1 = await started.promise;
        expect(d1.signal.aborted).toBe(false);

        const r = await dq.schedule(q, 'job', { delayMs: 60_000 }, { v: 2 });
        expect(r).toMatchObject({ written: true, created: false });
        await waitUntil('the replaced delivery to be aborted', async () => d1.signal.aborted, 3_000);
        expect(await d1.stillWanted()).toBe(false);

        release.resolve();
        await waitUntil('the old delivery to try its ack', async () => ackResults(calls, 'job').length === 1, 3_000);
        expect(ackResults(calls, 'job')).toEqual([0]);
        expect(await dq.get(q, 'job')).toEqual({ id: 'job', state: 'pending', at: r.dueAt, payload: { v: 2 }, attempts: 0 });
      } finally {
        release.resolve();
        await p.stop();
      }
    });

    it('the late ack of a replaced delivery does not ack the replacement once that is in flight too', async () => {
      const q = newQueue('dup-fence');
      const calls = recordScripts();
      const started = [deferred<Delivery<{ v: number }>>(), deferred<Delivery<{ v: number }>>()];
      const release = [deferred(), deferred()];
      const p = await dq.process<{ v: number }>(
        q,
        async (d) => {
          const v = d.payload.v;
          started[v].resolve(d);
          await release[v].promise;
          if (v === 1) throw new Error('second version failed');
        },
        { retry: { backoff: { initialMs: 60_000 } } },
      );
      try {
        await dq.schedule(q, 'job', { delayMs: 0 }, { v: 0 });
        const d0 = await started[0].promise;
        await dq.schedule(q, 'job', { delayMs: 0 }, { v: 1 });
        const d1 = await started[1].promise;
        expect(d0.signal.aborted).toBe(true);
        expect(d1.signal.aborted).toBe(false);

        // The first version's handler finishes now: its ack must not count for the second version's delivery.
        release[0].resolve();
        await waitUntil('the old delivery to try its ack', async () => ackResults(calls, 'job').length === 1, 3_000);
        expect(ackResults(calls, 'job')).toEqual([0]);
        expect(await dq.get(q, 'job')).toMatchObject({ state: 'in-flight', payload: { v: 1 } });

        // The second version fails: it must be retried, not lost.
        release[1].resolve();
        await waitUntil('the second delivery to be failed', async () => (await dq.get(q, 'job'))?.state !== 'in-flight', 3_000);
        expect(await dq.get(q, 'job')).toMatchObject({ state: 'pending', payload: { v: 1 }, attempts: 1, lastError: 'Error: second version failed' });
      } finally {
        release.forEach((r) => r.resolve());
        await p.stop();
      }
    });
  });

  describe('cancel', () => {
    it('reports where the item was (pending, ready, in flight, dead, absent) and removes every trace of it', async () => {
      const q = newQueue('cancel');
      const { channel } = keysOf(q);
      await dq.schedule(q, 'flying', { dueAt: 1 }, 'f');
      const [flying] = await claimDeliveries(q, 1);
      expect(flying.id).toBe('flying');
      await makeDead(q, 'dead', 'd', 'Error: boom');
      await dq.schedule(q, 'ready', { delayMs: 0 }, 'r');
      expect(await claim(q, 0)).toEqual([]); // promotes only
      await dq.schedule(q, 'pending', { delayMs: 60_000 }, 'p');
      const states = await Promise.all(['pending', 'ready', 'flying', 'dead'].map(async (id) => (await dq.get(q, id))?.state));
      expect(states).toEqual(['pending', 'ready', 'in-flight', 'dead']);

      expect(await dq.cancel(q, 'pending')).toEqual({ wasPending: true, state: 'pending', attempts: 0 });
      expect(await dq.cancel(q, 'ready')).toEqual({ wasPending: true, state: 'ready', attempts: 0 });
      expect(await dq.cancel(q, 'flying')).toEqual({ wasPending: false, state: 'in-flight', attempts: 1 });
      expect(await dq.cancel(q, 'dead')).toEqual({ wasPending: false, state: 'dead', attempts: 1 });
      expect(await dq.cancel(q, 'never-scheduled')).toEqual({ wasPending: false, state: 'absent', attempts: 0 });
      expect(await dq.cancel(q, 'pending')).toEqual({ wasPending: false, state: 'absent', attempts: 0 });

      expect(await itemKeys(q)).toEqual([]);
      // The cancelled delivery can no longer be extended, acked or failed.
      expect(await run<number>(q, 'extend', ['flying', flying.token, 30_000])).toBe(0);
      expect(await run<number[]>(q, 'ack', ['flying', flying.token])).toEqual([0]);
      expect(await run<number>(q, 'fail', ['flying', flying.token, 5, 0, 'late', 'fail', channel])).toBe(0);
      expect(await itemKeys(q)).toEqual([]);
    });

    it('cancelled items never fire; the others do', async () => {
      const q = newQueue('cancel-fire');
      const ids = Array.from({ length: 20 }, (_, i) => `item-${i}`);
      await Promise.all(ids.map((id) => dq.schedule(q, id, { delayMs: 200 }, id)));
      const cancelled = ids.filter((_, i) => i % 2 === 0);
      for (const r of await Promise.all(cancelled.map((id) => dq.cancel(q, id)))) expect(r).toEqual({ wasPending: true, state: 'pending', attempts: 0 });

      const fired: string[] = [];
      const p = await dq.process<string>(q, async (d) => void fired.push(d.id), { concurrency: 5 });
      try {
        await waitUntil('the queue to drain', async () => fired.length >= 10 && (await itemKeys(q)).length === 0, 5_000);
      } finally {
        await p.stop();
      }
      expect(fired.sort()).toEqual(ids.filter((_, i) => i % 2 === 1).sort());
    });

    it('is O(log n): a constant handful of point commands on zsets and hashes, whatever the queue holds', async () => {
      const q = newQueue('cancel-cost');
      await Promise.all(Array.from({ length: 2_000 }, (_, i) => dq.schedule(q, `bulk-${i}`, { delayMs: 60_000 + i }, { i })));
      await makeDead(q, 'victim', 'v', 'Error: boom'); // dead: the last place cancel looks

      const monitor = await monitorOf(redis);
      const commands: string[] = [];
      let markerSeen = false;
      // Only what the cancel's own script runs: a script's commands follow its EVAL/EVALSHA line in MONITOR, and other
      // scripts (background workers of the app) may run in between, each after its own line.
      let inCancel = false;
      monitor.on('monitor', (_time: string, args: string[], source: string) => {
        const name = String(args[0]).toLowerCase();
        if (source === 'lua') {
          if (inCancel) commands.push(name);
          return;
        }
        inCancel = (name === 'evalsha' || name === 'eval') && args.some((a) => String(a).includes(q));
        if (name === 'echo' && args[1] === 'cancel-done') markerSeen = true;
      });
      try {
        expect(await dq.cancel(q, 'victim')).toEqual({ wasPending: false, state: 'dead', attempts: 1 });
        // MONITOR reports in execution order: once the marker shows, every command of the cancel has too.
        await raw.echo('cancel-done');
        await waitUntil('MONITOR to report the cancel', async () => markerSeen, 10_000);
      } finally {
        monitor.disconnect();
      }
      expect(new Set(commands)).toEqual(new Set(['zscore', 'zrem', 'hget', 'hdel']));
      expect(commands.length).toBeLessThanOrEqual(13);

      // Items live only in zsets and hashes (plus the token counter): no list that anything could scan.
      const stored = await storedKeys(q);
      expect(stored.length).toBeGreaterThanOrEqual(3);
      for (const { key, type } of stored) expect(`${key} ${type}`).toMatch(key === keysOf(q).keys[SEQ] ? / string$/ : / (zset|hash)$/);
    });
  });

  describe('reschedule, get, stats, listQueues, dead letters', () => {
    it('stats count every state and report how overdue the oldest due item is when no worker runs', async () => {
      const q = newQueue('stats');
      expect(await dq.stats(q)).toEqual({ queue: q, pending: 0, ready: 0, inFlight: 0, dead: 0, oldestOverdueMs: 0, nextDueAt: null });

      const now = await redisNow();
      await dq.schedule(q, 'later', { delayMs: 60_000 }, 1);
      const later = await dq.stats(q);
      expect(later).toMatchObject({ pending: 1, oldestOverdueMs: 0 });
      expect(later.nextDueAt! - now).toBeGreaterThanOrEqual(60_000);

      await dq.schedule(q, 'overdue', { dueAt: now - 5_000 }, 2);
      const overdue = await dq.stats(q);
      expect(overdue).toMatchObject({ pending: 2, ready: 0, nextDueAt: now - 5_000 });
      expect(overdue.oldestOverdueMs).toBeGreaterThanOrEqual(5_000);
      expect(overdue.oldestOverdueMs).toBeLessThan(10_000);

      await claim(q, 0); // 'overdue' moves to ready, still unclaimed
      const ready = await dq.stats(q);
      expect(ready).toMatchObject({ pending: 1, ready: 1, inFlight: 0, dead: 0, nextDueAt: later.nextDueAt });
      expect(ready.oldestOverdueMs).toBeGreaterThanOrEqual(5_000);

      expect(await claim(q, 1)).toEqual(['overdue']);
      await makeDead(q, 'dead', 3, 'Error: x');
      expect(await dq.stats(q)).toMatchObject({ pending: 1, ready: 0, inFlight: 1, dead: 1, oldestOverdueMs: 0, nextDueAt: later.nextDueAt });
    });

    it('get returns the state, due time, payload, delivery count and last error, or null', async () => {
      const q = newQueue('get');
      expect(await dq.get(q, 'nothing')).toBeNull();
      const s = await dq.schedule(q, 'a', { delayMs: 60_000 }, { nested: { list: [1, 'two', null] } });
      expect(await dq.get(q, 'a')).toEqual({ id: 'a', state: 'pending', at: s.dueAt, payload: { nested: { list: [1, 'two', null] } }, attempts: 0 });

      await dq.schedule(q, 'b', { dueAt: 1 }, 'b');
      expect(await claim(q, 1)).toEqual(['b']);
      const inFlight = await dq.get(q, 'b');
      const now = await redisNow();
      expect(inFlight).toMatchObject({ state: 'in-flight', payload: 'b', attempts: 1 });
      expect(inFlight!.at - now).toBeGreaterThan(25_000); // the visibility deadline
      expect(inFlight!.at - now).toBeLessThanOrEqual(30_000);
      expect(inFlight).not.toHaveProperty('lastError');

      await makeDead(q, 'c', null, 'Error: bad');
      expect(await dq.get(q, 'c')).toMatchObject({ state: 'dead', payload: null, attempts: 1, lastError: 'Error: bad' });
    });

    it('reschedule moves a pending or ready item (payload kept) and refuses absent (404), in-flight and dead (409) ones', async () => {
      const q = newQueue('resched');
      const s = await dq.schedule(q, 'p', { delayMs: 60_000 }, { keep: 'me' });
      const now = await redisNow();
      const due = await dq.reschedule(q, 'p', { delayMs: 120_000 });
      expect(due - now).toBeGreaterThanOrEqual(120_000);
      expect(due - now).toBeLessThan(121_000);
      expect(due).toBeGreaterThan(s.dueAt);
      expect(await dq.get(q, 'p')).toEqual({ id: 'p', state: 'pending', at: due, payload: { keep: 'me' }, attempts: 0 });
      expect(await dq.reschedule(q, 'p', { dueAt: new Date(now + 5_000) })).toBe(now + 5_000);
      expect(await raw.zcard(keysOf(q).keys[0])).toBe(1);

      await dq.schedule(q, 'r', { delayMs: 0 }, 'r');
      await claim(q, 0);
      expect((await dq.get(q, 'r'))?.state).toBe('ready');
      const rDue = await dq.reschedule(q, 'r', { delayMs: 30_000 });
      expect(await dq.get(q, 'r')).toMatchObject({ state: 'pending', at: rDue });
      expect(await dq.stats(q)).toMatchObject({ pending: 2, ready: 0 });

      await expect(dq.reschedule(q, 'absent', { delayMs: 1 })).rejects.toBeInstanceOf(ScriptNotFoundError);
      await dq.schedule(q, 'f', { dueAt: 1 }, 'f');
      expect(await claim(q, 1)).toEqual(['f']);
      await expect(dq.reschedule(q, 'f', { delayMs: 1 })).rejects.toBeInstanceOf(ScriptInvalidStateError);
      await makeDead(q, 'd', 'd', 'Error: x');
      await expect(dq.reschedule(q, 'd', { delayMs: 1 })).rejects.toBeInstanceOf(ScriptInvalidStateError);
      expect(await dq.get(q, 'f')).toMatchObject({ state: 'in-flight' });
      expect(await dq.get(q, 'd')).toMatchObject({ state: 'dead' });
    });

    it('listQueues names every queue scheduled on, sorted, from the shared registry', async () => {
      const names = [newQueue('zz-list'), newQueue('aa-list'), newQueue('mm-list')];
      for (const q of names) await dq.schedule(q, 'x', { delayMs: 60_000 }, 1);
      const listed = await dq.listQueues();
      expect(listed).toEqual(expect.arrayContaining(names));
      expect(listed).toEqual([...listed].sort());
      expect(await raw.smembers(registryKey(keyBuilder))).toEqual(expect.arrayContaining(names));
    });

    it('deadLetters pages newest first; retryDead revives one with a fresh count and 404s for anything not dead', async () => {
      const q = newQueue('dead');
      const ids = Array.from({ length: 7 }, (_, i) => `d${i}`);
      for (const [i, id] of ids.entries()) await makeDead(q, id, { i }, `Error: e${i}`);

      const pages = [await dq.deadLetters(q, 0, 3), await dq.deadLetters(q, 3, 3), await dq.deadLetters(q, 6, 3), await dq.deadLetters(q, 9, 3)];
      expect(pages.map((p) => [p.total, p.offset, p.limit, p.items.length])).toEqual([
        [7, 0, 3, 3],
        [7, 3, 3, 3],
        [7, 6, 3, 1],
        [7, 9, 3, 0],
      ]);
      const all = pages.flatMap((p) => p.items);
      expect(all.map((d) => d.id).sort()).toEqual(ids);
      for (let i = 1; i < all.length; i++) expect(all[i].diedAt).toBeLessThanOrEqual(all[i - 1].diedAt);
      for (const d of all) {
        const i = Number(d.id.slice(1));
        expect(d).toMatchObject({ payload: { i }, attempts: 1, lastError: `Error: e${i}` });
      }
      expect((await dq.deadLetters(q)).items).toHaveLength(7);

      await dq.schedule(q, 'alive', { delayMs: 60_000 }, 'a');
      for (const id of ['alive', 'never']) {
        await expect(dq.retryDead(q, id)).rejects.toBeInstanceOf(ScriptNotFoundError);
      }
      expect(await dq.get(q, 'alive')).toMatchObject({ state: 'pending' });

      const before = await redisNow();
      const due = await dq.retryDead(q, 'd3');
      expect(due).toBeGreaterThanOrEqual(before);
      expect(await dq.get(q, 'd3')).toEqual({ id: 'd3', state: 'pending', at: due, payload: { i: 3 }, attempts: 0 });
      expect((await dq.deadLetters(q)).total).toBe(6);
      await expect(dq.retryDead(q, 'd3')).rejects.toBeInstanceOf(ScriptNotFoundError);
    });
  });

  describe('retries', () => {
    it('retries a throwing handler with growing backoff up to maxAttempts, then dead-letters it with its last error; retryDead brings it back', async () => {
      const q = newQueue('retry');
      const errors: unknown[][] = [];
      jest.spyOn(Logger.prototype, 'error').mockImplementation((...args: unknown[]) => void errors.push(args));
      let failing = true;
      const deliveries: Array<{ attempt: number; at: number }> = [];
      // Delays are half fixed, half random: [25, 50], [100, 200], [400, 800] ms.
      const p = await dq.process(
        q,
        async (d) => {
          deliveries.push({ attempt: d.attempt, at: performance.now() });
          if (failing) throw new Error(`boom ${d.attempt}`);
        },
        { retry: { attempts: 4, backoff: { initialMs: 50, factor: 4, maxMs: 10_000 } } },
      );
      try {
        await dq.schedule(q, 'flaky', { delayMs: 0 }, { card: 'x' });
        await waitUntil('the item to die', async () => (await dq.stats(q)).dead === 1, 10_000);
        expect(deliveries.map((d) => d.attempt)).toEqual([1, 2, 3, 4]);
        const gaps = deliveries.slice(1).map((d, i) => d.at - deliveries[i].at);
        const floors = [25, 100, 400];
        gaps.forEach((gap, i) => expect(gap).toBeGreaterThanOrEqual(floors[i] - 5));
        expect(gaps[1]).toBeGreaterThan(gaps[0]);
        expect(gaps[2]).toBeGreaterThan(gaps[1]);

        expect(await dq.get(q, 'flaky')).toMatchObject({ state: 'dead', attempts: 4, lastError: 'Error: boom 4', payload: { card: 'x' } });
        // Logged at error once, when it died (not for its three retries), naming it without its payload.
        const lines = errors.filter(([fields]) => (fields as { queue?: string }).queue === q);
        expect(lines.map(([fields]) => fields)).toEqual([{ queue: q, id: 'flaky', attempts: 4, lastError: 'Error: boom 4' }]);
        expect(JSON.stringify(lines)).not.toContain('card');
        const page = await dq.deadLetters(q);
        expect(page.items).toEqual([expect.objectContaining({ id: 'flaky', attempts: 4, lastError: 'Error: boom 4' })]);

        failing = false;
        await dq.retryDead(q, 'flaky');
        await waitUntil('the revived item to be handled', async () => (await itemKeys(q)).length === 0, 5_000);
        expect(deliveries.map((d) => d.attempt)).toEqual([1, 2, 3, 4, 1]);
        expect(await dq.get(q, 'flaky')).toBeNull();
      } finally {
        await p.stop();
      }
    });
  });

  describe('lost deliveries', () => {
    it('a delivery nobody extends goes back to ready after its visibility timeout, or to dead once it used up its deliveries', async () => {
      const q = newQueue('lost');
      await dq.schedule(q, 'again', { dueAt: 1 }, 'a');
      await dq.schedule(q, 'last', { dueAt: 2 }, 'l');
      const first = await claimDeliveries(q, 2, 2, 100);
      expect(first.map((d) => d.id)).toEqual(['again', 'last']);
      // Nobody extends them: once the deadline passes, the next claim (here one that takes nothing) puts both back.
      await sleep(150);
      expect(await claimDeliveries(q, 0, 2, 100)).toEqual([]);
      for (const id of ['again', 'last']) expect(await dq.get(q, id)).toMatchObject({ state: 'ready', attempts: 1 });
      const second = await claimDeliveries(q, 2, 2, 100);
      expect(second.map((d) => d.id).sort()).toEqual(['again', 'last']);
      for (const d of second) expect(d.token).toBeGreaterThan(Math.max(...first.map((f) => f.token)));
      // The first holders' tokens are worthless now.
      for (const d of first) expect(await run<number[]>(q, 'ack', [d.id, d.token])).toEqual([0]);

      // Silent again, on their last allowed delivery: dead, with the reason recorded; the claim that moved them names them.
      await sleep(150);
      const store = t.app.get(DelayQueueStore);
      const buried = await store.claim(store.keys(q), 0, 100, 2, 1000);
      expect(buried).toMatchObject({ died: 2, claimed: [] });
      expect(buried.dead.sort((a, b) => a.id.localeCompare(b.id))).toEqual(
        ['again', 'last'].map((id) => ({ id, attempts: 2, lastError: 'visibility timeout: the worker holding the item stopped responding' })),
      );
      for (const id of ['again', 'last']) {
        expect(await dq.get(q, id)).toMatchObject({ state: 'dead', attempts: 2, lastError: expect.stringMatching(/^visibility timeout/) });
      }
      expect(await dq.stats(q)).toMatchObject({ pending: 0, ready: 0, inFlight: 0, dead: 2 });
    });

    it('a lost delivery goes back in line at its original due time (catch-up stays oldest first), and its silent holder is told', async () => {
      const q = newQueue('requeue-due');
      const k = keysOf(q);
      await dq.schedule(q, 'old', { dueAt: 1000 }, 'o');
      const [held] = await claimDeliveries(q, 1, 5, 100);
      await dq.schedule(q, 'newer', { dueAt: 5000 }, 'n');
      const sub = raw.duplicate();
      const events: string[] = [];
      try {
        await sub.subscribe(k.channel);
        sub.on('message', (_c: string, m: string) => events.push(m));
        await sleep(150);
        expect(await claimDeliveries(q, 0, 5, 100)).toEqual([]);
        // Back in ready at its due time, ahead of the newer item, not at the time of the requeue.
        expect(await raw.zrange(k.keys[1], '0', '-1', 'WITHSCORES')).toEqual(['old', '1000', 'newer', '5000']);
        await waitUntil('the revocation event', async () => events.includes(`gone:${held.token}`), 2_000);
        expect((await claimDeliveries(q, 1)).map((d) => d.id)).toEqual(['old']);
      } finally {
        sub.disconnect();
      }
    });

    it('fencing tokens stay at or above the Redis clock in microseconds: a counter lost in a failover never hands out an old token again', async () => {
      const q = newQueue('tokens');
      const k = keysOf(q);
      await dq.schedule(q, 'a', { dueAt: 1 }, 'a');
      const before = await redisNow();
      const [first] = await claimDeliveries(q, 1);
      expect(first.token).toBeGreaterThanOrEqual(before * 1000);
      // A promoted replica that never saw the counter, the lease or the claim: the item is pending again.
      await raw.del(k.keys[8]);
      await run(q, 'cancel', ['a', k.channel]);
      await dq.schedule(q, 'a', { dueAt: 1 }, 'a');
      await sleep(2);
      const [second] = await claimDeliveries(q, 1);
      expect(second.token).toBeGreaterThan(first.token);
      expect(await run<number>(q, 'extend', ['a', first.token, 30_000])).toBe(0);
      expect(await run<number[]>(q, 'ack', ['a', first.token])).toEqual([0]);
      expect(await run<number[]>(q, 'ack', ['a', second.token])).toEqual([1]);
    });
  });

  describe('includes/monotonic-counter: nextCounterAtLeastClock', () => {
    const dirs: string[] = [];
    afterAll(() => dirs.forEach((d) => rmSync(d, { recursive: true, force: true })));

    /** The include, called through a test script loaded the way the loader loads every script. */
    const counterScript = (() => {
      let def: ScriptDefinition | undefined;
      return () => {
        if (def) return def;
        const dir = mkdtempSync(join(tmpdir(), 'rp-counter-'));
        dirs.push(dir);
        mkdirSync(join(dir, 'platform', 'includes'), { recursive: true });
        mkdirSync(join(dir, 'platform', 't'));
        copyFileSync(join(DEFAULT_LUA_DIR, 'platform', 'includes', 'monotonic-counter.lua'), join(dir, 'platform', 'includes', 'monotonic-counter.lua'));
        const script = [
          '--[[',
          '  Calls nextCounterAtLeastClock for the test suite.',
          '',
          '  KEYS[1]  the counter: a string key, or a hash with ARGV[1]',
          "  ARGV[1]  hash field, '' for a string key",
          "  ARGV[2]  ttl ms, '' for none",
          "  ARGV[3]  the clock in microseconds, '' to read TIME",
          '',
          '  Returns: {value, value as text}',
          ']]',
          '--- @include "platform/includes/monotonic-counter"',
          'local counterKey = KEYS[1]',
          "local field = ARGV[1] ~= '' and ARGV[1] or nil",
          'local ttlMs = tonumber(ARGV[2])',
          'local clockUs = tonumber(ARGV[3])',
          'local value, text = nextCounterAtLeastClock(counterKey, field, ttlMs, clockUs)',
          'return {value, text}',
        ].join('\n');
        writeFileSync(join(dir, 'platform', 't', 'counter-1.lua'), script);
        def = loadScriptFile(dir, join(dir, 'platform', 't', 'counter-1.lua'));
        return def;
      };
    })();
    const next = async (key: string, field = '', ttlMs = '', clockUs = '') => {
      const def = counterScript();
      const [value, text] = (await raw.eval(def.source, 1, key, field, ttlMs, clockUs)) as [number, string];
      expect(String(value)).toBe(text);
      return value;
    };
    const clockUs = async () => {
      const [s, us] = await raw.time();
      return Number(s) * 1_000_000 + Number(us);
    };
    const newKey = () => `test:counter:${randomBytes(4).toString('hex')}`;

    it('starts at the Redis clock in microseconds, then counts up by one', async () => {
      const key = newKey();
      const before = await clockUs();
      const first = await next(key);
      expect(first).toBeGreaterThanOrEqual(before);
      expect(first).toBeLessThanOrEqual(await clockUs());
      const second = await next(key, '', '', String(first - 1000)); // a clock behind the counter
      expect(second).toBe(first + 1);
      expect(await raw.get(key)).toBe(String(second));
      expect(await raw.pttl(key)).toBe(-1);
    });

    it('never goes below the clock, even when the counter was lost or lowered', async () => {
      const key = newKey();
      await raw.set(key, '5');
      const before = await clockUs();
      expect(await next(key)).toBeGreaterThanOrEqual(before);
      await raw.del(key);
      expect(await next(key, '', '', '123456789')).toBe(123456789);
      expect(await next(key, '', '', '123456789')).toBe(123456790);
    });

    it('keeps a counter ahead of the clock counting from where it is', async () => {
      const key = newKey();
      const ahead = (await clockUs()) + 1_000_000_000;
      await raw.set(key, String(ahead));
      expect(await next(key)).toBe(ahead + 1);
    });

    it('keeps the counter in a hash field, touching no other field', async () => {
      const key = newKey();
      await raw.hset(key, 'other', 'x', 'seq', '41');
      expect(await next(key, 'seq', '', '40')).toBe(42);
      expect(await raw.hgetall(key)).toEqual({ other: 'x', seq: '42' });
    });

    it('gives a string counter the time to live it is asked for, again at every use', async () => {
      const key = newKey();
      await next(key, '', '60000');
      expect(await raw.pttl(key)).toBeGreaterThan(59_000);
      await raw.pexpire(key, 10);
      await next(key, '', '60000');
      expect(await raw.pttl(key)).toBeGreaterThan(59_000);
    });
  });

  describe('the Redis server clock', () => {
    const HOUR = 3_600_000;
    it.each([
      ['ahead', HOUR],
      ['behind', -HOUR],
    ])('delays count from Redis TIME even when the local clock is an hour %s', async (_label, shift) => {
      const q = newQueue('clock');
      const realNow = Date.now.bind(Date);
      jest.spyOn(Date, 'now').mockImplementation(() => realNow() + shift);
      expect(Math.abs(Date.now() - realNow() - shift)).toBeLessThan(1_000);

      const before = await redisNow();
      const s = await dq.schedule(q, 'a', { delayMs: 5_000 }, 1);
      const after = await redisNow();
      expect(s.dueAt).toBeGreaterThanOrEqual(before + 5_000);
      expect(s.dueAt).toBeLessThanOrEqual(after + 5_000);

      const r = await dq.reschedule(q, 'a', { delayMs: 10_000 });
      expect(r).toBeGreaterThanOrEqual(after + 10_000);
      expect(r).toBeLessThanOrEqual((await redisNow()) + 10_000);

      const stats = await dq.stats(q);
      expect(stats).toMatchObject({ nextDueAt: r, oldestOverdueMs: 0 });
    });
  });

  describe('bad arguments', () => {
    const q = 'args-queue';
    const ok: When = { delayMs: 1_000 };
    const cases: Array<[string, string, (dq: DelayQueueService) => Promise<unknown>]> = [
      ['negative delay', 'delayMs', (s) => s.schedule(q, 'a', { delayMs: -1 }, 1)],
      ['non-integer delay', 'delayMs', (s) => s.schedule(q, 'a', { delayMs: 1.5 }, 1)],
      ['delay over ten years', 'delayMs', (s) => s.schedule(q, 'a', { delayMs: 11 * 365 * 24 * 3600 * 1000 }, 1)],
      ['NaN due time', 'dueAt', (s) => s.schedule(q, 'a', { dueAt: Number.NaN }, 1)],
      ['invalid Date', 'dueAt', (s) => s.schedule(q, 'a', { dueAt: new Date('nope') }, 1)],
      ['neither dueAt nor delayMs', 'when', (s) => s.schedule(q, 'a', {} as When, 1)],
      ['payload over 16 KiB as JSON', 'payload', (s) => s.schedule(q, 'a', ok, 'x'.repeat(16_383))],
      ['payload over 16 KiB in UTF-8 bytes', 'payload', (s) => s.schedule(q, 'a', ok, 'é'.repeat(8_192))],
      ['undefined payload', 'payload', (s) => s.schedule(q, 'a', ok, undefined)],
      ['function payload', 'payload', (s) => s.schedule(q, 'a', ok, () => 1)],
      ['BigInt payload', 'payload', (s) => s.schedule(q, 'a', ok, { n: BigInt(1) })],
      ['empty id', 'id', (s) => s.schedule(q, '', ok, 1)],
      ['id with a space', 'id', (s) => s.schedule(q, 'a b', ok, 1)],
      ['id of 201 characters', 'id', (s) => s.schedule(q, 'x'.repeat(201), ok, 1)],
      ['empty queue name', 'queue', (s) => s.schedule('', 'a', ok, 1)],
      ['queue name with a space', 'queue', (s) => s.schedule('bad queue', 'a', ok, 1)],
      ['queue name with a brace', 'queue', (s) => s.schedule('bad{tag}', 'a', ok, 1)],
      ['queue name starting with a dash', 'queue', (s) => s.schedule('-queue', 'a', ok, 1)],
      ['queue name of 65 characters', 'queue', (s) => s.schedule('q'.repeat(65), 'a', ok, 1)],
      ['bad ifExists', 'ifExists', (s) => s.schedule(q, 'a', ok, 1, { ifExists: 'overwrite' as 'keep' })],
      ['cancel with a bad id', 'id', (s) => s.cancel(q, 'a b')],
      ['reschedule with a negative delay', 'delayMs', (s) => s.reschedule(q, 'a', { delayMs: -5 })],
      ['get with a bad queue', 'queue', (s) => s.get('no space', 'a')],
      ['deadLetters with a limit of 101', 'limit', (s) => s.deadLetters(q, 0, 101)],
      ['deadLetters with a negative offset', 'offset', (s) => s.deadLetters(q, -1, 10)],
      ['retryDead with an empty id', 'id', (s) => s.retryDead(q, '')],
    ];

    it.each(cases)('%s → DelayQueueArgumentError (400) naming %s', async (_what, field, call) => {
      const err = await call(dq).then(
        () => undefined,
        (e: unknown) => e,
      );
      expect(err).toBeInstanceOf(DelayQueueArgumentError);
      expect((err as DelayQueueArgumentError).field).toBe(field);
      expect((err as DelayQueueArgumentError).kind).toBe('invalid');
      expect((err as Error).message).toMatch(new RegExp(`^${field.replace('.', '\\.')} `));
    });

    const badOptions: Array<[string, ProcessOptions]> = [
      ['concurrency', { concurrency: 0 }],
      ['concurrency', { concurrency: 1001 }],
      ['concurrency', { concurrency: 2.5 }],
      ['retry.visibilityMs', { retry: { visibilityMs: 999 } }],
      ['retry.attempts', { retry: { attempts: 0 } }],
      ['pollMs', { pollMs: 20 }],
      ['pollMs', { pollMs: 5_000 }],
      ['retry.backoff.initialMs', { retry: { backoff: { initialMs: -1 } } }],
      ['retry.backoff.maxMs', { retry: { backoff: { initialMs: 1_000, maxMs: 10 } } }],
      ['retry.backoff.factor', { retry: { backoff: { factor: 0.5 } } }],
      ['retry.backoff.factor', { retry: { backoff: { factor: Number.NaN } } }],
    ];

    it.each(badOptions)('process() with a bad %s (%j) → DelayQueueArgumentError (400), and no processor is left registered', async (field, options) => {
      const pq = newQueue('bad-opts');
      const err = await dq
        .process(pq, async () => undefined, options)
        .then(
          () => undefined,
          (e: unknown) => e,
        );
      expect(err).toBeInstanceOf(DelayQueueArgumentError);
      expect(err).toMatchObject({ field });
      expect((err as DelayQueueArgumentError).kind).toBe('invalid');
      const p = await dq.process(pq, async () => undefined);
      await p.stop();
    });

    it('stores nothing for rejected calls, and accepts a payload of exactly 16 KiB', async () => {
      for (const [, , call] of cases) await call(dq).catch(() => undefined);
      expect(await storedKeys(q)).toEqual([]);
      expect(await raw.sismember(registryKey(keyBuilder), q)).toBe(0);

      const exact = 'x'.repeat(16 * 1024 - 2); // plus two quotes = 16384 bytes of JSON
      await expect(dq.schedule(q, 'a', ok, exact)).resolves.toMatchObject({ written: true, created: true });
      expect((await dq.get<string>(q, 'a'))!.payload).toBe(exact);
    });
  });
});

/** Fields per claimed item in the claim script's reply: id, payload, attempt, dueAt, token. */
const CLAIMED_FIELDS = 5;
/** Index of the fencing-token counter among a queue's keys. */
const SEQ = 8;

/**
 * A MONITOR connection that is watching once this resolves. (ioredis's `monitor()` marks its connection as
 * monitoring one tick after MONITOR's OK, so monitor lines read together with the OK, as happens on a busy
 * machine with the app's workers running, are taken for replies to nothing and emitted as unhandled "Command queue
 * state error"s. Those lines are of commands that ran before this resolved, so they are dropped here.)
 */
async function monitorOf(node: RedisServerHandle): Promise<Redis> {
  const m = new Redis({ host: node.host, port: node.port, monitor: true, lazyConnect: true, retryStrategy: () => null, maxRetriesPerRequest: 0 });
  m.on('error', (err: Error) => {
    if (!err.message.startsWith('Command queue state error')) throw err;
  });
  const watching = new Promise<void>((resolve) => m.once('monitoring', () => resolve()));
  await m.connect();
  await watching;
  return m;
}

function deferred<T = void>() {
  let resolve!: (v: T) => void;
  const promise = new Promise<T>((r) => (resolve = r));
  return { promise, resolve };
}
