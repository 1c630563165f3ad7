import { Logger } from '@nestjs/common';
import type { QueueKeys } from './delay-queue.keys';
import type { DelayQueueMetrics } from './delay-queue.metrics';
import type { ClaimedDelivery, ClaimReply, DelayQueueStore, FailOutcome } from './delay-queue.store';
import type { Handler } from './delay-queue.types';
import type { QueueEventBus } from './queue-event-bus';
import { type Clock, systemClock } from '../workers/clock';
import { backoffDelay } from '../workers/retry-policy';
import { QueueProcessor, type ProcessorSettings } from './queue-processor';

describe(backoffDelay.name, () => {
  const b = { initialMs: 1000, maxMs: 60_000, factor: 2 };

  it('doubles per failed attempt, with half of each delay random', () => {
    expect([1, 2, 3, 4].map((a) => backoffDelay(a, b, () => 0))).toEqual([500, 1000, 2000, 4000]);
    expect([1, 2, 3, 4].map((a) => backoffDelay(a, b, () => 1))).toEqual([1000, 2000, 4000, 8000]);
  });

  it('never exceeds the cap, and keeps at least half of it', () => {
    expect(backoffDelay(30, b, () => 1)).toBe(60_000);
    expect(backoffDelay(30, b, () => 0)).toBe(30_000);
  });

  it('spreads retries of items that failed together', () => {
    const delays = new Set(Array.from({ length: 50 }, () => backoffDelay(3, b)));
    expect(delays.size).toBeGreaterThan(10);
    for (const d of delays) {
      expect(d).toBeGreaterThanOrEqual(2000);
      expect(d).toBeLessThanOrEqual(4000);
    }
  });

  it('allows retrying at once when asked to', () => {
    expect(backoffDelay(5, { initialMs: 0, maxMs: 0, factor: 2 })).toBe(0);
  });
});

/** A claim reply with nothing claimed, on the (fake) Redis clock. */
const emptyClaim = (over: Partial<ClaimReply> = {}): ClaimReply => ({
  now: Date.now(),
  nextWake: null,
  readyLeft: 0,
  promoted: 0,
  requeued: 0,
  died: 0,
  claimed: [],
  dead: [],
  ...over,
});

/**
 * The store as the processor sees it, every call recorded. Claim replies come from `replies` (then
 * empty ones), stamped with the clock when the claim runs unless they are promises.
 */
class FakeStore {
  readonly replies: Array<Partial<ClaimReply> | Promise<ClaimReply>> = [];
  /** When (fake ms since the test began) each claim ran. */
  readonly claimedAt: number[] = [];
  extendResult = true;
  readonly claim = jest.fn(() => {
    this.claimedAt.push(Date.now() - T0);
    const reply = this.replies.shift();
    return reply instanceof Promise ? reply : Promise.resolve(emptyClaim(reply));
  });
  readonly extend = jest.fn(() => Promise.resolve(this.extendResult));
  readonly ack = jest.fn(() => Promise.resolve(true));
  readonly fail = jest.fn((..._args: unknown[]) => Promise.resolve<FailOutcome>('retried'));
  readonly release = jest.fn(() => Promise.resolve(true));
}

class FakeEvents {
  handler?: (message: string) => void;
  readonly subscribe = jest.fn((_channel: string, handler: (message: string) => void) => {
    this.handler = handler;
    return Promise.resolve();
  });
  readonly unsubscribe = jest.fn(() => Promise.resolve());
  emit(message: string): void {
    this.handler?.(message);
  }
}

const counter = () => ({ inc: jest.fn() });
const fakeMetrics = () =>
  ({
    scheduled: counter(),
    cancelled: counter(),
    fired: counter(),
    acked: counter(),
    retried: counter(),
    dead: counter(),
    lateness: { observe: jest.fn() },
  }) as unknown as DelayQueueMetrics;

