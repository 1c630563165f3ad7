import { Logger } from '@nestjs/common';
import { crashPoint } from '../../platform/core/crash-points';
import type { BackgroundWorker } from '../workers/background-workers.service';
import { type Clock, systemClock, type Timer } from '../workers/clock';
import { backoffDelay, type RetryPolicy } from '../workers/retry-policy';
import type { DelayQueueMetrics } from './delay-queue.metrics';
import type { QueueKeys } from './delay-queue.keys';
import type { ClaimedDelivery, DelayQueueStore, DiedItem } from './delay-queue.store';
import type { Delivery, Handler, Processor } from './delay-queue.types';
import type { QueueEventBus } from './queue-event-bus';

/** Default and largest number of items one claim script promotes or requeues per step: keeps every script call short (no BUSY). */
export const BATCH = 1000;
/**
 * Default number of items one claim script hands out. The claim takes its batch with a handful of commands that
 * each carry every claimed id, but its reply carries every payload, and the handlers it starts run at once.
 */
export const CLAIM_BATCH = 100;
const MAX_ERROR_CHARS = 2000;

export interface ProcessorSettings {
  concurrency: number;
  /** Deliveries before dead-letter, the backoff between them, and the visibility timeout of a delivery. */
  retry: RetryPolicy;
  pollMs: number;
  /** A handler still running after this long counts as failed (retry or dead-letter) and frees its slot. */
  handlerTimeoutMs: number;
  /** How long stop() waits for running handlers before handing their items back. */
  shutdownGraceMs: number;
  /** Most items one claim script call hands out. */
  claimBatch: number;
  /** Most items one claim script call promotes (due → ready) or requeues (lost deliveries). */
  promoteBatch: number;
  /**
   * How long after sending a claim its reply is still read, ms (under the Redis command timeout). A claim that
   * reaches Redis later (Redis frozen, the call stuck in a socket buffer) claims nothing, so no item waits out its
   * visibility timeout in a delivery nobody received.
   */
  replyWithinMs: number;
}

interface Running {
  id: string;
  abort: AbortController;
  done: Promise<void>;
  /** Set by stop() when it hands the item back: the delivery then records nothing itself. */
  handedBack: boolean;
}

/** What a delivery's handler is failed with when it runs past `handlerTimeoutMs`. */
export class HandlerTimeoutError extends Error {
  constructor(ms: number) {
    super(`handler still running after ${ms} ms`);
    this.name = 'HandlerTimeoutError';
  }
}

/**
 * One instance's worker for one queue. It wakes on a timer armed for the
 * earliest due time (re-armed by the queue's pub/sub events), and on a
 * jittered fallback poll, so a lost event costs at most one poll interval.
 * Each wake runs the claim script, which also moves due items to ready and
 * reclaims deliveries whose holder went silent.
 */
export class QueueProcessor<T> implements Processor, BackgroundWorker {
  private readonly logger: Logger;
  /** Running deliveries by fencing token (an id replaced while in flight can briefly have two). */
  private readonly running = new Map<number, Running>();
  private stopped = false;
  /** The running tick, if any: stop() waits for it so no claim reply arrives after stop() resolved. */
  private ticking?: Promise<void>;
  private tickAgain = false;
  private wakeAt = Infinity;
  private wakeTimer?: Timer;
  private pollTimer?: Timer;
  /** Redis clock minus local clock, ms, from the last claim: timers are armed on the Redis clock. */
  private clockOffset = 0;
  /** Whether a claim has answered yet (until then the Redis clock is unknown, and a claim sets no reply-by time). */
  private clockKnown = false;
  /** Whether the last claim left ready items behind (claim more when a slot frees up). */
  private readyLeft = false;
  private lastErrorLog = -Infinity;
  /** The earliest due time announced by an event while a claim was on the wire (its reply must not undo it). */
  private eventDueDuringClaim = Infinity;
  /** The crash points of claim → handle → ack (src/platform/core/crash-points.ts): after the claim, and after the handler before its ack. */
  private readonly crashAfterClaim: string;
  private readonly crashBeforeAck: string;

  constructor(
    readonly queue: string,
    private readonly keys: QueueKeys,
    private readonly handler: Handler<T>,
    private readonly settings: ProcessorSettings,
    private readonly store: DelayQueueStore,
    private readonly events: QueueEventBus,
    private readonly metrics: DelayQueueMetrics,
    private readonly clock: Clock = systemClock,
  ) {
    this.logger = new Logger(`DelayQueue:${queue}`);
    this.crashAfterClaim = `delay-queue.${queue}.after-claim`;
    this.crashBeforeAck = `delay-queue.${queue}.before-ack`;
  }

