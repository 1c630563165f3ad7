import { Logger } from '@nestjs/common';
import type { RedisService } from '../../platform/redis/redis.service';
import type { ScriptRegistry } from '../../platform/scripts/script-registry.service';
import type { BackgroundWorker } from '../workers/background-workers.service';
import { isRedisUnavailable } from '../../platform/redis/redis-unavailable.error';
import { type Clock, systemClock, type Timer } from '../workers/clock';
import { backoffDelay, type RetryPolicy, type RetryPolicyInput } from '../workers/retry-policy';
import { recordFailure } from './stream.scripts';
import { keySlot, readGroups } from './stream-slots';
import type { PendingSource, StreamsMetrics } from './streams.metrics';

/** One stream a runner reads, and where it records the entries it gives up on (same hash tag: one slot). */
export interface StreamSpec {
  key: string;
  deadLetterKey: string;
}

/** One entry as handed to a handler. */
export interface StreamEntry {
  /** The stream's key. */
  stream: string;
  /** The entry id (unique within its stream). */
  id: string;
  /** The entry's fields as a flat name/value list. */
  fields: string[];
}

export type StreamEntryHandler = (entry: StreamEntry) => Promise<void>;

/** What became of one delivery: see StreamsMetrics.entries. */
export type EntryOutcome = 'acked' | 'failed' | 'dead' | 'skipped';

export interface StreamGroupOptions {
  /** Names the runner in metrics, logs and the worker registry, e.g. `order-events`. */
  name: string;
  /** The streams, each with its dead-letter stream; keys from the key builders. */
  streams: readonly StreamSpec[];
  group: string;
  /** This consumer's name within the group (the instance id). Keep it across restarts to resume its own pending entries at once. */
  consumer: string;
  /** Called once per delivery; the entry is acked (with the others of its batch that succeeded) once it resolves. Should be idempotent: a failed or unacked entry comes again. */
  handler: StreamEntryHandler;
  /** Entries read per stream per read. Default 50. */
  batchSize?: number;
  /**
   * Entries of one stream's batch handled at once. Default 1: one at a time, in stream order. Above 1,
   * entries of one stream may be handled out of order (the handler must not depend on it); a stream's
   * batch is still finished before its next read, and streams are handled in parallel either way.
   */
  concurrency?: number;
  /** How long one blocking read waits for new entries, ms. Default 5000. */
  blockMs?: number;
  /**
   * After a read that brought new entries but fewer than a batch, wait this long before reading again, so that under
   * a steady flow each read (and its XACK) carries a batch instead of an entry or two; an entry arriving after a
   * quiet spell still wakes the blocking read at once. Default READ_PAUSE_MS; 0: read again at once.
   */
  readPauseMs?: number;
  /**
   * The retry policy (src/engines/workers/retry-policy.ts). `visibilityMs`: entries pending this long (their consumer died,
   * or the handler failed) are taken over (the group's claim idle time), default 30000. `attempts`: deliveries of one
   * entry before it is given up, moved to its dead-letter stream and acked, default 20. `backoff`: the n-th retry of a
   * failed entry comes initialMs × factor^(n−1) after the failure, at most maxMs, and never sooner than visibilityMs
   * (default none: every retry after visibilityMs); this consumer holds such an entry (refreshing its idle time) until
   * it is due, then delivers it again itself; if this consumer dies meanwhile, it is taken over after visibilityMs.
   */
  retry?: RetryPolicyInput;
  /** Approximate cap on each dead-letter stream (the newest kept). Default 10000. */
  deadLetterMaxLen?: number;
  /** Where a new group starts: `beginning` (every retained entry, default) or `now`. An existing group keeps its position. */
  startFrom?: 'beginning' | 'now';
  /** Told of every delivery's outcome, after the runner's own metrics (for a feature's own counters). */
  onOutcome?: (outcome: EntryOutcome, entry: StreamEntry) => void;
  /**
   * Drop this runner's metric series once it has stopped. For runners named after an entity that ends (a rain's
   * crediting): their series would otherwise stay in every scrape for the life of the process. Default false.
   */
  forgetMetricsOnStop?: boolean;
}

/** What a runner needs of the rest of the service. */
export interface StreamRunnerDeps {
  redis: RedisService;
  scripts: ScriptRegistry;
  metrics: StreamsMetrics;
  /** Default: the system clock. */
  clock?: Clock;
}

