import { randomBytes } from 'node:crypto';
import type Redis from 'ioredis';
import request from 'supertest';
import { queueKeys } from '../../src/engines/delay-queue/delay-queue.keys';
import { DelayQueueService } from '../../src/engines/delay-queue/delay-queue.service';
import type { CancelResult, Delivery, Handler } from '../../src/engines/delay-queue/delay-queue.types';
import { BATCH, CLAIM_BATCH } from '../../src/engines/delay-queue/queue-processor';
import { KeyBuilder } from '../../src/platform/redis/key-builder';
import { RedisUnavailableError } from '../../src/platform/redis/redis-unavailable.error';
import { RedisService } from '../../src/platform/redis/redis.service';
import { ScriptArg, ScriptRegistry } from '../../src/platform/scripts/script-registry.service';
import { rawConnection, waitUntil, withConnection } from '../harness/redis-process';
import { randomPrefix, RedisServerHandle, startRedisServer } from '../harness/redis-server';
import { CREDS, startTestApp, TestApp } from '../support/test-app';
import { setTimeout as sleep } from 'node:timers/promises';

/**
 * The delay-queue worker against a real redis-server: cancel racing the fire,
 * redelivery after a silent holder's visibility timeout, two instances sharing
 * a queue, a 10k burst due in one millisecond, catch-up order, lost wake-up
 * messages, and a Redis restart or outage. Two app instances share one key
 * prefix, as two deployed replicas would.
 */

interface ScriptCall {
  script: string;
  args: readonly ScriptArg[];
  result: unknown;
}

/**
 * One app instance with what the tests reach into, and a record of its script calls (the real calls still run).
 * `holdReply` may return a promise to hold a script's reply back until it settles, like a slow network would.
 */
function instance(t: TestApp) {
  const scripts = t.app.get(ScriptRegistry);
  const calls: ScriptCall[] = [];
  const original = scripts.run.bind(scripts);
  const i = {
    t,
    dq: t.app.get(DelayQueueService),
    scripts,
    calls,
    keyBuilder: t.app.get(KeyBuilder),
    holdReply: undefined as ((script: string, keys: readonly string[]) => Promise<void> | undefined) | undefined,
  };
  jest.spyOn(scripts, 'run').mockImplementation((async (script: string, keys: readonly string[], args: readonly ScriptArg[] = []) => {
    const result = await original(script, keys, args);
    calls.push({ script, args, result });
    await i.holdReply?.(script, keys);
    return result;
  }) as ScriptRegistry['run']);
  return i;
}
type Instance = ReturnType<typeof instance>;

/** ids whose ack the engine accepted (result 1), with how often. */
function ackedCounts(calls: ScriptCall[]): Map<string, number> {
  const out = new Map<string, number>();
  // An ack call carries (id, token) pairs and answers one flag per pair.
  for (const c of calls) {
    if (c.script !== 'delay-queue/ack') continue;
    const flags = c.result as number[];
    for (let i = 0; i < c.args.length; i += 2) if (flags[i / 2] === 1) out.set(String(c.args[i]), (out.get(String(c.args[i])) ?? 0) + 1);
  }
  return out;
}

const newQueue = (name: string) => `${name}-${randomBytes(3).toString('hex')}`;

async function redisNowOf(raw: Redis): Promise<number> {
  const [s, us] = await raw.time();
  return Number(s) * 1000 + Math.floor(Number(us) / 1000);
}

/** True once nothing of the queue's items is left in Redis (the token counter stays on purpose). */
async function drained(raw: Redis, i: Instance, queue: string): Promise<boolean> {
  const { keys } = queueKeys(i.keyBuilder, queue);
  const counts = await Promise.all(keys.slice(0, 8).map((k, n) => (n < 4 ? raw.zcard(k) : raw.hlen(k))));
  return counts.every((c) => c === 0);
}

/**
 * The command timeout of the instances below. The test app's 500 ms is there to see a dead Redis quickly (the
 * restart suite at the end relies on it); these tests are about delivery, and with both cores busy a 500 ms
 * stall of this process (thousands of commands queued on one connection, a GC pause, no CPU) made setup writes
 * and worker claims fail with "Command timed out" although Redis was fine. No test here is about timeouts.
 */
const DELIVERY_ENV = { REDIS_COMMAND_TIMEOUT_MS: '10000' };

