import { Injectable, Logger } from '@nestjs/common';
import { DiscoveryModule } from '@nestjs/core';
import { Test } from '@nestjs/testing';
import { MetricsService } from '../../platform/metrics/metrics.service';
import { RedisService } from '../../platform/redis/redis.service';
import { BackgroundWorkers } from './background-workers.service';
import { CLOCK, systemClock } from './clock';
import { PeriodicJobRunner } from './periodic-job';
import { configured, DelayQueueHandler, PeriodicJob, StreamConsumer } from './worker-declarations';
import { type WorkerEngine, WorkerRegistry } from './worker-registry';

/** Records what happens, in order: engine starts, worker stops, the Redis close. */
const events: string[] = [];

/** A stand-in delivery engine: starts nothing but a worker whose stop is recorded. */
@Injectable()
class FakeQueueEngine {
  constructor(registry: WorkerRegistry, workers: BackgroundWorkers) {
    const engine: WorkerEngine = {
      defaults: { attempts: 5, backoff: { initialMs: 1000, maxMs: 300_000, factor: 2 }, visibilityMs: 30_000 },
      trigger: (s) => `queue ${(s as { queue: string }).queue}`,
      deadLetter: () => 'dead set',
      metric: () => 'm',
      // Queues with items in Redis: q1, one a periodic job drains, and one nothing handles.
      unhandled: (declared, drained) => {
        const handled = new Set([...declared.map((s) => (s as { queue: string }).queue), ...drained]);
        return Promise.resolve(['q1', 'drained-q', 'orphan'].filter((q) => !handled.has(q)).map((q) => `delay-queue:${q}`));
      },
      start: (s, _handler, retry) => {
        const name = `delay-queue:${(s as { queue: string }).queue}`;
        events.push(`start ${name} attempts=${retry.attempts} visibility=${retry.visibilityMs}`);
        workers.register(name, { stop: async () => void events.push(`stop ${name}`) });
        return Promise.resolve();
      },
    };
    registry.provide('delay-queue', engine);
  }
}

class Settings {
  visibilityMs = 4000;
}

@Injectable()
class Orders {
  @DelayQueueHandler({ queue: 'q1', retry: { attempts: 7, visibilityMs: configured('Q1_VISIBILITY_MS', (get) => get(Settings).visibilityMs) } })
  onDue(): Promise<void> {
    return Promise.resolve();
  }
}

@Injectable()
class OtherOrders {
  @DelayQueueHandler({ queue: 'q1' })
  alsoOnDue(): Promise<void> {
    return Promise.resolve();
  }
}

@Injectable()
class Listener {
  @StreamConsumer({ stream: 'nowhere', group: 'g' })
  onEntry(): Promise<void> {
    return Promise.resolve();
  }
}

@Injectable()
class Sweeper {
  runs = 0;
  @PeriodicJob({ name: 'sweep', everyMs: 60_000, lease: { key: () => 'lease-key', shown: 'lease-key' }, drains: ['drained-q'] })
  sweep(): Promise<void> {
    this.runs++;
    return Promise.resolve();
  }
}

/** Redis as the registry uses it: SET NX for leases (taken when `leaseFree`), close() on shutdown. */
const fakeRedis = (leaseFree: () => boolean) => ({
  command: (fn: (c: unknown) => Promise<unknown>) => fn({ set: () => Promise.resolve(leaseFree() ? 'OK' : null) }),
  close: () => {
    events.push('redis closed');
    return Promise.resolve();
  },
});

async function appWith(providers: Array<new (...args: never[]) => unknown>, leaseFree = () => true) {
  const moduleRef = await Test.createTestingModule({
    imports: [DiscoveryModule],
    providers: [
      WorkerRegistry,
      BackgroundWorkers,
      FakeQueueEngine,
      Settings,
      { provide: CLOCK, useValue: systemClock },
      { provide: MetricsService, useValue: new MetricsService() },
      { provide: RedisService, useValue: fakeRedis(leaseFree) },
      ...providers,
    ],
  }).compile();
  moduleRef.useLogger(false);
  return moduleRef;
}

beforeEach(() => events.splice(0));