/**
 * The default pause after a partial read. At thousands of events a second it turns about one XREADGROUP and one XACK
 * per event or two into one of each per batch (a reservation's order events read by two groups cost Redis about as
 * much as a third of the reserve script before); it delays an entry of a steady flow by at most this much.
 */
export const READ_PAUSE_MS = 25;

/** A consumer group's retry policy where a caller leaves a field out: no backoff beyond the claim idle time. */
export const STREAM_RETRY: RetryPolicy = { attempts: 20, backoff: { initialMs: 0, maxMs: 0, factor: 2 }, visibilityMs: 30_000 };

type Entry = [id: string, fields: string[] | null];
type ReadReply = Array<[stream: string, entries: Entry[]]> | null;
/** ioredis's XREADGROUP with its arguments as one list (its typed overloads take them one by one); unlike call(), it replies with [stream, entries] pairs. */
type XReadGroup = (...args: Array<string | number>) => Promise<unknown>;
/** ioredis's XCLAIM with its arguments as one list (ids then options). */
type XClaim = (...args: Array<string | number>) => Promise<unknown>;

/** Waits after Redis failed: doubling from the first up to the last, ms. */
const RETRY_BASE_MS = 100;
const RETRY_MAX_MS = 5000;
const ERROR_TEXT_MAX = 500;

const isNoGroup = (err: unknown) => err instanceof Error && err.message.includes('NOGROUP');

/**
 * One consumer of one Redis consumer group over one or more streams, at least once.
 *
 * New entries come from a blocking XREADGROUP on a connection of its own (one per slot on Redis
 * Cluster, where one command cannot read streams of different slots), so an idle group costs one
 * command per block time, not a poll per stream. Each entry is acked once its handler resolves; a
 * failed one stays pending. Every claimIdleMs/2 the runner takes over (XAUTOCLAIM, following the
 * scan's cursor so failing entries cannot hide the ones behind them) whatever has been pending longer
 * than claimIdleMs: a dead consumer's entries and failed ones. A failure on an entry's
 * maxDeliveries-th delivery moves it to its dead-letter stream and acks it, atomically
 * (lua/engines/streams/fail-2.lua). The entries of one read are handled up to `concurrency` at a time per
 * stream (default one, in order), streams in parallel, and the next read waits for all of them; the
 * ones handled are then acked with one XACK per stream. An XACK that fails (Redis away) is retried before the next
 * read, so an entry handled is not handled again by this consumer.
 *
 * A missing group (deleted, or Redis restarted empty) is created again, at the configured start (with
 * `now`, entries added while it was missing are not delivered). While Redis is unreachable the
 * runner waits, backing off, and logs once per outage. stop() closes the blocking connections, so a
 * blocked read does not hold shutdown, and resolves once the handlers in hand have finished.
 */
export class StreamGroupRunner implements BackgroundWorker, PendingSource {
  private readonly logger = new Logger(StreamGroupRunner.name);
  private readonly batchSize: number;
  private readonly concurrency: number;
  private readonly blockMs: number;
  private readonly readPauseMs: number;
  private readonly claimIdleMs: number;
  private readonly claimEveryMs: number;
  private readonly maxDeliveries: number;
  private readonly backoff: RetryPolicy['backoff'];
  private readonly clock: Clock;
  private readonly deadLetterMaxLen: number;
  private readonly deadLetterOf = new Map<string, string>();
  private readonly labels: { runner: string; group: string };
  private readonly connectionNames: string[] = [];
  private readonly wakers = new Set<() => void>();
  private readers: Promise<void>[] = [];
  private stopped = false;
  /** Resolves when stop() is called: a read whose connection cannot settle it (see read()) is not waited for. */
  private readonly stopSignal: Promise<null>;
  private signalStop!: () => void;
  private down = false;
  /** Failed entries held back for their backoff, by stream: entry id → when it is due (local clock). */
  private readonly parked = new Map<string, Map<string, number>>();
  private parkLoop?: Promise<void>;
  /** Entries handled whose XACK failed (Redis away), by stream: acked before the next read, never handled again. */
  private readonly unacked = new Map<string, Array<[StreamEntry, EntryOutcome]>>();

