import { BackgroundWorkers } from '../../src/engines/workers/background-workers.service';
import { Logger } from '@nestjs/common';
import Redis from 'ioredis';
import { loadConfig } from '../../src/platform/config/load-config';
import { MetricsService } from '../../src/platform/metrics/metrics.service';
import { deadEventStreamKeys, eventStreamKeys } from '../../src/features/orders/order.keys';
import { KeyBuilder } from '../../src/platform/redis/key-builder';
import { RedisService } from '../../src/platform/redis/redis.service';
import { RedisUnavailableError } from '../../src/platform/redis/redis-unavailable.error';
import type { RedisClient } from '../../src/platform/redis/redis.service';
import { ScriptRegistry } from '../../src/platform/scripts/script-registry.service';
import { StreamEntry, StreamGroupOptions, StreamGroupRunner } from '../../src/engines/streams/stream-group-runner';
import { StreamRunners } from '../../src/engines/streams/stream-runners.service';
import { StreamsMetrics } from '../../src/engines/streams/streams.metrics';
import { waitUntil } from '../harness/redis-process';
import { RedisServerHandle, randomPrefix, startRedisServer } from '../harness/redis-server';
import { setTimeout as sleep } from 'node:timers/promises';

Logger.overrideLogger(['error']);

/** XADD with an auto id, returning the id. */
const add = async (stream: string, ...fields: string[]): Promise<string> => (await raw.xadd(stream, '*', ...fields))!;

/** One service instance's stream pieces, as Nest would wire them. */
interface Rig {
  redis: RedisService;
  runners: StreamRunners;
  workers: BackgroundWorkers;
  metrics: StreamsMetrics;
  registry: MetricsService;
  /** Order shard streams under this rig's random prefix: real keys from the key builders, 16 of them. */
  streams: string[];
  dead: string[];
  close(): Promise<void>;
}

let server: RedisServerHandle;
let raw: Redis;
const rigs: Rig[] = [];

async function makeRig(): Promise<Rig> {
  const config = loadConfig({ NODE_ENV: 'test', REDIS_URL: server.url, REDIS_KEY_PREFIX: randomPrefix(), REDIS_COMMAND_TIMEOUT_MS: '1000' });
  const registry = new MetricsService();
  const metrics = new StreamsMetrics(registry);
  const workers = new BackgroundWorkers();
  const redis = new RedisService(config, new MetricsService());
  const scripts = new ScriptRegistry(redis);
  await redis.warmUp();
  await scripts.loadAll();
  const keys = new KeyBuilder(config);
  const rig: Rig = {
    redis,
    runners: new StreamRunners(redis, scripts, metrics, workers),
    workers,
    metrics,
    registry,
    streams: eventStreamKeys(keys),
    dead: deadEventStreamKeys(keys),
    async close() {
      scripts.onApplicationShutdown();
      await redis.close();
    },
  };
  rigs.push(rig);
  return rig;
}

const specs = (r: Rig) => r.streams.map((key, i) => ({ key, deadLetterKey: r.dead[i] }));

function start(
  r: Rig,
  group: string,
  consumer: string,
  handler: (e: StreamEntry) => Promise<void>,
  o: Partial<StreamGroupOptions> = {},
): Promise<StreamGroupRunner> {
  return r.runners.start({ name: 'test', streams: specs(r), group, consumer, handler, blockMs: 2000, ...o });
}

const count = async (r: Rig, outcome: string) => (await r.metrics.entries.get()).values.find((v) => v.labels.outcome === outcome)?.value ?? 0;

beforeAll(async () => {
  server = await startRedisServer();
  raw = new Redis(server.url);
});

afterEach(async () => {
  await Promise.all(rigs.splice(0).map((r) => r.close()));
});

afterAll(async () => {
  raw.disconnect();
  await server.destroy();
});