describe(`${DelayQueueService.name} delivery`, () => {
  let redis: RedisServerHandle;
  let raw: Redis;
  const prefix = randomPrefix();
  let a: Instance;
  let b: Instance;

  beforeAll(async () => {
    redis = await startRedisServer();
    raw = rawConnection(redis);
    a = instance(await startTestApp(redis.url, { ...DELIVERY_ENV, REDIS_KEY_PREFIX: prefix }));
    b = instance(await startTestApp(redis.url, { ...DELIVERY_ENV, REDIS_KEY_PREFIX: prefix }));
  });

  afterAll(async () => {
    jest.restoreAllMocks();
    raw?.disconnect();
    await a?.t.close();
    await b?.t.close();
    await redis?.destroy();
  });

  const redisNow = () => redisNowOf(raw);

  it('a cancel racing the fire: every item is either cancelled unseen (wasPending) or handled, never both; revoked deliveries know it', async () => {
    const q = newQueue('race');
    const ids = Array.from({ length: 500 }, (_, i) => `r${i}`);
    const cancels = new Map(ids.map((id) => [id, deferred<CancelResult>()]));
    const handled = new Map<string, number>();
    const revoked: Array<{ id: string; state: string; stillWanted: boolean; aborted: boolean }> = [];
    let running = 0;
    const callsBefore = a.calls.length;
    // Odd ids finish within a few ms. Even ids hold their delivery until their cancel has answered, then ask
    // whether they are still wanted.
    const p = await a.dq.process<{ id: string }>(
      q,
      async (d) => {
        running++;
        handled.set(d.id, (handled.get(d.id) ?? 0) + 1);
        try {
          if (Number(d.id.slice(1)) % 2 === 1) {
            await sleep(Math.random() * 5);
            return;
          }
          const c = await cancels.get(d.id)!.promise;
          revoked.push({ id: d.id, state: c.state, stillWanted: await d.stillWanted(), aborted: d.signal.aborted });
        } finally {
          running--;
        }
      },
      { concurrency: 100 },
    );
    try {
      const now = await redisNow();
      const localDue = Date.now() + 400;
      const dueAt = now + 400;
      await Promise.all(ids.map((id) => a.dq.schedule(q, id, { dueAt }, { id })));
      // Cancels in ten waves of 50, in random order, from just before the due moment to well after it.
      const results = new Map<string, CancelResult>();
      const shuffled = [...ids].sort(() => Math.random() - 0.5);
      const waves: Promise<void>[] = [];
      for (let w = 0; w < 10; w++) {
        await sleep(localDue - 10 + w * 8 - Date.now());
        const wave = shuffled.slice(w * 50, w * 50 + 50).map(async (id) => {
          const r = await a.dq.cancel(q, id);
          results.set(id, r);
          cancels.get(id)!.resolve(r);
        });
        waves.push(...wave);
      }
      await Promise.all(waves);
      await waitUntil('every handler to finish and the queue to drain', async () => running === 0 && (await drained(raw, a, q)), 10_000);

      const acked = ackedCounts(a.calls.slice(callsBefore));
      const wasPending = ids.filter((id) => results.get(id)!.wasPending);
      // The race really happened: some cancels beat the claim, some came after it.
      expect(wasPending.length).toBeGreaterThan(0);
      expect(handled.size).toBeGreaterThan(0);
      for (const id of ids) {
        const r = results.get(id)!;
        expect(`${id} wasPending=${r.wasPending} handled=${handled.has(id)}`).toBe(`${id} wasPending=${!handled.has(id)} handled=${handled.has(id)}`);
        expect(handled.get(id) ?? 0).toBeLessThanOrEqual(1);
        if (r.wasPending) expect(['pending', 'ready']).toContain(r.state);
        // Acked only when the handler finished before the cancel came: then the cancel found nothing.
        expect(`${id} acked=${acked.get(id) ?? 0}`).toBe(`${id} acked=${r.state === 'absent' ? 1 : 0}`);
        if (r.state === 'absent') expect(handled.get(id)).toBe(1);
      }
      const inFlightCancels = revoked.filter((x) => x.state === 'in-flight');
      expect(inFlightCancels.length).toBeGreaterThan(0);
      for (const x of inFlightCancels) expect(x).toEqual({ id: x.id, state: 'in-flight', stillWanted: false, aborted: true });
      expect(await a.dq.stats(q)).toMatchObject({ pending: 0, ready: 0, inFlight: 0, dead: 0 });
    } finally {
      cancels.forEach((c) => c.resolve({ wasPending: false, state: 'absent', attempts: 0 }));
      await p.stop();
    }
  });

  it('a holder that goes silent loses its delivery after the visibility timeout: another instance gets it as attempt 2', async () => {
    const q = newQueue('vis');
    const doomed = instance(await startTestApp(redis.url, { ...DELIVERY_ENV, REDIS_KEY_PREFIX: prefix }));
    const first = deferred<Delivery>();
    const second = deferred<{ d: Delivery; at: number }>();
    try {
      // The doomed instance's handler hangs; then its connection goes, so no heartbeat, ack or fail can reach Redis.
      await doomed.dq.process(
        q,
        (d) => {
          first.resolve(d);
          return new Promise<void>((r) => d.signal.addEventListener('abort', () => r()));
        },
        { retry: { visibilityMs: 1_000 } },
      );
      await doomed.dq.schedule(q, 'job', { delayMs: 0 }, { n: 1 });
      const d1 = await within(first.promise, 3_000, 'the first delivery');
      expect(d1.attempt).toBe(1);
      doomed.t.app.get(RedisService).client.disconnect();
      const silentSince = performance.now();

      const p = await a.dq.process(q, async (d) => second.resolve({ d, at: performance.now() }), { retry: { visibilityMs: 1_000 } });
      try {
        // While the lease is still valid nobody else may take the item.
        expect(await a.dq.get(q, 'job')).toMatchObject({ state: 'in-flight', attempts: 1 });
        const { d: d2, at } = await within(second.promise, 5_000, 'the redelivery');
        expect(d2).toMatchObject({ id: 'job', attempt: 2, payload: { n: 1 } });
        expect(d2.token).toBeGreaterThan(d1.token);
        // The last heartbeat was at most a third of the timeout before the silence began.
        expect(at - silentSince).toBeGreaterThanOrEqual(1_000 - 1_000 / 3 - 50);
        // The silent holder's token is worthless now.
        const { keys } = queueKeys(a.keyBuilder, q);
        expect(await a.scripts.run('delay-queue/ack', keys, ['job', d1.token])).toEqual([0]);
        await waitUntil('the new holder to ack', async () => drained(raw, a, q), 3_000);
      } finally {
        await p.stop();
      }
    } finally {
      await doomed.t.close();
    }
  });

  it('two instances sharing a queue handle 2,000 items exactly once each, never one item in both at once, and both do work', async () => {
    const q = newQueue('shared');
    const ids = Array.from({ length: 2_000 }, (_, i) => `s${i}`);
    const starts = new Map<string, number>();
    const active = new Map<string, number>();
    const byInstance = [0, 0];
    let overlaps = 0;
    let running = 0;
    const [aBefore, bBefore] = [a.calls.length, b.calls.length];
    const handler =
      (who: number): Handler<{ i: number }> =>
      async (d) => {
        running++;
        starts.set(d.id, (starts.get(d.id) ?? 0) + 1);
        active.set(d.id, (active.get(d.id) ?? 0) + 1);
        if (active.get(d.id)! > 1) overlaps++;
        byInstance[who]++;
        await sleep(Math.random() * 4);
        active.set(d.id, active.get(d.id)! - 1);
        running--;
      };
    const pa = await a.dq.process(q, handler(0), { concurrency: 20 });
    const pb = await b.dq.process(q, handler(1), { concurrency: 20 });
    try {
      const now = await redisNow();
      await Promise.all(ids.map((id, i) => a.dq.schedule(q, id, { dueAt: now + 200 + (i % 300) }, { i })));
      await waitUntil('every item to be handled', async () => starts.size === ids.length && running === 0 && (await drained(raw, a, q)), 30_000);
    } finally {
      await Promise.all([pa.stop(), pb.stop()]);
    }
    expect(overlaps).toBe(0);
    expect([...starts.values()].filter((n) => n !== 1)).toEqual([]);
    expect([...starts.keys()].sort()).toEqual([...ids].sort());
    const acked = [ackedCounts(a.calls.slice(aBefore)), ackedCounts(b.calls.slice(bBefore))];
    for (const id of ids) expect(`${id} ${(acked[0].get(id) ?? 0) + (acked[1].get(id) ?? 0)}`).toBe(`${id} 1`);
    expect(byInstance[0]).toBeGreaterThan(0);
    expect(byInstance[1]).toBeGreaterThan(0);
    expect(byInstance[0] + byInstance[1]).toBe(ids.length);
  });

  it('stop() does not resolve while a claim it started is unanswered: no handler starts after stop() resolved', async () => {
    const q = newQueue('stop-race');
    const [pending] = queueKeys(b.keyBuilder, q).keys;
    await b.dq.schedule(q, 'late', { delayMs: 0 }, 'x');
    const claimRan = deferred();
    const reply = deferred();
    // The worker's first claim runs in Redis (the item is now in flight) but its reply is slow to come back.
    b.holdReply = (script, keys) => (script === 'delay-queue/claim' && keys[0] === pending ? (claimRan.resolve(), reply.promise) : undefined);
    let stopResolved = false;
    const startedAfterStop: boolean[] = [];
    try {
      const p = await b.dq.process(q, async () => void startedAfterStop.push(stopResolved));
      await within(claimRan.promise, 3_000, 'the first claim');
      const stopping = p.stop().then(() => (stopResolved = true));
      setTimeout(() => reply.resolve(), 300);
      await stopping;
      await reply.promise;
      await sleep(100);
    } finally {
      b.holdReply = undefined;
      reply.resolve();
    }
    // Either the handler ran before stop() resolved, or the item was handed back; never a handler after the stop.
    expect(startedAfterStop.filter((after) => after)).toEqual([]);
    expect([null, 'ready']).toContain((await b.dq.get(q, 'late'))?.state ?? null);
  });

  it('a handler that never settles fails after handlerTimeoutMs: its item goes on to dead-letter and its slot serves the next item', async () => {
    const q = newQueue('hung');
    const hungSignal = deferred<AbortSignal>();
    const nextDone = deferred();
    const p = await a.dq.process<string>(
      q,
      (d) => {
        if (d.id === 'hang') {
          hungSignal.resolve(d.signal);
          return new Promise<void>(() => undefined); // never settles
        }
        nextDone.resolve();
        return Promise.resolve();
      },
      { concurrency: 1, handlerTimeoutMs: 1_000, retry: { attempts: 1 } },
    );
    try {
      await a.dq.schedule(q, 'hang', { delayMs: 0 }, 'h');
      const signal = await within(hungSignal.promise, 3_000, 'the hung delivery');
      await a.dq.schedule(q, 'next', { delayMs: 0 }, 'n');
      await within(nextDone.promise, 5_000, 'the next item in the freed slot');
      expect(signal.aborted).toBe(true);
      expect(await a.dq.get(q, 'hang')).toMatchObject({ state: 'dead', attempts: 1, lastError: expect.stringContaining('HandlerTimeoutError') });
      await waitUntil('next acked', async () => (await a.dq.get(q, 'next')) === null, 2_000);
    } finally {
      await p.stop();
    }
  });

  it('10,000 items due in the same millisecond are all delivered exactly once, in bounded script calls (none uses 20 ms of Redis CPU)', async () => {
    const q = newQueue('burst');
    const ids = Array.from({ length: 10_000 }, (_, i) => `b${i}`);
    const seen = new Map<string, number>();
    let running = 0;
    const before = a.calls.length;
    const p = await a.dq.process(
      q,
      async (d) => {
        running++;
        seen.set(d.id, (seen.get(d.id) ?? 0) + 1);
        await sleep(1);
        running--;
      },
      { concurrency: 200 },
    );
    try {
      const dueAt = (await redisNow()) + 3_000;
      // In slices of 1,000, so the calls queued on the one connection stay well inside the command timeout.
      for (let n = 0; n < ids.length; n += 1_000) await Promise.all(ids.slice(n, n + 1_000).map((id) => a.dq.schedule(q, id, { dueAt }, id)));
      // All were scheduled before they came due, so the worker meets the whole burst at once.
      expect(await redisNow()).toBeLessThan(dueAt);
      expect(seen.size).toBe(0);
      await waitUntil('the burst to be delivered', async () => seen.size === ids.length && running === 0 && (await drained(raw, a, q)), 30_000);
    } finally {
      await p.stop();
    }
    expect([...seen.values()].filter((n) => n !== 1)).toEqual([]);
    const calls = a.calls.slice(before);
    expect(ackedCounts(calls).size).toBe(ids.length);
    // Each claim step moved and handed out at most one batch.
    const claimCalls = calls.filter((c) => c.script === 'delay-queue/claim');
    const claims = claimCalls.map((c) => c.result as Array<string | number>);
    expect(Math.max(...claims.map((r) => Number(r[3])))).toBe(BATCH);
    for (const r of claims) expect((r.length - 6) / CLAIMED_FIELDS).toBeLessThanOrEqual(BATCH);

    // The cost of each call. SLOWLOG's wall time cannot show it on a busy machine (a call that waits for a CPU looks
    // slow, as did plain HGETs when both cores were loaded), so the same burst runs again on a queue of its own, the
    // worker's calls made one by one, each in a MULTI between two INFO cpu: the Redis CPU time it used, whatever
    // the load. 20 ms is far above a batch's cost and below what a call over the whole backlog costs.
    const cq = newQueue('burst-cpu');
    const { keys, channel } = queueKeys(a.keyBuilder, cq);
    const sha = new Map(a.scripts.list().map((d) => [d.id, d.sha]));
    const worker = claimCalls.find((c) => Number(c.args[0]) === CLAIM_BATCH)!.args.slice(1); // visibility, attempts, batch, channel
    const timed: CpuTimed[] = [];
    const conn = rawConnection(redis, { commandTimeout: 60_000 });
    try {
      const cpuDue = await redisNow();
      for (let n = 0; n < ids.length; n += 1_000) {
        const args = ids.slice(n, n + 1_000).map((id) => [id, 'at', cpuDue, JSON.stringify(id), 'replace', channel]);
        timed.push(...(await cpuTimed(conn, 'schedule', sha.get('delay-queue/schedule')!, keys, args)));
      }
      for (let delivered = 0; delivered < ids.length;) {
        const [claim] = await cpuTimed(conn, 'claim', sha.get('delay-queue/claim')!, keys, [[CLAIM_BATCH, worker[0], worker[1], worker[2], channel]]);
        timed.push(claim);
        const r = claim.result as Array<string | number>;
        const acks: ScriptArg[][] = [];
        for (let i = 6; i < r.length; i += CLAIMED_FIELDS) acks.push([r[i], r[i + 4]]);
        expect(acks.length).toBeGreaterThan(0);
        const acked = await cpuTimed(conn, 'ack', sha.get('delay-queue/ack')!, keys, acks);
        expect(acked.map((t) => t.result)).toEqual(acks.map(() => [1]));
        timed.push(...acked);
        delivered += acks.length;
      }
      expect(await drained(conn, a, cq)).toBe(true);
    } finally {
      conn.disconnect();
    }
    expect(timed.filter((t) => t.script === 'claim').length).toBe(ids.length / CLAIM_BATCH);
    const costly = timed.filter((t) => t.micros >= 20_000).map((t) => `${t.script} ${t.micros}µs`);
    expect(costly).toEqual([]);
  });

  it('catch-up: items that came due while no worker ran are delivered oldest first once one starts', async () => {
    const q = newQueue('catchup');
    const now = await redisNow();
    const order = Array.from({ length: 30 }, (_, i) => i).sort(() => Math.random() - 0.5);
    for (const i of order) await a.dq.schedule(q, `c${String(i).padStart(2, '0')}`, { dueAt: now - 10_000 + i * 100 }, i);
    expect((await a.dq.stats(q)).oldestOverdueMs).toBeGreaterThanOrEqual(10_000);

    const seen: string[] = [];
    const p = await a.dq.process(q, async (d) => void seen.push(d.id), { concurrency: 1 });
    try {
      await waitUntil('the backlog to be delivered', async () => seen.length === 30 && (await drained(raw, a, q)), 10_000);
    } finally {
      await p.stop();
    }
    expect(seen).toEqual([...seen].sort());
    expect(new Set(seen).size).toBe(30);
  });

  it('fires within the fallback poll when the wake-up message goes to a channel nobody hears', async () => {
    const q = newQueue('lost-event');
    const fired = deferred<number>();
    const p = await a.dq.process(q, async () => fired.resolve(performance.now()));
    try {
      await sleep(100); // let the first claim find the queue empty: no timer is armed
      const { keys } = queueKeys(a.keyBuilder, q);
      const start = performance.now();
      await a.scripts.run('delay-queue/schedule', keys, ['quiet', 'delay', 300, '"x"', 'replace', 'nowhere']);
      const at = await within(fired.promise, 3_000, 'the item to fire');
      expect(at - start).toBeGreaterThanOrEqual(290);
      expect(at - start).toBeLessThan(300 + 1_000 + 500);
    } finally {
      await p.stop();
    }
  });

  it('fires within the fallback poll when the worker is no longer subscribed to its channel', async () => {
    const q = newQueue('unsubscribed');
    const fired = deferred<number>();
    const p = await a.dq.process(q, async () => fired.resolve(performance.now()));
    try {
      await sleep(100);
      await a.t.app.get(RedisService).subscriber().unsubscribe(queueKeys(a.keyBuilder, q).channel);
      const start = performance.now();
      await a.dq.schedule(q, 'quiet', { delayMs: 300 }, 'x');
      const at = await within(fired.promise, 3_000, 'the item to fire');
      expect(at - start).toBeLessThan(300 + 1_000 + 500);
    } finally {
      await p.stop();
    }
  });
});