  constructor(
    private readonly options: StreamGroupOptions,
    private readonly deps: StreamRunnerDeps,
  ) {
    this.batchSize = options.batchSize ?? 50;
    this.concurrency = options.concurrency ?? 1;
    if (!Number.isInteger(this.concurrency) || this.concurrency < 1) throw new TypeError(`concurrency must be a positive integer, got ${options.concurrency}`);
    this.blockMs = options.blockMs ?? 5000;
    this.readPauseMs = options.readPauseMs ?? READ_PAUSE_MS;
    this.claimIdleMs = options.retry?.visibilityMs ?? STREAM_RETRY.visibilityMs;
    this.claimEveryMs = Math.max(10, Math.floor(this.claimIdleMs / 2));
    this.maxDeliveries = options.retry?.attempts ?? STREAM_RETRY.attempts;
    this.backoff = { ...STREAM_RETRY.backoff, ...options.retry?.backoff };
    this.clock = deps.clock ?? systemClock;
    this.deadLetterMaxLen = options.deadLetterMaxLen ?? 10_000;
    this.labels = { runner: options.name, group: options.group };
    this.stopSignal = new Promise<null>((resolve) => (this.signalStop = () => resolve(null)));
    for (const s of options.streams) {
      // The dead-letter step is one script over both keys: on Redis Cluster they must share a slot.
      if (keySlot(s.key) !== keySlot(s.deadLetterKey)) throw new TypeError(`dead-letter stream ${s.deadLetterKey} is not in the slot of ${s.key}`);
      this.deadLetterOf.set(s.key, s.deadLetterKey);
    }
  }

  get name(): string {
    return this.options.name;
  }

  get group(): string {
    return this.options.group;
  }

  get consumer(): string {
    return this.options.consumer;
  }

  /** True from start() until stop(). */
  get isRunning(): boolean {
    return this.readers.length > 0 && !this.stopped;
  }

  /**
   * Creates the group on every stream (and the streams) where missing, then starts reading. With Redis unreachable it
   * starts all the same (a service must boot, and answer 503, while Redis is down): the readers wait, backing off,
   * and create the groups once Redis answers (as for a group deleted under them).
   */
  async start(): Promise<void> {
    try {
      await this.createGroups(this.options.streams.map((s) => s.key));
    } catch (err) {
      if (!isRedisUnavailable(err)) throw err;
      this.failed(err as Error);
    }
    const groups = readGroups(this.options.streams, this.deps.redis.isCluster);
    this.readers = groups.map((streams, i) => {
      const connection = `streams:${this.options.name}:${this.options.group}:${this.options.consumer}:${i}`;
      this.connectionNames.push(connection);
      return this.read(
        streams.map((s) => s.key),
        connection,
      );
    });
    this.deps.metrics.track(this);
  }

  async stop(): Promise<void> {
    if (!this.stopped) {
      this.stopped = true;
      this.signalStop();
      this.deps.metrics.untrack(this);
      for (const wake of this.wakers) wake();
      for (const name of this.connectionNames) this.deps.redis.closeBlocking(name);
    }
    await Promise.all(this.readers);
    await this.parkLoop;
    // Best effort: what stays unacked is handed over again after the visibility timeout.
    await this.ackLeftOver().catch(() => undefined);
    // After the last handler has counted: nothing of this runner reports any more.
    if (this.options.forgetMetricsOnStop) this.deps.metrics.forget(this);
  }

  async pending(): Promise<number | undefined> {
    try {
      const counts = await Promise.all(
        this.options.streams.map((s) => this.deps.redis.command((c) => c.xpending(s.key, this.options.group)) as Promise<[number, ...unknown[]]>),
      );
      return counts.reduce((sum, r) => sum + Number(r[0]), 0);
    } catch {
      return undefined;
    }
  }