describe(StreamGroupRunner.name, () => {
  it('delivers new entries of every stream through one blocking read and acks each after its handler', async () => {
    const r = await makeRig();
    const seen: StreamEntry[] = [];
    const runner = await start(r, 'g1', 'c1', async (e) => void seen.push(e));
    // Blocked now: an entry written after start arrives without a poll.
    await sleep(100);
    const ids = [await add(r.streams[0], 'n', '1'), await add(r.streams[7], 'n', '2'), await add(r.streams[7], 'n', '3')];
    await waitUntil('3 entries', async () => seen.length >= 3 || `${seen.length}`, 5000);
    await runner.stop();
    expect(seen.map((e) => [e.stream, e.id, e.fields])).toEqual([
      [r.streams[0], ids[0], ['n', '1']],
      [r.streams[7], ids[1], ['n', '2']],
      [r.streams[7], ids[2], ['n', '3']],
    ]);
    for (const s of r.streams) expect((await raw.xpending(s, 'g1'))[0]).toBe(0);
    expect(await count(r, 'acked')).toBe(3);
    expect(r.workers.names).toEqual(['streams:test:g1:c1']);
  });

  it('under a steady flow reads (and acks) in batches: after a partial read it pauses before reading again, and still handles every entry once', async () => {
    const calls = async (cmd: string) =>
      Number(/calls=(\d+)/.exec((await raw.info('commandstats')).split('\n').find((l) => l.startsWith(`cmdstat_${cmd}:`)) ?? '')?.[1] ?? 0);
    /** Feeds 150 entries, one every 2 ms, to one runner; the XREADGROUP calls the feed took. */
    const readsFor = async (group: string, o: Partial<StreamGroupOptions>) => {
      const r = await makeRig();
      const seen = new Set<string>();
      const runner = await start(r, group, 'c1', async (e) => void seen.add(e.id), { batchSize: 100, ...o });
      await sleep(100);
      const before = await calls('xreadgroup');
      for (let i = 0; i < 150; i++) {
        await add(r.streams[2], 'n', String(i));
        await sleep(2);
      }
      await waitUntil('150 handled', async () => seen.size === 150 || `${seen.size}`, 5000);
      const reads = (await calls('xreadgroup')) - before;
      await runner.stop();
      expect((await raw.xpending(r.streams[2], group))[0]).toBe(0);
      return reads;
    };
    const unpaced = await readsFor('g-unpaced', { readPauseMs: 0 });
    const paced = await readsFor('g-paced', {});
    // Unpaced, nearly every entry or two is a read of its own; paced, one read per pause (25 ms) at most.
    expect(unpaced).toBeGreaterThan(40);
    expect(paced).toBeLessThan(unpaced / 3);
  });

  it("with forgetMetricsOnStop, drops a stopped runner's series (runners named per rain must not grow the scrape)", async () => {
    const r = await makeRig();
    const runner = await start(r, 'g-gone', 'c1', async () => undefined, { name: 'credit:rain-42', forgetMetricsOnStop: true });
    const kept = await start(r, 'g-kept', 'c1', async () => undefined, { name: 'order-events' });
    await add(r.streams[3], 'n', '1');
    await waitUntil('acked by both', async () => (await count(r, 'acked')) === 1 && (await r.metrics.entries.get()).values.length === 2, 5000);
    const series = async (runnerName: string) => (await r.registry.render()).body.split('\n').filter((l) => l.includes(`runner="${runnerName}"`));
    expect((await series('credit:rain-42')).length).toBeGreaterThan(0);
    await runner.stop();
    await kept.stop();
    expect(await series('credit:rain-42')).toEqual([]);
    expect((await series('order-events')).length).toBeGreaterThan(0);
  });

  it('runs one runner per name, group and consumer at a time; a stopped one can be started again', async () => {
    const r = await makeRig();
    const first = await start(r, 'g-dup', 'c1', async () => undefined);
    await expect(start(r, 'g-dup', 'c1', async () => undefined)).rejects.toThrow(/already running/);
    await first.stop();
    const again = await start(r, 'g-dup', 'c1', async () => undefined);
    expect(again.isRunning).toBe(true);
    await again.stop();
    expect(r.workers.names).toEqual(['streams:test:g-dup:c1', 'streams:test:g-dup:c1#2']);
  });

  it('blocks on its own connection, never on the shared command connection', async () => {
    const r = await makeRig();
    const runner = await start(r, 'g-conn', 'c1', async () => undefined, { blockMs: 5000 });
    await sleep(200);
    const clients = String(await raw.client('LIST'));
    const blocked = clients.split('\n').filter((l) => / cmd=xreadgroup /.test(l));
    expect(blocked).toHaveLength(1);
    expect(blocked[0]).toMatch(/name=redis-pay:blocking:streams:test:g-conn:c1:0 /);
    // The command connection still answers at once.
    const t0 = Date.now();
    await r.redis.command((c) => c.ping());
    expect(Date.now() - t0).toBeLessThan(500);
    await runner.stop();
  });

  it('leaves a failed entry pending and hands it over again after retry.visibilityMs', async () => {
    const r = await makeRig();
    let calls = 0;
    const done: string[] = [];
    const runner = await start(
      r,
      'g2',
      'c1',
      async (e) => {
        if (calls++ === 0) throw new Error('first try fails');
        done.push(e.id);
      },
      { retry: { visibilityMs: 200 } },
    );
    const id = await add(r.streams[3], 'n', '1');
    await waitUntil('the first failure', async () => calls >= 1, 5000);
    expect((await raw.xpending(r.streams[3], 'g2'))[0]).toBe(1);
    expect((await r.registry.render()).body).toMatch(/^stream_pending_entries\{runner="test",group="g2"\} 1$/m);
    await waitUntil('the retry', async () => done.includes(id), 5000);
    await runner.stop();
    expect(calls).toBe(2);
    expect((await raw.xpending(r.streams[3], 'g2'))[0]).toBe(0);
    expect(await count(r, 'failed')).toBe(1);
  });

  it('with a retry backoff, retries a failing entry after growing waits (the claim idle time, then twice, then four times that)', async () => {
    const r = await makeRig();
    const at: number[] = [];
    const runner = await start(
      r,
      'g2b',
      'c1',
      async () => {
        at.push(Date.now());
        if (at.length <= 3) throw new Error(`try ${at.length} fails`);
      },
      { retry: { visibilityMs: 150, backoff: { initialMs: 150, maxMs: 10_000 }, attempts: 10 } },
    );
    await add(r.streams[4], 'n', '1');
    await waitUntil('the fourth try', async () => at.length >= 4 && (await raw.xpending(r.streams[4], 'g2b'))[0] === 0, 10_000);
    await runner.stop();
    expect(at).toHaveLength(4);
    const gaps = at.slice(1).map((t, i) => t - at[i]);
    // Lower bounds only: a loaded machine makes every wait longer, never shorter.
    expect(gaps[0]).toBeGreaterThanOrEqual(140);
    expect(gaps[1]).toBeGreaterThanOrEqual(290);
    expect(gaps[2]).toBeGreaterThanOrEqual(590);
    expect(await count(r, 'failed')).toBe(3);
    expect(await count(r, 'acked')).toBe(1);
  }, 20_000);

  it('with a retry backoff, never takes back a held entry that another live consumer took over meanwhile', async () => {
    const r = await makeRig();
    let calls = 0;
    const runner = await start(
      r,
      'g2c',
      'c1',
      async () => {
        calls++;
        throw new Error('fails');
      },
      { retry: { visibilityMs: 200, backoff: { initialMs: 200, maxMs: 10_000 }, attempts: 10 } },
    );
    const stream = r.streams[7];
    const id = await add(stream, 'n', '1');
    // The second failure holds the entry back for 400 ms; then another consumer takes it and stays alive (refreshing it).
    await waitUntil('the second try', async () => calls >= 2, 5000);
    const other = setInterval(() => void raw.xclaim(stream, 'g2c', 'c2', 0, id, 'JUSTID').catch(() => undefined), 40);
    try {
      await sleep(1200);
      const [[, owner]] = (await raw.xpending(stream, 'g2c', '-', '+', 10)) as Array<[string, string]>;
      expect(owner).toBe('c2');
      expect(calls).toBe(2);
    } finally {
      clearInterval(other);
      await runner.stop();
    }
  }, 20_000);

  it('takes over what a stopped consumer left unacked (XAUTOCLAIM)', async () => {
    const r = await makeRig();
    let holding!: () => void;
    let release!: () => void;
    const held = new Promise<void>((res) => (holding = res));
    const gate = new Promise<void>((res) => (release = res));
    const first = await start(r, 'g3', 'dies', async () => {
      holding();
      await gate;
    });
    const id = await add(r.streams[5], 'n', '1');
    await held;
    // The first consumer is wedged in its handler with the entry unacked; stop it without waiting.
    void first.stop();
    const heirSeen: string[] = [];
    const heir = await start(r, 'g3', 'heir', async (e) => void heirSeen.push(e.id), { retry: { visibilityMs: 300 } });
    await waitUntil('the takeover', async () => heirSeen.includes(id), 5000);
    await heir.stop();
    release();
    expect((await raw.xpending(r.streams[5], 'g3'))[0]).toBe(0);
    expect((await r.metrics.claimed.get()).values.reduce((n, v) => n + v.value, 0)).toBe(1);
  }, 15_000);

  it('moves an entry that failed retry.attempts times to its dead-letter stream and acks it', async () => {
    const r = await makeRig();
    let calls = 0;
    const runner = await start(
      r,
      'g4',
      'c1',
      async () => {
        calls++;
        throw new Error('poison');
      },
      { retry: { visibilityMs: 100, attempts: 3 } },
    );
    const id = await add(r.streams[9], 'kind', 'credit', 'amount', '100');
    await waitUntil('given up', async () => calls > 0 && (await raw.xpending(r.streams[9], 'g4'))[0] === 0, 5000);
    await sleep(300);
    await runner.stop();
    expect(calls).toBe(3);
    const dead = await raw.xrange(r.dead[9], '-', '+');
    expect(dead).toHaveLength(1);
    expect(dead[0][1]).toEqual(['group', 'g4', 'consumer', 'c1', 'eventId', id, 'deliveries', '3', 'error', 'poison', 'kind', 'credit', 'amount', '100']);
    expect(await count(r, 'dead')).toBe(1);
    expect(await count(r, 'failed')).toBe(3);
  });

  it('resumes its own pending entries at once when restarted under the same consumer name', async () => {
    const r = await makeRig();
    await raw.xgroup('CREATE', r.streams[2], 'g5', '$', 'MKSTREAM');
    const id = await add(r.streams[2], 'n', '1');
    // Delivered to c1 earlier (say, before a crash), never acked.
    await raw.xreadgroup('GROUP', 'g5', 'c1', 'STREAMS', r.streams[2], '>');
    const seen: string[] = [];
    const runner = await start(r, 'g5', 'c1', async (e) => void seen.push(e.id));
    await waitUntil('the pending entry', async () => seen.includes(id), 1000);
    await runner.stop();
    expect((await raw.xpending(r.streams[2], 'g5'))[0]).toBe(0);
  });

  it('stop() returns promptly while the read is blocked, and closes the blocking connection', async () => {
    const r = await makeRig();
    const runner = await start(r, 'g6', 'c1', async () => undefined, { blockMs: 30_000 });
    await sleep(200);
    const t0 = Date.now();
    await runner.stop();
    expect(Date.now() - t0).toBeLessThan(200);
    await sleep(50);
    expect(String(await raw.client('LIST'))).not.toMatch(/cmd=xreadgroup/);
    expect(runner.isRunning).toBe(false);
  });

  it('stop() waits for the handler in hand; what it did not ack stays pending', async () => {
    const r = await makeRig();
    let finished = 0;
    const runner = await start(r, 'g7', 'c1', async () => {
      await sleep(300);
      finished++;
    });
    await add(r.streams[1], 'n', '1');
    await add(r.streams[1], 'n', '2');
    await sleep(100);
    await runner.stop();
    expect(finished).toBe(1);
    expect((await raw.xpending(r.streams[1], 'g7'))[0]).toBe(1);
  });

  it('recreates a group deleted under it', async () => {
    const r = await makeRig();
    const seen: string[] = [];
    const runner = await start(r, 'g8', 'c1', async (e) => void seen.push(e.id), { startFrom: 'now' });
    await sleep(100);
    await raw.xgroup('DESTROY', r.streams[4], 'g8');
    // The blocked read fails with NOGROUP at the latest when its block time ends; the runner then creates the group again (at `now`).
    await waitUntil('the group back', async () => ((await raw.xinfo('GROUPS', r.streams[4])) as unknown[]).length === 1, 5000);
    const id = await add(r.streams[4], 'n', '1');
    await waitUntil('the entry after the group came back', async () => seen.includes(id) || String(seen.length), 5000);
    await runner.stop();
  });

  it('RedisService.closeBlocking fails the command blocked on it at once; the next blocking(name) is a new connection', async () => {
    const r = await makeRig();
    const conn = r.redis.blocking('close-test');
    const blocked = conn.blpop(r.streams[0], 30).catch((e: Error) => e);
    await sleep(100);
    const t0 = Date.now();
    r.redis.closeBlocking('close-test');
    expect(await blocked).toBeInstanceOf(Error);
    expect(Date.now() - t0).toBeLessThan(200);
    const fresh = r.redis.blocking('close-test');
    expect(fresh).not.toBe(conn);
    expect(await fresh.ping()).toBe('PONG');
  });

  it('refuses a dead-letter stream outside its stream’s slot', async () => {
    const r = await makeRig();
    await expect(
      r.runners.start({
        name: 'test',
        streams: [{ key: r.streams[0], deadLetterKey: r.dead[1] }],
        group: 'g9',
        consumer: 'c1',
        handler: async () => undefined,
      }),
    ).rejects.toThrow(/not in the slot/);
  });
});