describe(WorkerRegistry.name, () => {
  it('finds the declared workers at boot and starts them with their declared policy over the engine defaults', async () => {
    const app = await appWith([Orders]);
    await app.init();
    expect(events).toEqual(['start delay-queue:q1 attempts=7 visibility=4000']);
    expect(app.get(WorkerRegistry).rows()).toEqual([
      {
        name: 'delay-queue:q1',
        trigger: 'queue q1',
        lease: 'none (competing consumers)',
        retry: 'attempts 7; backoff 1 s → 5 min; visibility `Q1_VISIBILITY_MS`',
        deadLetter: 'dead set',
        metric: 'm',
      },
    ]);
    await app.close();
  });

  it('refuses to boot with two handlers for one queue, naming both', async () => {
    const app = await appWith([Orders, OtherOrders]);
    await expect(app.init()).rejects.toThrow('background worker delay-queue:q1 is declared twice: Orders.onDue and OtherOrders.alsoOnDue');
    expect(events).toEqual([]);
  });

  it('refuses to boot with a declaration whose engine the app does not have', async () => {
    const app = await appWith([Listener]);
    await expect(app.init()).rejects.toThrow('Listener.onEntry declares stream:nowhere:g, but no engine stream:nowhere is provided');
  });

  it('on shutdown stops every worker, and only then closes the Redis connections', async () => {
    const app = await appWith([Orders, Sweeper]);
    await app.init();
    await app.close();
    expect(events).toEqual(['start delay-queue:q1 attempts=7 visibility=4000', 'stop delay-queue:q1', 'redis closed']);
  });

  it('logs at error, once Redis answers, work that waits with no declared handler (drained queues count as handled)', async () => {
    const error = jest.spyOn(Logger.prototype, 'error').mockImplementation(() => undefined);
    try {
      const app = await appWith([Orders, Sweeper]);
      await app.init();
      await new Promise((r) => setImmediate(r));
      const named = error.mock.calls.map(([o]) => (o as { worker?: string }).worker);
      expect(named).toEqual(['delay-queue:orphan']);
      await app.close();
    } finally {
      error.mockRestore();
    }
  });

  it('runs a periodic job under its lease: skipped while another instance holds it', async () => {
    let free = false;
    const app = await appWith([Sweeper], () => free);
    await app.init();
    const job = app.get(WorkerRegistry).job('sweep');
    await job.runOnce();
    expect(app.get(Sweeper).runs).toBe(0);
    free = true;
    await job.runOnce();
    expect(app.get(Sweeper).runs).toBe(1);
    await app.close();
  });
});

describe(PeriodicJobRunner.name, () => {
  const counter = () => ({ inc: jest.fn() });
  afterEach(() => jest.useRealTimers());

  it('runs every period from the end of the last run, after a failure on its backoff, and stop() waits for the run in hand', async () => {
    jest.useFakeTimers();
    const runs: number[] = [];
    let fail = true;
    let release: () => void = () => undefined;
    let hold = false;
    const runner = new PeriodicJobRunner(
      {
        name: 'j',
        everyMs: 1000,
        runAtStart: true,
        backoff: { initialMs: 100, maxMs: 100 },
        run: async (signal) => {
          runs.push(Date.now());
          if (hold) await new Promise<void>((r) => (release = r));
          if (signal.aborted) return;
          if (fail) throw new Error('redis down');
        },
      },
      { redis: {} as RedisService, clock: { ...systemClock, random: () => 1 }, runs: counter() as never },
    );
    const t0 = Date.now();
    runner.start();
    await jest.advanceTimersByTimeAsync(0);
    expect(runs.map((t) => t - t0)).toEqual([0]);
    // Failed: again after the backoff (100 ms), not a whole period.
    await jest.advanceTimersByTimeAsync(100);
    expect(runs.map((t) => t - t0)).toEqual([0, 100]);
    fail = false;
    await jest.advanceTimersByTimeAsync(100);
    expect(runs.map((t) => t - t0)).toEqual([0, 100, 200]);
    // Succeeded: the next run a period later.
    await jest.advanceTimersByTimeAsync(999);
    expect(runs).toHaveLength(3);
    hold = true;
    await jest.advanceTimersByTimeAsync(1);
    expect(runs).toHaveLength(4);
    let stopped = false;
    const stopping = runner.stop().then(() => (stopped = true));
    await jest.advanceTimersByTimeAsync(5000);
    expect(stopped).toBe(false); // the run in hand is waited for
    release();
    await stopping;
    await jest.advanceTimersByTimeAsync(5000);
    expect(runs).toHaveLength(4); // and no run after stop
  });
});