  /** One reader: the streams of one slot (all of them off a cluster), on one blocking connection. */
  private async read(keys: string[], connection: string): Promise<void> {
    const { group, consumer } = this.options;
    const cursors = new Map<string, string>();
    // Our own pending entries first (a restart under the same consumer name), by id, until none is left.
    let history: string[] | undefined = keys.map(() => '0');
    let nextClaim = 0;
    let failures = 0;
    let groupsMissing = false;
    while (!this.stopped) {
      try {
        if (this.unacked.size > 0) await this.ackLeftOver();
        if (groupsMissing) {
          await this.createGroups(keys);
          groupsMissing = false;
        }
        if (this.clock.now() >= nextClaim) {
          nextClaim = this.clock.now() + this.claimEveryMs;
          await this.claim(keys, cursors);
        }
        if (this.stopped) break;
        // Checked and sent in one turn: stop() cannot close the connection in between and leave this read blocked.
        const conn = this.deps.redis.blocking(connection);
        const ids = history ?? keys.map(() => '>');
        // Blocks no longer than until the next takeover is due; the history is read without blocking.
        // Whole ms: the clock is monotonic and fractional, and BLOCK takes an integer.
        const block = history ? [] : ['BLOCK', Math.max(1, Math.ceil(Math.min(this.blockMs, nextClaim - this.clock.now())))];
        const read = (conn.xreadgroup as XReadGroup).apply(conn, ['GROUP', group, consumer, 'COUNT', this.batchSize, ...block, 'STREAMS', ...keys, ...ids]);
        // stop() closes the connection, which fails a read in flight; but a read queued while the connection was
        // reconnecting is never settled by ioredis when it is closed then. Stopping does not wait for it.
        read.catch(() => undefined);
        const reply = (await Promise.race([read, this.stopSignal])) as ReadReply;
        if (this.stopped) break;
        if (history) {
          const last = new Map((reply ?? []).filter(([, e]) => e.length > 0).map(([s, e]) => [s, e[e.length - 1][0]]));
          history = last.size === 0 ? undefined : keys.map((k, i) => last.get(k) ?? history![i]);
        }
        if (reply) await this.handleAll(reply);
        // An ack that failed is part of the outage: it is retried (and logged as over) once it lands.
        if (this.unacked.size === 0) this.recovered();
        failures = 0;
        // A partial batch of new entries: let the next ones gather before reading again.
        const fresh = ids[0] === '>' ? (reply ?? []).reduce((n, [, e]) => Math.max(n, e.length), 0) : 0;
        if (fresh > 0 && fresh < this.batchSize && this.readPauseMs > 0) await this.sleep(this.readPauseMs);
      } catch (err) {
        if (this.stopped) break;
        failures++;
        // A read whose reply was lost with the connection may have delivered entries to us: read our own pending ones first.
        history = keys.map(() => '0');
        if (isNoGroup(err)) {
          groupsMissing = true;
          if (failures === 1) this.logger.warn({ runner: this.options.name, group, err: (err as Error).message }, 'consumer group missing; creating it again');
        } else {
          this.failed(err as Error);
        }
        await this.sleep(backoffDelay(failures, { initialMs: RETRY_BASE_MS, maxMs: RETRY_MAX_MS }, this.clock.random));
      }
    }
  }

  /** Takes over (and handles) what has been pending longer than claimIdleMs, following each stream's scan cursor. */
  private async claim(keys: string[], cursors: Map<string, string>): Promise<void> {
    const { group, consumer } = this.options;
    const claimed = await Promise.all(
      keys.map(async (key): Promise<[string, Entry[]]> => {
        const r = (await this.deps.redis.command((c) =>
          c.xautoclaim(key, group, consumer, this.claimIdleMs, cursors.get(key) ?? '0-0', 'COUNT', this.batchSize),
        )) as [string, Array<Entry | null>];
        cursors.set(key, r[0]);
        return [key, r[1].filter((e): e is Entry => e !== null)];
      }),
    );
    const taken = claimed.reduce((n, [, e]) => n + e.length, 0);
    if (taken === 0) return;
    this.deps.metrics.claimed.inc(this.labels, taken);
    await this.handleAll(claimed);
  }

  /** Handles a read's entries: up to `concurrency` at a time per stream, streams in parallel; resolves once all are done and acked. */
  private async handleAll(reply: Array<[string, Entry[]]>): Promise<void> {
    // allSettled: every stream's handlers finish before the next read, whatever another stream did.
    const results = await Promise.allSettled(reply.map(([stream, entries]) => this.handleStream(stream, entries)));
    for (const r of results)
      if (r.status === 'rejected')
        this.logger.warn({ runner: this.options.name, group: this.options.group, err: (r.reason as Error).message }, 'handling stream entries failed');
  }