  async start(): Promise<void> {
    this.schedulePoll();
    // Catch-up first: whatever came due while no instance ran is claimed now, oldest first.
    void this.tick();
    await this.events
      .subscribe(this.keys.channel, (m) => this.event(m))
      .catch((err: Error) => {
        this.logger.warn({ err: err.message }, 'subscribe failed; the fallback poll covers until it reconnects');
      });
  }

  /**
   * Stops claiming, lets running handlers finish within the grace period (revocations still reach
   * them meanwhile), then hands the rest back to ready at their due time.
   */
  async stop(): Promise<void> {
    if (this.stopped) return;
    this.stopped = true;
    this.clock.clearTimeout(this.wakeTimer);
    this.clock.clearTimeout(this.pollTimer);
    await this.ticking;
    const all = Promise.all([...this.running.values()].map((r) => r.done));
    let timer: Timer | undefined;
    await Promise.race([all, new Promise((r) => (timer = this.clock.setTimeout(() => r(undefined), this.settings.shutdownGraceMs)))]);
    this.clock.clearTimeout(timer);
    await Promise.all(
      [...this.running].map(async ([token, r]) => {
        r.handedBack = true;
        r.abort.abort(new Error('worker stopping'));
        await this.store.release(this.keys, r.id, token, this.settings.retry.attempts).catch(() => false);
      }),
    );
    await this.events.unsubscribe(this.keys.channel).catch(() => undefined);
  }

  private event(message: string): void {
    if (message.startsWith('due:')) {
      const due = Number(message.slice(4));
      if (!Number.isFinite(due)) return;
      this.eventDueDuringClaim = Math.min(this.eventDueDuringClaim, due);
      if (due < this.wakeAt) this.arm(due);
    } else if (message.startsWith('gone:')) {
      this.running.get(Number(message.slice(5)))?.abort.abort(new Error('item cancelled or replaced'));
    }
  }

  /** Sets the wake-up timer for `due` on the Redis clock. */
  private arm(due: number): void {
    if (this.stopped) return;
    this.clock.clearTimeout(this.wakeTimer);
    this.wakeAt = due;
    const delay = Math.max(0, due - (this.clock.now() + this.clockOffset));
    // Beyond the poll interval the poll will run a claim anyway and re-arm from its answer.
    if (delay > this.settings.pollMs) return;
    this.wakeTimer = this.clock.setTimeout(() => {
      this.wakeAt = Infinity;
      void this.tick();
    }, delay);
  }

  private schedulePoll(): void {
    if (this.stopped) return;
    const ms = this.settings.pollMs * (0.5 + this.clock.random() * 0.5);
    this.pollTimer = this.clock.setTimeout(() => {
      void this.tick();
      this.schedulePoll();
    }, ms);
  }

  /** Claims until nothing more is due or every slot is busy. One tick at a time; a tick asked for meanwhile runs right after. */
  private tick(): Promise<void> {
    if (this.stopped) return Promise.resolve();
    if (this.ticking) {
      this.tickAgain = true;
      return this.ticking;
    }
    this.ticking = this.claimLoop().finally(() => {
      this.ticking = undefined;
      if (this.tickAgain) {
        this.tickAgain = false;
        void this.tick();
      }
    });
    return this.ticking;
  }

  private async claimLoop(): Promise<void> {
    try {
      let more = true;
      while (more && !this.stopped) {
        const want = Math.min(this.settings.claimBatch, this.settings.concurrency - this.running.size);
        const t0 = this.clock.now();
        this.eventDueDuringClaim = Infinity;
        const replyBy = this.clockKnown ? t0 + this.clockOffset + this.settings.replyWithinMs : undefined;
        const r = await this.store.claim(this.keys, want, this.settings.retry.visibilityMs, this.settings.retry.attempts, this.settings.promoteBatch, replyBy);
        const { now, promoted, requeued, died } = r;
        this.clockOffset = now - (t0 + this.clock.now()) / 2;
        this.clockKnown = true;
        if (died > 0) this.metrics.dead.inc({ queue: this.queue }, died);
        for (const d of r.dead) this.buried(d);
        const claimed = r.claimed.length;
        const localAtClaim = this.clock.now();
        if (claimed > 0) crashPoint(this.crashAfterClaim);
        for (const d of r.claimed) this.deliver(d, now, localAtClaim);
        this.readyLeft = r.readyLeft > 0;
        // The reply's next wake-up was computed before any event that arrived while it was on the wire.
        const next = Math.min(r.nextWake ?? Infinity, this.eventDueDuringClaim);
        this.wakeAt = Infinity;
        if (Number.isFinite(next)) this.arm(next);
        // Go round again while a step hit its batch limit, or ready items remain and slots are free.
        more =
          promoted === this.settings.promoteBatch ||
          requeued + died === this.settings.promoteBatch ||
          (this.readyLeft && claimed === want && want > 0 && this.running.size < this.settings.concurrency);
      }
    } catch (err) {
      const now = this.clock.now();
      if (now - this.lastErrorLog > 5000) {
        this.lastErrorLog = now;
        this.logger.warn({ err: (err as Error).message }, 'claim failed; retrying on the next poll');
      }
    }
  }