describe(`${StreamGroupRunner.name} with concurrency`, () => {
  /** XACK calls the server has served so far (INFO commandstats). */
  const xackCalls = async () => Number(/cmdstat_xack:calls=(\d+)/.exec(await raw.info('commandstats'))?.[1] ?? 0);
  /** `n` entries on `stream`, written in one pipeline; their ids in order. */
  const addMany = async (stream: string, n: number, from = 0): Promise<string[]> => {
    const pipe = raw.pipeline();
    for (let i = 0; i < n; i++) pipe.xadd(stream, '*', 'n', String(from + i));
    return (await pipe.exec())!.map(([err, id]) => {
      if (err) throw err;
      return id as string;
    });
  };
  /** Wraps a handler to count the calls in flight at once, per stream and over all. */
  const tracked = (handle: (e: StreamEntry) => Promise<void>) => {
    const inFlight = new Map<string, number>();
    const t = { maxPerStream: 0, maxOverall: 0, overall: 0 };
    const handler = async (e: StreamEntry) => {
      const n = (inFlight.get(e.stream) ?? 0) + 1;
      inFlight.set(e.stream, n);
      t.overall++;
      t.maxPerStream = Math.max(t.maxPerStream, n);
      t.maxOverall = Math.max(t.maxOverall, t.overall);
      try {
        await handle(e);
      } finally {
        inFlight.set(e.stream, inFlight.get(e.stream)! - 1);
        t.overall--;
      }
    };
    return { handler, t };
  };

  it('handles up to N entries of one stream at once, each exactly once, and acks each batch with one XACK', async () => {
    const r = await makeRig();
    // Written before the group exists: read from the beginning in full batches of 50, 4 on the first stream and 1 on the second.
    const ids = [...(await addMany(r.streams[0], 200)), ...(await addMany(r.streams[1], 50, 200))];
    const seen = new Map<string, number>();
    const { handler, t } = tracked(async (e) => {
      await sleep(2);
      seen.set(e.id, (seen.get(e.id) ?? 0) + 1);
    });
    const xacksBefore = await xackCalls();
    const runner = await start(r, 'gc1', 'c1', handler, { concurrency: 8, batchSize: 50 });
    await waitUntil('250 entries', async () => seen.size >= 250 || `${seen.size}`, 10_000);
    await waitUntil('all acked', async () => (await count(r, 'acked')) === 250 || String(await count(r, 'acked')), 5000);
    await runner.stop();
    expect([...seen.keys()].sort()).toEqual([...ids].sort());
    expect([...seen.values()].every((n) => n === 1)).toBe(true);
    for (const s of [r.streams[0], r.streams[1]]) expect((await raw.xpending(s, 'gc1'))[0]).toBe(0);
    // Overlapping within a stream, never more than N, and a stream's batch finishes before its next read.
    expect(t.maxPerStream).toBeGreaterThan(1);
    expect(t.maxPerStream).toBeLessThanOrEqual(8);
    // Five batches with entries, one XACK each (not one per entry).
    expect((await xackCalls()) - xacksBefore).toBe(5);
    expect(await count(r, 'acked')).toBe(250);
  });

  it('leaves a failed entry pending while the others of its batch are acked', async () => {
    const r = await makeRig();
    const ids = await addMany(r.streams[2], 20);
    const bad = ids[7];
    const handled: string[] = [];
    let failures = 0;
    const { handler, t } = tracked(async (e) => {
      await sleep(5);
      if (e.id === bad) {
        failures++;
        throw new Error('this one fails');
      }
      handled.push(e.id);
    });
    // No takeover during the test: the failed entry must stay where it is.
    const runner = await start(r, 'gc2', 'c1', handler, { concurrency: 8, retry: { visibilityMs: 60_000 } });
    await waitUntil('the batch handled and acked', async () => (await count(r, 'acked')) === 19 || String(await count(r, 'acked')), 5000);
    await runner.stop();
    expect(failures).toBe(1);
    expect(handled.sort()).toEqual(ids.filter((id) => id !== bad).sort());
    expect(t.maxPerStream).toBeGreaterThan(1);
    const pending = (await raw.xpending(r.streams[2], 'gc2', '-', '+', 10)) as Array<[string, string, number, number]>;
    expect(pending.map(([id, consumer, , deliveries]) => [id, consumer, deliveries])).toEqual([[bad, 'c1', 1]]);
    expect(await count(r, 'failed')).toBe(1);
    expect(await count(r, 'dead')).toBe(0);
  });

  it('with concurrency 1 (the default) handles one entry of a stream at a time, in stream order', async () => {
    const r = await makeRig();
    const ids = await addMany(r.streams[3], 120);
    const order: string[] = [];
    // Uneven handler times: any overlap would let a later entry finish first.
    const { handler, t } = tracked(async (e) => {
      await sleep(Number(e.fields[1]) % 3);
      order.push(e.id);
    });
    const runner = await start(r, 'gc3', 'c1', handler, { batchSize: 50 });
    await waitUntil('120 entries', async () => order.length >= 120 || `${order.length}`, 10_000);
    await waitUntil('all acked', async () => (await raw.xpending(r.streams[3], 'gc3'))[0] === 0, 5000);
    await runner.stop();
    expect(order).toEqual(ids);
    expect(t.maxPerStream).toBe(1);
    expect(await count(r, 'acked')).toBe(120);
  });

  it('refuses a concurrency that is not a positive integer', async () => {
    const r = await makeRig();
    for (const concurrency of [0, 1.5, -1]) await expect(start(r, 'gc4', 'c1', async () => undefined, { concurrency })).rejects.toThrow(/concurrency/);
  });
});