describe(`${DelayQueueService.name} across a Redis restart`, () => {
  let redis: RedisServerHandle;
  let i: Instance;

  beforeAll(async () => {
    redis = await startRedisServer({ appendonly: true });
    i = instance(await startTestApp(redis.url));
  });

  afterAll(async () => {
    jest.restoreAllMocks();
    await i?.t.close();
    await redis?.destroy();
  });

  /** A connection per check: harness connections never reconnect, and Redis restarts here. */
  const isDrained = (q: string) => withConnection(redis, (r) => drained(r, i, q));

  it('items scheduled before a graceful restart survive in the AOF and fire after it; the worker resumes without an app restart', async () => {
    expect(await withConnection(redis, async (r) => (await r.config('GET', 'appendonly'))[1])).toBe('yes');
    const q = newQueue('restart');
    const ids = Array.from({ length: 20 }, (_, n) => `x${n}`);
    const seen = new Map<string, number>();
    const p = await i.dq.process(q, async (d) => void seen.set(d.id, (seen.get(d.id) ?? 0) + 1));
    try {
      await Promise.all(ids.map((id) => i.dq.schedule(q, id, { delayMs: 1_500 }, id)));
      await redis.restart();
      const { keys } = queueKeys(i.keyBuilder, q);
      expect(await withConnection(redis, (r) => r.zcard(keys[0]))).toBe(20);
      await waitUntil('the items to fire after the restart', async () => seen.size === 20 && (await isDrained(q)), 10_000);
      expect([...seen.values()].every((n) => n === 1)).toBe(true);

      // The worker keeps going: a new item fires too.
      await i.dq.schedule(q, 'after', { delayMs: 100 }, 'after');
      await waitUntil('an item scheduled after the restart to fire', async () => seen.has('after'), 5_000);
    } finally {
      await p.stop();
    }
  });

  it('with Redis down, schedule, cancel, get and stats reject promptly with RedisUnavailableError; all works again once it is back', async () => {
    const q = newQueue('down');
    const seen: string[] = [];
    const p = await i.dq.process(q, async (d) => void seen.push(d.id));
    try {
      await redis.stop();
      const calls: Array<[string, () => Promise<unknown>]> = [
        ['schedule', () => i.dq.schedule(q, 'a', { delayMs: 0 }, 1)],
        ['cancel', () => i.dq.cancel(q, 'a')],
        ['get', () => i.dq.get(q, 'a')],
        ['stats', () => i.dq.stats(q)],
      ];
      for (const [name, call] of calls) {
        const start = performance.now();
        const err = await call().then(
          () => undefined,
          (e: unknown) => e,
        );
        expect(`${name}: ${(err as Error)?.name}`).toBe(`${name}: RedisUnavailableError`);
        expect(err).toBeInstanceOf(RedisUnavailableError);
        // The command timeout is 500 ms: never a hang.
        expect(performance.now() - start).toBeLessThan(1_500);
      }
      // Over HTTP that is a 503 with Retry-After.
      const res = await request(i.t.server).get(`/admin/delay-queues/${q}`).set('x-admin-key', CREDS.adminKey);
      expect(res.status).toBe(503);
      expect(Number(res.headers['retry-after'])).toBeGreaterThanOrEqual(1);
    } finally {
      await redis.start();
    }
    try {
      await waitUntil('schedule to work again', async () => (await i.dq.schedule(q, 'back', { delayMs: 0 }, 1)).written, 10_000);
      await waitUntil('the worker to deliver again', async () => seen.includes('back'), 5_000);
    } finally {
      await p.stop();
    }
  });
});