const KEYS: QueueKeys = { keys: Array.from({ length: 9 }, (_, i) => `k${i}`), stateKeys: ['k0', 'k1', 'k2', 'k3'], channel: 'events' };
const T0 = 1_700_000_000_000;

const settingsOf = (o: Partial<ProcessorSettings> = {}): ProcessorSettings => ({
  concurrency: 10,
  retry: { visibilityMs: 3000, attempts: 5, backoff: { initialMs: 1000, maxMs: 1000, factor: 2 } },
  pollMs: 1000,
  handlerTimeoutMs: 60_000,
  claimBatch: 100,
  promoteBatch: 1000,
  shutdownGraceMs: 2000,
  replyWithinMs: 750,
  ...o,
});

const delivery = (id: string, token: number, over: Partial<ClaimedDelivery> = {}): ClaimedDelivery => ({
  id,
  rawPayload: '{"n":1}',
  attempt: 1,
  dueAt: Date.now(),
  token,
  ...over,
});

/** A promise and its resolve, for a handler or a claim that finishes when the test says so. */
function deferred<T = void>(): { promise: Promise<T>; resolve: (v: T) => void } {
  let resolve!: (v: T) => void;
  const promise = new Promise<T>((r) => (resolve = r));
  return { promise, resolve };
}

describe(QueueProcessor.name, () => {
  let store: FakeStore;
  let events: FakeEvents;
  let processor: QueueProcessor<unknown> | undefined;
  /** The poll jitter the clock hands out: 1 puts every poll a full pollMs apart. */
  let jitter: number;

  beforeEach(() => {
    jest.useFakeTimers({ now: T0 });
    store = new FakeStore();
    events = new FakeEvents();
    jitter = 1;
  });

  afterEach(async () => {
    const stopping = processor?.stop();
    await jest.advanceTimersByTimeAsync(60_000);
    await stopping;
    processor = undefined;
    jest.useRealTimers();
  });

  const elapsed = () => Date.now() - T0;
  const start = async (handler: Handler<unknown> = () => Promise.resolve(), settings: Partial<ProcessorSettings> = {}) => {
    const clock: Clock = { ...systemClock, random: () => jitter };
    processor = new QueueProcessor(
      'q',
      KEYS,
      handler,
      settingsOf(settings),
      store as unknown as DelayQueueStore,
      events as unknown as QueueEventBus,
      fakeMetrics(),
      clock,
    );
    await processor.start();
    await jest.advanceTimersByTimeAsync(0);
    return processor;
  };

  describe('wake-up timer', () => {
    it('claims at once on start (catch-up), then wakes exactly at the next due time the claim reported', async () => {
      store.replies.push({ nextWake: T0 + 300 });
      await start();
      expect(store.claimedAt).toEqual([0]);
      await jest.advanceTimersByTimeAsync(299);
      expect(store.claimedAt).toEqual([0]);
      await jest.advanceTimersByTimeAsync(1);
      expect(store.claimedAt).toEqual([0, 300]);
    });

    it('re-arms earlier for an event announcing an earlier due time, and ignores one announcing a later time', async () => {
      store.replies.push({ nextWake: T0 + 800 });
      await start();
      events.emit(`due:${T0 + 900}`);
      events.emit(`due:${T0 + 200}`);
      await jest.advanceTimersByTimeAsync(999);
      // 200: the event's time; nothing at 800 (the claim at 200 reported nothing more) or 900.
      expect(store.claimedAt).toEqual([0, 200]);
      await jest.advanceTimersByTimeAsync(1);
      expect(store.claimedAt).toEqual([0, 200, 1000]); // the poll
    });

    it('keeps an event that arrived while a claim was on the wire: the reply does not move the wake-up later', async () => {
      const reply = deferred<ClaimReply>();
      store.replies.push(reply.promise);
      await start();
      events.emit(`due:${T0 + 100}`);
      reply.resolve(emptyClaim({ now: T0, nextWake: T0 + 600 }));
      await jest.advanceTimersByTimeAsync(100);
      expect(store.claimedAt).toEqual([0, 100]);
    });

    it('arms no timer for a due time beyond the poll interval: the poll claims meanwhile and re-arms from its reply', async () => {
      store.replies.push({ nextWake: T0 + 5000 });
      await start();
      expect(jest.getTimerCount()).toBe(1); // the poll alone
      store.replies.push({ nextWake: T0 + 1500 }); // the poll's claim at 1000
      await jest.advanceTimersByTimeAsync(1000);
      expect(jest.getTimerCount()).toBe(2); // the poll, and the wake-up for 1500
      await jest.advanceTimersByTimeAsync(500);
      expect(store.claimedAt).toEqual([0, 1000, 1500]);
    });

    it('names when it stops reading each claim reply, on the Redis clock, once a claim has told it that clock', async () => {
      // Redis runs 5 s ahead of this host.
      store.replies.push({ now: T0 + 5000, nextWake: T0 + 5300 });
      await start();
      await jest.advanceTimersByTimeAsync(300);
      const replyBys = store.claim.mock.calls.map((c) => (c as unknown[])[5]);
      // The first claim cannot know the Redis clock; the next names the local send time + offset + replyWithinMs.
      expect(replyBys).toEqual([undefined, T0 + 300 + 5000 + 750]);
    });

    it('ignores malformed events and aborts only the delivery a gone: event names', async () => {
      const signals = new Map<string, AbortSignal>();
      store.replies.push({ claimed: [delivery('a', 11), delivery('b', 12)] });
      await start((d) => {
        signals.set(d.id, d.signal);
        return new Promise(() => undefined);
      });
      events.emit('due:soon');
      events.emit('gone:12');
      expect(signals.get('a')?.aborted).toBe(false);
      expect(signals.get('b')?.aborted).toBe(true);
      expect(store.claimedAt).toEqual([0]);
    });
  });

  describe('fallback poll', () => {
    it.each([
      ['a full pollMs apart at the top of the jitter', 1, [0, 400, 800, 1200]],
      ['three quarters of pollMs apart halfway', 0.5, [0, 300, 600, 900, 1200]],
      ['half a pollMs apart at the bottom of the jitter, never sooner', 0, [0, 200, 400, 600, 800, 1000, 1200]],
    ])('polls %s', async (_label, j, expected) => {
      jitter = j;
      await start(undefined, { pollMs: 400 });
      await jest.advanceTimersByTimeAsync(1200);
      expect(store.claimedAt).toEqual(expected);
    });

    it('keeps polling after a claim fails, and stops polling once stopped', async () => {
      store.claim.mockImplementationOnce(() => {
        store.claimedAt.push(elapsed());
        return Promise.reject(new Error('redis down'));
      });
      const p = await start();
      await jest.advanceTimersByTimeAsync(2000);
      expect(store.claimedAt).toEqual([0, 1000, 2000]);
      await p.stop();
      await jest.advanceTimersByTimeAsync(5000);
      expect(store.claimedAt).toEqual([0, 1000, 2000]);
      expect(jest.getTimerCount()).toBe(0);
    });
  });

  describe('deliveries', () => {
    it('extends a running delivery every third of its visibility timeout, and stops once the handler is done', async () => {
      const done = deferred();
      store.replies.push({ claimed: [delivery('a', 7)] });
      await start(() => done.promise, { retry: { ...settingsOf().retry, visibilityMs: 3000 } });
      await jest.advanceTimersByTimeAsync(999);
      expect(store.extend).not.toHaveBeenCalled();
      await jest.advanceTimersByTimeAsync(2001);
      expect(store.extend.mock.calls).toEqual([
        [KEYS, 'a', 7, 3000],
        [KEYS, 'a', 7, 3000],
        [KEYS, 'a', 7, 3000],
      ]);
      done.resolve();
      await jest.advanceTimersByTimeAsync(5000);
      expect(store.extend).toHaveBeenCalledTimes(3);
      expect(store.ack).toHaveBeenCalledWith(KEYS, 'a', 7);
    });

    it('aborts the handler and stops the heartbeat when an extend finds the delivery no longer current', async () => {
      let signal: AbortSignal | undefined;
      store.replies.push({ claimed: [delivery('a', 7)] });
      await start(
        (d) => {
          signal = d.signal;
          return new Promise(() => undefined);
        },
        { retry: { ...settingsOf().retry, visibilityMs: 3000 } },
      );
      await jest.advanceTimersByTimeAsync(1000);
      expect(signal?.aborted).toBe(false);
      store.extendResult = false;
      await jest.advanceTimersByTimeAsync(1000);
      expect(signal?.aborted).toBe(true);
      await jest.advanceTimersByTimeAsync(5000);
      expect(store.extend).toHaveBeenCalledTimes(2);
    });

    it('fails a handler still running at handlerTimeoutMs, with a backoff delay, and frees its slot', async () => {
      let signal: AbortSignal | undefined;
      store.replies.push({ claimed: [delivery('a', 7, { attempt: 2 })], readyLeft: 1 });
      await start(
        (d) => {
          signal = d.signal;
          return new Promise(() => undefined);
        },
        { handlerTimeoutMs: 500, concurrency: 1, retry: { ...settingsOf().retry, backoff: { initialMs: 1000, maxMs: 10_000, factor: 2 } } },
      );
      await jest.advanceTimersByTimeAsync(499);
      expect(store.fail).not.toHaveBeenCalled();
      expect(store.claimedAt).toEqual([0]);
      await jest.advanceTimersByTimeAsync(1);
      await jest.advanceTimersByTimeAsync(0); // the fail reply
      // attempt 2, jitter 1: the whole of 1000 * 2
      expect(store.fail).toHaveBeenCalledWith(KEYS, 'a', 7, 5, 2000, 'HandlerTimeoutError: handler still running after 500 ms');
      expect(signal?.aborted).toBe(true);
      // The freed slot claims the ready item left behind at once, not at the next poll.
      expect(store.claimedAt).toEqual([0, 500]);
    });

    it('retries a failed ack after 100, 200 and 400 ms', async () => {
      const at: number[] = [];
      store.ack.mockImplementation(() => {
        at.push(elapsed());
        return at.length < 4 ? Promise.reject(new Error('blip')) : Promise.resolve(true);
      });
      store.replies.push({ claimed: [delivery('a', 7)] });
      await start();
      await jest.advanceTimersByTimeAsync(1000);
      expect(at).toEqual([0, 100, 300, 700]);
    });
  });

  describe('dead letters', () => {
    /** Every line logged through Nest's Logger, by level (error, warn, log), with its arguments. */
    const captureLogs = () => {
      const lines: Array<{ level: string; args: unknown[] }> = [];
      for (const level of ['error', 'warn', 'log'] as const) {
        jest.spyOn(Logger.prototype, level).mockImplementation((...args: unknown[]) => void lines.push({ level, args }));
      }
      return lines;
    };
    afterEach(() => jest.restoreAllMocks());
    const SECRET = '{"payer":"Jane Doe, +86 138 0000 0000"}';

    it('logs an item at error once when its last delivery fails it into dead-letter, and nothing above warn for its retries', async () => {
      const lines = captureLogs();
      store.fail.mockResolvedValueOnce('retried').mockResolvedValueOnce('retried').mockResolvedValueOnce('dead');
      store.replies.push({ claimed: [delivery('a', 7, { attempt: 1, rawPayload: SECRET })] });
      store.replies.push({ claimed: [delivery('a', 8, { attempt: 2, rawPayload: SECRET })] });
      store.replies.push({ claimed: [delivery('a', 9, { attempt: 3, rawPayload: SECRET })] });
      const metrics = fakeMetrics();
      processor = new QueueProcessor(
        'q',
        KEYS,
        () => Promise.reject(new Error('channel down')),
        settingsOf({ retry: { ...settingsOf().retry, attempts: 3 } }),
        store as unknown as DelayQueueStore,
        events as unknown as QueueEventBus,
        metrics,
        { ...systemClock, random: () => jitter },
      );
      await processor.start();
      await jest.advanceTimersByTimeAsync(0);
      // Two retries: counted, nothing logged above warn.
      expect(store.fail).toHaveBeenCalledTimes(1);
      await jest.advanceTimersByTimeAsync(1000);
      expect(store.fail).toHaveBeenCalledTimes(2);
      expect(lines.filter((l) => l.level === 'error')).toEqual([]);
      // The third delivery fails and the store moves the item to dead-letter: one error line.
      await jest.advanceTimersByTimeAsync(1000);
      expect(store.fail).toHaveBeenCalledTimes(3);
      await jest.advanceTimersByTimeAsync(5000);
      const errors = lines.filter((l) => l.level === 'error');
      expect(errors).toHaveLength(1);
      expect(errors[0].args[0]).toEqual({ queue: 'q', id: 'a', attempts: 3, lastError: 'Error: channel down' });
      expect(String(errors[0].args[1])).toContain('/admin/delay-queues/{queue}/dead');
      expect(JSON.stringify(lines)).not.toContain('Jane Doe');
      expect(metrics.dead.inc).toHaveBeenCalledTimes(1);
      expect(metrics.retried.inc).toHaveBeenCalledTimes(2);
    });

    it('logs at error, once each, the items a claim moved to dead-letter (their holder went silent)', async () => {
      const lines = captureLogs();
      const lost = 'visibility timeout: the worker holding the item stopped responding';
      store.replies.push({
        died: 2,
        dead: [
          { id: 'x', attempts: 5, lastError: lost },
          { id: 'y', attempts: 5, lastError: lost },
        ],
      });
      await start();
      await jest.advanceTimersByTimeAsync(5000);
      expect(lines.filter((l) => l.level === 'error').map((l) => l.args[0])).toEqual([
        { queue: 'q', id: 'x', attempts: 5, lastError: lost },
        { queue: 'q', id: 'y', attempts: 5, lastError: lost },
      ]);
    });
  });

  describe('stop()', () => {
    it('waits up to shutdownGraceMs for running handlers, then hands the rest back', async () => {
      let signal: AbortSignal | undefined;
      store.replies.push({ claimed: [delivery('a', 7)] });
      const p = await start(
        (d) => {
          signal = d.signal;
          return new Promise(() => undefined);
        },
        { shutdownGraceMs: 2000 },
      );
      let stopped = false;
      const stopping = p.stop().then(() => (stopped = true));
      await jest.advanceTimersByTimeAsync(1999);
      expect(store.release).not.toHaveBeenCalled();
      expect(signal?.aborted).toBe(false);
      await jest.advanceTimersByTimeAsync(1);
      await stopping;
      expect(stopped).toBe(true);
      expect(store.release).toHaveBeenCalledWith(KEYS, 'a', 7, 5);
      expect(signal?.aborted).toBe(true);
      expect(events.unsubscribe).toHaveBeenCalledWith('events');
    });

    it('returns as soon as running handlers finish within the grace, handing nothing back', async () => {
      const done = deferred();
      store.replies.push({ claimed: [delivery('a', 7)] });
      const p = await start(() => done.promise, { shutdownGraceMs: 2000 });
      const stopping = p.stop();
      await jest.advanceTimersByTimeAsync(500);
      done.resolve();
      await jest.advanceTimersByTimeAsync(0);
      await stopping;
      expect(elapsed()).toBe(500);
      expect(store.ack).toHaveBeenCalledWith(KEYS, 'a', 7);
      expect(store.release).not.toHaveBeenCalled();
    });
  });
});