  /**
   * One stream's entries of one read, up to `concurrency` at a time (with one, in order), then one XACK for
   * every entry whose handler resolved. Failed entries were recorded as they failed and stay pending (or
   * were dead-lettered). After stop() no further entry is started; the ones handled are still acked.
   */
  private async handleStream(stream: string, all: Entry[]): Promise<void> {
    // Entries held back for their backoff (a re-read of our own pending ones brings them too) wait for their turn.
    const parked = this.parked.get(stream);
    const entries = parked ? all.filter(([id]) => !parked.has(id)) : all;
    const handled: Array<[StreamEntry, EntryOutcome]> = [];
    let next = 0;
    const work = async (): Promise<void> => {
      while (next < entries.length && !this.stopped) {
        const [id, fields] = entries[next++];
        const entry = { stream, id, fields: fields ?? [] };
        const outcome = await this.handleOne(entry, fields === null);
        if (outcome) handled.push([entry, outcome]);
      }
    };
    const workers = await Promise.allSettled(Array.from({ length: Math.min(this.concurrency, entries.length) }, work));
    if (handled.length > 0) await this.ack(stream, handled);
    const failed = workers.find((w): w is PromiseRejectedResult => w.status === 'rejected');
    if (failed) throw failed.reason;
  }

  /** One XACK for the entries handled; when it fails they wait in `unacked` for the next attempt (before the next read). */
  private async ack(stream: string, handled: Array<[StreamEntry, EntryOutcome]>): Promise<void> {
    try {
      await this.deps.redis.command((c) => c.xack(stream, this.options.group, ...handled.map(([e]) => e.id)));
    } catch (err) {
      this.unacked.set(stream, [...(this.unacked.get(stream) ?? []), ...handled]);
      throw err;
    }
    for (const [entry, outcome] of handled) this.outcome(outcome, entry);
  }

  /** Acks what failed XACKs left; throws (keeping the rest) while Redis is still away. */
  private async ackLeftOver(): Promise<void> {
    for (const [stream, handled] of [...this.unacked]) {
      this.unacked.delete(stream);
      await this.ack(stream, handled);
    }
  }

  /** Runs the handler on one entry: `acked`/`skipped` when it is to be acked, undefined when it failed (already recorded). */
  private async handleOne(entry: StreamEntry, gone: boolean): Promise<'acked' | 'skipped' | undefined> {
    // An entry trimmed away while pending comes back without fields: nothing to hand over, only to ack.
    if (gone) return 'skipped';
    const done = this.deps.metrics.handlerSeconds.startTimer(this.labels);
    try {
      await this.options.handler(entry);
    } catch (err) {
      done();
      await this.handlerFailed(entry, err as Error).catch((e: Error) =>
        this.logger.warn(
          { runner: this.options.name, group: this.options.group, stream: entry.stream, id: entry.id, err: e.message },
          'could not record a failed stream entry; it stays pending',
        ),
      );
      return undefined;
    }
    done();
    return 'acked';
  }

  /** The handler threw: the entry stays pending (taken over again after claimIdleMs) unless that was its last delivery. */
  private async handlerFailed(entry: StreamEntry, err: Error): Promise<void> {
    const { name, group, consumer } = this.options;
    this.outcome('failed', entry);
    const deadLetterStream = this.deadLetterOf.get(entry.stream)!;
    const { deadLettered, deliveries } = await recordFailure(this.deps.scripts, {
      stream: entry.stream,
      deadLetterStream,
      group,
      consumer,
      id: entry.id,
      maxDeliveries: this.maxDeliveries,
      deadLetterMaxLen: this.deadLetterMaxLen,
      error: err.message.slice(0, ERROR_TEXT_MAX),
    });
    const log = { runner: name, group, stream: entry.stream, id: entry.id, deliveries, err: err.message };
    if (!deadLettered) {
      this.logger.warn(log, 'stream entry handler failed; the entry stays pending');
      if (deliveries > 0) this.park(entry.stream, entry.id, deliveries);
      return;
    }
    this.outcome('dead', entry);
    this.logger.error(log, `stream entry given up after ${deliveries} deliveries; recorded on ${deadLetterStream}`);
  }

  /** Holds a failed entry back until its backoff after `deliveries` deliveries has passed (when that is longer than claimIdleMs). */
  private park(stream: string, id: string, deliveries: number): void {
    if (this.stopped) return;
    const waitMs = backoffDelay(deliveries, this.backoff, null); // no jitter: initialMs × factor^(n−1), capped
    if (waitMs <= this.claimIdleMs) return; // the takeover brings it back after claimIdleMs
    let ids = this.parked.get(stream);
    if (!ids) this.parked.set(stream, (ids = new Map()));
    ids.set(id, this.clock.now() + waitMs);
    this.parkLoop ??= this.runParked().finally(() => (this.parkLoop = undefined));
  }

