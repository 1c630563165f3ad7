import type { RedisClient } from '../../platform/redis/redis.service';
import { type Clock, systemClock } from '../workers/clock';

interface Channel {
  /** Waiters in this process on this lock. */
  refs: number;
  /** Resolved when SUBSCRIBE has been acknowledged (never rejects). */
  ready: Promise<boolean>;
  /** Everyone waiting for the next release message (value: a writer), in the order they fell asleep. */
  sleepers: Map<() => void, boolean>;
  /** Release messages seen so far: a waiter that tried before the latest one must not sleep. */
  seen: number;
}

/**
 * Release messages for waiters: one SUBSCRIBE per lock per process however
 * many callers wait on it (reference-counted; the last one out unsubscribes),
 * and one 'message' listener on the shared subscriber connection for all of
 * them. A message wakes every sleeping reader on its lock (they may all get
 * it) but only the longest-sleeping writer (one can), so a release costs one
 * try per process rather than one per waiter. The lock script decides who
 * gets it; a writer that gets it while others here still wait keeps the
 * lock's waiter mark, so its release wakes the next one.
 */
export class LockWaiters {
  private readonly channels = new Map<string, Channel>();

  /**
   * @param subscriber the shared subscriber connection (called only when a first waiter joins)
   * @param clock times the sleeps (tests drive it with fake timers)
   */
  constructor(
    private readonly subscriber: () => Pick<RedisClient, 'on' | 'subscribe' | 'unsubscribe'>,
    private readonly clock: Clock = systemClock,
  ) {}

  private listening = false;

  /** Joins the waiters of `channel`. Call `leave` exactly once afterwards. */
  join(channel: string): Promise<boolean> {
    if (!this.listening) {
      this.listening = true;
      this.subscriber().on('message', (ch: string) => this.wake(ch));
    }
    let c = this.channels.get(channel);
    if (!c) {
      const ready = this.subscriber()
        .subscribe(channel)
        .then(
          () => true,
          () => false,
        );
      c = { refs: 0, ready, sleepers: new Map(), seen: 0 };
      this.channels.set(channel, c);
    }
    c.refs++;
    return c.ready;
  }

  leave(channel: string): void {
    const c = this.channels.get(channel);
    if (!c || --c.refs > 0) return;
    this.channels.delete(channel);
    void this.subscriber()
      .unsubscribe(channel)
      .catch(() => undefined);
  }

  /** Callers in this process that have joined the waiters of `channel`. */
  waiting(channel: string): number {
    return this.channels.get(channel)?.refs ?? 0;
  }

  /** How many release messages `channel` has had (pass it to `sleep` to not miss one). */
  seen(channel: string): number {
    return this.channels.get(channel)?.seen ?? 0;
  }

  /**
   * Sleeps until a release message on `channel` (one after the `since`-th) wakes it,
   * `ms` passing, or `signal` aborting, whichever comes first. Never rejects.
   * A message wakes every reader but one writer (see the class comment).
   */
  sleep(channel: string, ms: number, since: number, writer: boolean, signal?: AbortSignal): Promise<void> {
    const c = this.channels.get(channel);
    if ((c && c.seen > since) || signal?.aborted) return Promise.resolve();
    return new Promise<void>((resolve) => {
      const done = () => {
        this.clock.clearTimeout(timer);
        c?.sleepers.delete(done);
        signal?.removeEventListener('abort', done);
        resolve();
      };
      const timer = this.clock.setTimeout(done, ms);
      c?.sleepers.set(done, writer);
      signal?.addEventListener('abort', done, { once: true });
    });
  }

  /** Waiters in this process, by channel (for tests and the metrics gauge). */
  get subscribedChannels(): number {
    return this.channels.size;
  }

  private wake(channel: string): void {
    const c = this.channels.get(channel);
    if (!c) return;
    c.seen++;
    let writerWoken = false;
    for (const [wake, writer] of [...c.sleepers]) {
      if (writer && writerWoken) continue;
      writerWoken ||= writer;
      wake();
    }
  }
}