describe(`${DelayQueueService.name} across a Redis freeze`, () => {
  let redis: RedisServerHandle;
  let i: Instance;
  /** Long enough that a delivery waiting it out cannot pass for a prompt one. */
  const VISIBILITY_MS = 20_000;

  beforeAll(async () => {
    redis = await startRedisServer();
    i = instance(await startTestApp(redis.url, { REDIS_COMMAND_TIMEOUT_MS: '500' }));
  });

  afterAll(async () => {
    jest.restoreAllMocks();
    await i?.t.close();
    await redis?.destroy();
  });

  it('claims sent while Redis was frozen (SIGSTOP) and given up on claim nothing: the items are delivered promptly after the freeze, not after the visibility timeout', async () => {
    const q = newQueue('frozen');
    const ids = Array.from({ length: 40 }, (_, n) => `f${n}`);
    const seen = new Map<string, number[]>();
    const p = await i.dq.process(q, async (d) => void seen.set(d.id, [...(seen.get(d.id) ?? []), d.attempt]), {
      retry: { visibilityMs: VISIBILITY_MS },
    });
    const pid = redis.pid!;
    let woke: number;
    try {
      // Due while Redis is frozen: every claim the worker sends meanwhile reaches Redis only when it wakes, after the
      // worker gave up on its reply (500 ms command timeout).
      await Promise.all(ids.map((id) => i.dq.schedule(q, id, { delayMs: 500 }, id)));
      const claimsBefore = i.calls.filter((c) => c.script === 'delay-queue/claim').length;
      process.kill(pid, 'SIGSTOP');
      try {
        await sleep(4_000);
      } finally {
        process.kill(pid, 'SIGCONT');
        woke = performance.now();
      }
      await waitUntil('every item to be delivered', async () => seen.size === ids.length || `${seen.size} of ${ids.length}`, 5_000, 20);
      // Well within the 20 s visibility timeout the items would otherwise wait out.
      expect(performance.now() - woke).toBeLessThan(5_000);
      // Each once, as its first delivery: the claims nobody read took nothing.
      expect([...seen.values()].every((attempts) => attempts.length === 1 && attempts[0] === 1)).toBe(true);
      // The freeze really did time claims out (the calls recorded here are the ones that answered).
      const answered = i.calls.filter((c) => c.script === 'delay-queue/claim').length - claimsBefore;
      expect(answered).toBeGreaterThan(0);
      await waitUntil('the queue to drain', async () => withConnection(redis, (r) => drained(r, i, q)), 3_000);
    } finally {
      await p.stop();
    }
  }, 30_000);
});