  private deliver({ id, rawPayload: raw, attempt, dueAt, token }: ClaimedDelivery, claimedAt: number, localAtClaim: number): void {
    const abort = new AbortController();
    const labels = { queue: this.queue };
    this.metrics.fired.inc(labels);
    this.metrics.lateness.observe(labels, Math.max(0, claimedAt - dueAt) / 1000);
    const extend = async (): Promise<boolean> => {
      const ok = await this.store.extend(this.keys, id, token, this.settings.retry.visibilityMs);
      if (!ok) abort.abort(new Error('delivery no longer current'));
      return ok;
    };
    // The heartbeat keeps a live delivery's deadline ahead; it ends with the delivery or its revocation.
    const heartbeat = this.clock.setInterval(() => void extend().catch(() => undefined), this.settings.retry.visibilityMs / 3);
    abort.signal.addEventListener('abort', () => this.clock.clearInterval(heartbeat), { once: true });
    const delivery: Delivery<T> = {
      queue: this.queue,
      id,
      payload: undefined as T,
      attempt,
      token,
      dueAt,
      serverNow: () => claimedAt + Math.max(0, this.clock.now() - localAtClaim),
      signal: abort.signal,
      stillWanted: () => (abort.signal.aborted ? Promise.resolve(false) : extend()),
    };
    const entry: Running = { id, abort, handedBack: false, done: Promise.resolve() };
    entry.done = (async () => {
      let failure: unknown;
      let succeeded = false;
      let timer: Timer | undefined;
      try {
        delivery.payload = JSON.parse(raw) as T;
        const handled = Promise.resolve().then(() => this.handler(delivery));
        handled.catch(() => undefined); // a handler that outlives its timeout may still reject later
        const timedOut = new Promise<never>((_, reject) => {
          timer = this.clock.setTimeout(() => reject(new HandlerTimeoutError(this.settings.handlerTimeoutMs)), this.settings.handlerTimeoutMs);
        });
        await Promise.race([handled, timedOut]);
        succeeded = true;
      } catch (err) {
        failure = err;
      } finally {
        this.clock.clearTimeout(timer);
        this.clock.clearInterval(heartbeat);
      }
      try {
        if (entry.handedBack) return; // stop() gave the item back already
        if (succeeded) {
          crashPoint(this.crashBeforeAck);
          if (await this.retry(() => this.store.ack(this.keys, id, token))) this.metrics.acked.inc(labels);
          return;
        }
        if (failure instanceof HandlerTimeoutError) abort.abort(failure);
        const text = (failure instanceof Error ? `${failure.name}: ${failure.message}` : String(failure)).slice(0, MAX_ERROR_CHARS);
        const delay = backoffDelay(attempt, this.settings.retry.backoff, this.clock.random);
        const outcome = await this.retry(() => this.store.fail(this.keys, id, token, this.settings.retry.attempts, delay, text));
        if (outcome === 'retried') this.metrics.retried.inc(labels);
        if (outcome === 'dead') {
          this.metrics.dead.inc(labels);
          this.buried({ id, attempts: attempt, lastError: text });
        }
      } catch (err) {
        // Redis stayed unreachable: the item stays in flight and is delivered again after its visibility timeout.
        this.logger.warn({ id, attempt, err: (err as Error).message }, 'could not record the outcome; the item will be redelivered');
      } finally {
        this.running.delete(token);
        if (this.readyLeft) void this.tick();
      }
    })();
    this.running.set(token, entry);
  }

  /**
   * An item moved to dead-letter: nothing retries it any more, so it is logged at error, once (only the step that
   * moved it reports it). The line names the queue, id, deliveries and last error, never the payload (it may hold
   * personal data). The way out: GET /admin/delay-queues/{queue}/dead, then POST …/dead/{id}/retry.
   */
  private buried({ id, attempts, lastError }: DiedItem): void {
    this.logger.error(
      { queue: this.queue, id, attempts, lastError },
      'item moved to dead-letter: nothing retries it; see GET /admin/delay-queues/{queue}/dead, retry with POST /admin/delay-queues/{queue}/dead/{id}/retry',
    );
  }

  /** A few quick retries for ack/fail when Redis blips; if all fail the visibility timeout redelivers the item. */
  private async retry<R>(fn: () => Promise<R>): Promise<R> {
    for (let i = 0; ; i++) {
      try {
        return await fn();
      } catch (err) {
        if (i >= 3) throw err;
        await new Promise((r) => this.clock.setTimeout(() => r(undefined), 100 * 2 ** i));
      }
    }
  }
}