describe(`${StreamGroupRunner.name} across a Redis restart`, () => {
  it('backs off while Redis is down, with no tight loop, and resumes when it is back', async () => {
    const r = await makeRig();
    const seen: string[] = [];
    const runner = await start(r, 'g-restart', 'c1', async (e) => void seen.push(e.id), { blockMs: 500 });
    const before = await add(r.streams[6], 'n', 'before');
    await waitUntil('the first entry acked', async () => seen.includes(before) && (await raw.xpending(r.streams[6], 'g-restart'))[0] === 0, 5000);
    const warn = jest.spyOn(Logger.prototype, 'warn');
    const reads = jest.spyOn(r.redis, 'blocking');
    await server.stop();
    await sleep(2000);
    // Each read takes the blocking connection once: a handful of attempts, backing off, not a tight loop.
    expect(reads.mock.calls.length).toBeGreaterThanOrEqual(1);
    expect(reads.mock.calls.length).toBeLessThan(12);
    await server.start();
    await waitUntil('raw client back', async () => (await raw.ping()) === 'PONG', 10_000);
    const after = await add(r.streams[6], 'n', 'after');
    await waitUntil('the entry written after the restart', async () => seen.includes(after) || String(seen.length), 15_000);
    // Its ack may meet the command connection still reconnecting: the entry is then read again from the runner's own
    // pending ones and acked (at least once), so the group drains while the runner runs.
    await waitUntil('nothing pending', async () => (await raw.xpending(r.streams[6], 'g-restart'))[0] === 0, 10_000);
    await runner.stop();
    // Logged once for the outage, not once per attempt.
    expect(warn.mock.calls.filter((c) => c[1] === 'reading the streams failed; retrying with backoff')).toHaveLength(1);
    warn.mockRestore();
    reads.mockRestore();
  }, 40_000);

  it('an XACK that fails (the command connection away) is sent again before the next read: each entry handled once, nothing left pending', async () => {
    const r = await makeRig();
    const command = r.redis.command.bind(r.redis);
    let xacks = 0;
    // The first XACK fails as an unreachable Redis does; the reads, on their own connection, go on.
    jest.spyOn(r.redis, 'command').mockImplementation(<T>(fn: (c: RedisClient) => Promise<T>) =>
      command((c) =>
        fn(
          new Proxy(c, {
            get: (target, key) => {
              if (key === 'xack' && xacks++ === 0) return () => Promise.reject(new RedisUnavailableError(new Error('Connection is closed.')));
              const v = Reflect.get(target, key) as unknown;
              return typeof v === 'function' ? (v as (...a: unknown[]) => unknown).bind(target) : v;
            },
          }),
        ),
      ),
    );
    const seen: string[] = [];
    const runner = await start(r, 'g-ack', 'c1', async (e) => void seen.push(e.id), { blockMs: 200, retry: { visibilityMs: 60_000 } });
    const ids = [await add(r.streams[7], 'n', '1'), await add(r.streams[7], 'n', '2')];
    await waitUntil('nothing pending', async () => (await raw.xpending(r.streams[7], 'g-ack'))[0] === 0 || `xacks ${xacks}`, 5000);
    const third = await add(r.streams[7], 'n', '3');
    await waitUntil('the third entry', async () => seen.includes(third), 5000);
    await runner.stop();
    expect(xacks).toBeGreaterThanOrEqual(2);
    expect([...seen].sort()).toEqual([...ids, third].sort());
    expect((await raw.xpending(r.streams[7], 'g-ack'))[0]).toBe(0);
    expect(await count(r, 'acked')).toBe(3);
  });

  it('starts while Redis is down (a service boots and answers 503 meanwhile) and creates its groups once Redis is back', async () => {
    const r = await makeRig();
    await server.stop();
    try {
      const seen: string[] = [];
      const runner = await start(r, 'g-boot-down', 'c1', async (e) => void seen.push(e.id), { blockMs: 500 });
      expect(runner.isRunning).toBe(true);
      await server.start();
      await waitUntil('raw client back', async () => (await raw.ping()) === 'PONG', 10_000);
      await waitUntil(
        'the group created by the reader',
        async () => ((await raw.xinfo('GROUPS', r.streams[2]).catch(() => [])) as unknown[]).length === 1,
        15_000,
      );
      const id = await add(r.streams[2], 'n', 'after-boot');
      await waitUntil('the entry written once Redis is up', async () => seen.includes(id), 15_000);
      await runner.stop();
      expect((await raw.xpending(r.streams[2], 'g-boot-down'))[0]).toBe(0);
    } finally {
      if (!(await raw.ping().catch(() => null))) await server.start();
    }
  }, 40_000);
});