/** Fields per claimed item in the claim script's reply: id, payload, attempt, dueAt, token. */
const CLAIMED_FIELDS = 5;

/** Redis main-thread CPU time (user + sys) in µs, from INFO cpu: it grows only while Redis runs, not while it waits for a CPU. */
function mainThreadCpuMicros(info: string): number {
  const read = (k: string) => Number(new RegExp(`^used_cpu_${k}_main_thread:([0-9.]+)`, 'm').exec(info)?.[1]);
  return Math.round((read('user') + read('sys')) * 1e6);
}

interface CpuTimed {
  script: string;
  micros: number;
  result: unknown;
}

/** Runs the script once per argument list, each call in a MULTI of its own between two INFO cpu (nothing else runs in between): the Redis CPU time of each call, and its result. */
async function cpuTimed(conn: Redis, script: string, sha: string, keys: readonly string[], argLists: ScriptArg[][]): Promise<CpuTimed[]> {
  const replies = await Promise.all(
    argLists.map((args) =>
      conn
        .multi()
        .info('cpu')
        .evalsha(sha, keys.length, ...keys, ...args)
        .info('cpu')
        .exec(),
    ),
  );
  return replies.map((r) => {
    const failed = r?.find(([err]) => err);
    if (!r || failed) throw new Error(`${script}: ${failed?.[0]?.message ?? 'transaction aborted'}`);
    return { script, micros: mainThreadCpuMicros(String(r[2][1])) - mainThreadCpuMicros(String(r[0][1])), result: r[1][1] };
  });
}

/** `promise`, or a rejection naming `what` after `ms`. */
function within<T>(promise: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => (timer = setTimeout(() => reject(new Error(`${what}: nothing after ${ms} ms`)), ms)));
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer));
}

function deferred<T = void>() {
  let resolve!: (v: T) => void;
  const promise = new Promise<T>((r) => (resolve = r));
  return { promise, resolve };
}