  /**
   * While entries are held back, every claimEveryMs (the first time at once): keeps the ones still this consumer's
   * (XCLAIM JUSTID resets their idle time without counting a delivery, so the takeover leaves them alone) and delivers
   * the due ones again (XCLAIM), without waiting for their handlers. An entry acked, or taken over by another consumer
   * meanwhile (XPENDING names its owner), is dropped: it is never taken back. On stop, or if Redis fails, held entries
   * stay pending for the takeover.
   */
  private async runParked(): Promise<void> {
    const { group, consumer } = this.options;
    const retries = new Set<Promise<void>>();
    // Runs on while retries are under way too: a retry that fails again parks its entry for this loop.
    while (!this.stopped && (this.parked.size > 0 || retries.size > 0)) {
      const now = this.clock.now();
      for (const [stream, ids] of [...this.parked]) {
        const due = [...ids].filter(([, at]) => at <= now).map(([id]) => id);
        for (const id of due) ids.delete(id);
        try {
          const held = [...ids.keys()];
          const mine = await this.ownedBy(stream, [...held, ...due], consumer);
          for (const id of held) if (!mine.has(id)) ids.delete(id);
          const keep = held.filter((id) => mine.has(id));
          if (keep.length > 0) await this.deps.redis.command((c) => (c.xclaim as XClaim).apply(c, [stream, group, consumer, 0, ...keep, 'JUSTID']));
          const again = due.filter((id) => mine.has(id));
          if (again.length > 0) {
            const entries = (await this.deps.redis.command((c) => (c.xclaim as XClaim).apply(c, [stream, group, consumer, 0, ...again]))) as Entry[];
            const run: Promise<void> = this.handleStream(stream, entries)
              .catch((err: Error) => this.logger.warn({ runner: this.options.name, group, stream, err: err.message }, 'retrying held-back entries failed'))
              .finally(() => retries.delete(run));
            retries.add(run);
          }
        } catch (err) {
          this.logger.warn({ runner: this.options.name, group, stream, err: (err as Error).message }, 'keeping held-back entries failed; they stay pending');
        }
        if (ids.size === 0) this.parked.delete(stream);
      }
      await this.sleep(this.claimEveryMs);
    }
    await Promise.all(retries);
  }

  /** Which of `ids` are pending for `consumer` now (one XPENDING per id, sent together). */
  private async ownedBy(stream: string, ids: string[], consumer: string): Promise<Set<string>> {
    const replies = await Promise.all(
      ids.map((id) => this.deps.redis.command((c) => c.xpending(stream, this.options.group, id, id, 1, consumer)) as Promise<unknown[]>),
    );
    return new Set(ids.filter((_, i) => replies[i].length > 0));
  }

  private outcome(outcome: EntryOutcome, entry: StreamEntry): void {
    this.deps.metrics.entries.inc({ ...this.labels, outcome });
    this.options.onOutcome?.(outcome, entry);
  }

  /** Creates the group where missing (MKSTREAM: and the stream), at the configured start; an existing group is left as it is. */
  private async createGroups(keys: string[]): Promise<void> {
    const start = this.options.startFrom === 'now' ? '$' : '0';
    await Promise.all(
      keys.map((key) =>
        this.deps.redis
          .command((c) => c.xgroup('CREATE', key, this.options.group, start, 'MKSTREAM'))
          .catch((err: Error) => {
            if (!err.message.includes('BUSYGROUP')) throw err;
          }),
      ),
    );
  }

  /** A read or takeover failed: logged once per outage (recovered() logs its end). */
  private failed(err: Error): void {
    if (this.down) return;
    this.down = true;
    this.logger.warn({ runner: this.options.name, group: this.options.group, err: err.message }, 'reading the streams failed; retrying with backoff');
  }

  private recovered(): void {
    if (!this.down) return;
    this.down = false;
    this.logger.log({ runner: this.options.name, group: this.options.group }, 'reading the streams again');
  }

  private sleep(ms: number): Promise<void> {
    if (this.stopped) return Promise.resolve();
    return new Promise((resolve) => {
      const wake = () => {
        this.clock.clearTimeout(timer);
        this.wakers.delete(wake);
        resolve();
      };
      const timer: Timer = this.clock.setTimeout(wake, ms);
      this.wakers.add(wake);
    });
  }
}
