import { EventEmitter } from 'node:events';
import { type Clock, systemClock } from '../workers/clock';
import { LockWaiters } from './lock-waiters';

/** A subscriber connection that records SUBSCRIBE/UNSUBSCRIBE and delivers what the test publishes. */
class FakeSubscriber extends EventEmitter {
  readonly subscribed: string[] = [];
  readonly unsubscribed: string[] = [];
  answer: (ch: string) => Promise<unknown> = () => Promise.resolve(1);

  subscribe(ch: string): Promise<unknown> {
    this.subscribed.push(ch);
    return this.answer(ch);
  }

  unsubscribe(ch: string): Promise<unknown> {
    this.unsubscribed.push(ch);
    return Promise.resolve(0);
  }

  publish(ch: string): void {
    this.emit('message', ch, 'owner');
  }
}

describe(LockWaiters.name, () => {
  let sub: FakeSubscriber;
  let clock: Clock;
  let waiters: LockWaiters;

  beforeEach(() => {
    jest.useFakeTimers();
    sub = new FakeSubscriber();
    // The process clock reads the (fake) globals: the test moves time itself.
    clock = systemClock;
    waiters = new LockWaiters(() => sub as never, clock);
  });

  afterEach(() => jest.useRealTimers());

  /** Tracks when a sleep ends, on the fake clock. */
  function sleeping(p: Promise<void>): { endedAt?: number } {
    const r: { endedAt?: number } = {};
    void p.then(() => (r.endedAt = clock.now()));
    return r;
  }

  it('subscribes once per lock however many wait, and unsubscribes when the last one leaves', async () => {
    await Promise.all([waiters.join('a'), waiters.join('a'), waiters.join('b')]);
    expect(sub.subscribed).toEqual(['a', 'b']);
    expect(waiters.waiting('a')).toBe(2);
    waiters.leave('a');
    expect(sub.unsubscribed).toEqual([]);
    waiters.leave('a');
    expect(sub.unsubscribed).toEqual(['a']);
    expect(waiters.subscribedChannels).toBe(1);
    expect(sub.listenerCount('message')).toBe(1);
  });

  it('sleeps exactly its time when no release message comes', async () => {
    await waiters.join('a');
    const t0 = clock.now();
    const s = sleeping(waiters.sleep('a', 200, waiters.seen('a'), true));
    await jest.advanceTimersByTimeAsync(199);
    expect(s.endedAt).toBeUndefined();
    await jest.advanceTimersByTimeAsync(1);
    expect(s.endedAt! - t0).toBe(200);
    expect(jest.getTimerCount()).toBe(0);
  });

  it('wakes every sleeping reader but only the longest-sleeping writer on a release message', async () => {
    await waiters.join('a');
    const t0 = clock.now();
    const since = waiters.seen('a');
    const w1 = sleeping(waiters.sleep('a', 1_000, since, true));
    const r1 = sleeping(waiters.sleep('a', 1_000, since, false));
    const w2 = sleeping(waiters.sleep('a', 1_000, since, true));
    const r2 = sleeping(waiters.sleep('a', 1_000, since, false));
    await jest.advanceTimersByTimeAsync(10);
    sub.publish('a');
    await jest.advanceTimersByTimeAsync(0);
    expect([w1.endedAt, r1.endedAt, r2.endedAt].map((t) => t! - t0)).toEqual([10, 10, 10]);
    expect(w2.endedAt).toBeUndefined();
    // The next release wakes the next writer.
    await jest.advanceTimersByTimeAsync(5);
    sub.publish('a');
    await jest.advanceTimersByTimeAsync(0);
    expect(w2.endedAt! - t0).toBe(15);
  });

  it('does not sleep through a release message that came after its last try', async () => {
    await waiters.join('a');
    const since = waiters.seen('a');
    sub.publish('a');
    const t0 = clock.now();
    const s = sleeping(waiters.sleep('a', 1_000, since, true));
    await jest.advanceTimersByTimeAsync(0);
    expect(s.endedAt).toBe(t0);
  });

  it('ends a sleep when the caller aborts, and ignores messages on other locks', async () => {
    await Promise.all([waiters.join('a'), waiters.join('b')]);
    const ac = new AbortController();
    const t0 = clock.now();
    const s = sleeping(waiters.sleep('a', 1_000, waiters.seen('a'), true, ac.signal));
    sub.publish('b');
    await jest.advanceTimersByTimeAsync(30);
    expect(s.endedAt).toBeUndefined();
    ac.abort();
    await jest.advanceTimersByTimeAsync(0);
    expect(s.endedAt! - t0).toBe(30);
    expect(jest.getTimerCount()).toBe(0);
  });

  it('reports a subscription that failed as not ready, without rejecting', async () => {
    sub.answer = () => Promise.reject(new Error('connection lost'));
    await expect(waiters.join('a')).resolves.toBe(false);
  });
});
