import { Injectable } from '@nestjs/common';
import { KeyBuilder } from '../../platform/redis/key-builder';
import { RedisService } from '../../platform/redis/redis.service';
import { ScriptRegistry } from '../../platform/scripts/script-registry.service';
import { checkQueueName, QueueKeys, queueKeys, registryKey } from './delay-queue.keys';
import type { DeadLetter, ItemState } from './delay-queue.types';

/*
 * Result convention of every lua/engines/delay-queue script: the one `ScriptRegistry.run()` decodes for
 * any script, and the one the codebase's style asks of all of them.
 *
 * - An error is a negative integer as the whole reply, a `ScriptCode` (here NOT_FOUND -1,
 *   INVALID_STATE -5, INVALID_ARGUMENT -6). `run()` turns it into its typed `ScriptError` before
 *   anything here sees it, so the methods below only decode successes.
 * - A success is a non-negative integer or an array. Where an item's place matters, an integer
 *   is its state code: 0 absent, 1 pending, 2 ready, 3 in flight, 4 dead. Whether a delivery was
 *   still the live one is 1 / 0 (ack, extend) or fail's outcome code (0 when it was not).
 *   Times are integer ms on the Redis clock; a time that may be absent is a decimal string, ''
 *   for none.
 * - No delay-queue script answers with a status string or a `{0, ms}` "try again" tuple.
 *
 * Every queue script but stats takes the queue's nine keys (`QueueKeys.keys`), in that order.
 */

const STATES: ItemState[] = ['absent', 'pending', 'ready', 'in-flight', 'dead'];
/** Fields per claimed delivery in a claim reply, after its six header fields. */
const CLAIM_HEADER = 6;
const CLAIMED_FIELDS = 5;
/** Fields per item a claim moved to dead-letter, at the end of its reply: id, deliveries, last error. */
const DIED_FIELDS = 3;
/** Fields per dead letter in a dead-page reply, after the total. */
const DEAD_FIELDS = 5;

/** Most acks one ack script call carries: about a tenth of a millisecond inside Redis, so other clients wait little. */
export const ACK_BATCH = 100;

interface AckBatch {
  /** id, token, id, token, ... */
  pairs: Array<string | number>;
  waiters: Array<{ resolve: (acked: boolean) => void; reject: (err: unknown) => void }>;
}

/** Where an item is kept: `'delay'` counts from the Redis clock, `'at'` is epoch ms. */
export type TimeMode = 'delay' | 'at';

export interface ScheduleReply {
  /** False when `ifExists: 'keep'` found an entry and left it. */
  written: boolean;
  /** Where an existing entry was ('absent' for a new id). */
  existed: ItemState;
  dueAt: number;
}

export interface StoredItem {
  state: Exclude<ItemState, 'absent'>;
  /** Due time (pending, ready), visibility deadline (in flight) or time of death (dead). */
  at: number;
  /** The payload as stored (JSON). */
  rawPayload: string;
  attempts: number;
  lastError?: string;
}

export interface StatsReply {
  /** The Redis clock, ms. */
  now: number;
  pending: number;
  ready: number;
  inFlight: number;
  dead: number;
  pendingHead: number | null;
  readyHead: number | null;
}

/** One delivery handed out by a claim. */
export interface ClaimedDelivery {
  id: string;
  /** The payload as stored (JSON): the processor parses it, so a bad one fails that delivery alone. */
  rawPayload: string;
  attempt: number;
  dueAt: number;
  token: number;
}

export interface ClaimReply {
  /** The Redis clock at the claim, ms. */
  now: number;
  /** The earliest pending due time or in-flight deadline, null when neither exists. */
  nextWake: number | null;
  /** Ready items left unclaimed. */
  readyLeft: number;
  promoted: number;
  requeued: number;
  died: number;
  claimed: ClaimedDelivery[];
  /** The items this claim moved to dead-letter (their holder went silent on their last delivery). */
  dead: DiedItem[];
}

/** An item that a step moved to dead-letter: what its error log line names (never its payload). */
export interface DiedItem {
  id: string;
  attempts: number;
  lastError: string;
}

/** How fail ended a delivery: a retry scheduled, dead-lettered, or nothing (no longer the live delivery). */
export type FailOutcome = 'retried' | 'dead' | 'stale';

/**
 * The one typed wrapper per lua/engines/delay-queue script: keys, script calls and reply decoding live
 * here; the service and the processors hold behaviour only.
 */
@Injectable()
export class DelayQueueStore {
  private readonly keyCache = new Map<string, QueueKeys>();
  /** Acks waiting for the end of this event-loop turn, by queue (its cached keys). */
  private readonly acks = new Map<QueueKeys, AckBatch>();

  constructor(
    private readonly scripts: ScriptRegistry,
    private readonly redis: RedisService,
    private readonly keyBuilder: KeyBuilder,
  ) {}

  /** The keys and event channel of `queue` (its name checked: a 400 naming `queue` otherwise). */
  keys(queue: string): QueueKeys {
    let k = this.keyCache.get(queue);
    if (!k) {
      k = queueKeys(this.keyBuilder, checkQueueName(queue));
      if (this.keyCache.size < 10_000) this.keyCache.set(queue, k);
    }
    return k;
  }

  async schedule(k: QueueKeys, id: string, mode: TimeMode, value: number, rawPayload: string, ifExists: 'replace' | 'keep'): Promise<ScheduleReply> {
    const r = await this.scripts.run<[number, number, string]>('delay-queue/schedule', k.keys, [id, mode, value, rawPayload, ifExists, k.channel]);
    return { written: r[0] === 1, existed: STATES[r[1]], dueAt: Number(r[2]) };
  }

  /** Where the item was (now gone) and the deliveries it had. */
  async cancel(k: QueueKeys, id: string): Promise<{ state: ItemState; attempts: number }> {
    const [code, attempts] = await this.scripts.run<[number, number]>('delay-queue/cancel', k.keys, [id, k.channel]);
    return { state: STATES[code], attempts };
  }

  /** The new due time. ScriptNotFoundError when absent, ScriptInvalidStateError when in flight or dead. */
  async reschedule(k: QueueKeys, id: string, mode: TimeMode, value: number): Promise<number> {
    return Number(await this.scripts.run<number>('delay-queue/reschedule', k.keys, [id, mode, value, k.channel]));
  }

  async get(k: QueueKeys, id: string): Promise<StoredItem | null> {
    const r = await this.scripts.run<[number, string, string, string, string]>('delay-queue/get', k.keys, [id]);
    if (r[0] === 0) return null;
    return {
      state: STATES[r[0]] as StoredItem['state'],
      at: Number(r[1]),
      rawPayload: r[2],
      attempts: Number(r[3]),
      ...(r[4] ? { lastError: r[4] } : {}),
    };
  }

  async stats(k: QueueKeys): Promise<StatsReply> {
    const r = await this.scripts.run<[number, number, number, number, number, string, string]>('delay-queue/stats', k.stateKeys);
    return {
      now: Number(r[0]),
      pending: r[1],
      ready: r[2],
      inFlight: r[3],
      dead: r[4],
      pendingHead: r[5] === '' ? null : Number(r[5]),
      readyHead: r[6] === '' ? null : Number(r[6]),
    };
  }

  /** One page of dead letters, newest first, and how many there are in all. */
  async deadPage<T>(k: QueueKeys, offset: number, limit: number): Promise<{ total: number; items: DeadLetter<T>[] }> {
    const r = await this.scripts.run<Array<string | number>>('delay-queue/dead-page', k.keys, [offset, limit]);
    const items: DeadLetter<T>[] = [];
    for (let i = 1; i < r.length; i += DEAD_FIELDS) {
      items.push({
        id: String(r[i]),
        payload: JSON.parse(String(r[i + 1]) || 'null') as T,
        attempts: Number(r[i + 2]),
        lastError: String(r[i + 3]),
        diedAt: Number(r[i + 4]),
      });
    }
    return { total: Number(r[0]), items };
  }

  /** The new due time. ScriptNotFoundError when the id is not a dead letter. */
  async retryDead(k: QueueKeys, id: string): Promise<number> {
    return Number(await this.scripts.run<number>('delay-queue/retry-dead', k.keys, [id, k.channel]));
  }

  /**
   * One worker step: reclaims lost deliveries, promotes due items, claims up to `want` (see claim-9.lua). `replyBy`
   * (Redis clock, ms): when the caller stops waiting for the reply; a call that runs later claims nothing.
   */
  async claim(k: QueueKeys, want: number, visibilityTimeoutMs: number, maxAttempts: number, batch: number, replyBy?: number): Promise<ClaimReply> {
    const r = await this.scripts.run<Array<string | number>>('delay-queue/claim', k.keys, [
      want,
      visibilityTimeoutMs,
      maxAttempts,
      batch,
      k.channel,
      replyBy === undefined ? '' : Math.floor(replyBy),
      '1',
    ]);
    const died = Number(r[5]);
    const deadFrom = r.length - died * DIED_FIELDS;
    const claimed: ClaimedDelivery[] = [];
    for (let i = CLAIM_HEADER; i < deadFrom; i += CLAIMED_FIELDS) {
      claimed.push({ id: String(r[i]), rawPayload: String(r[i + 1]), attempt: Number(r[i + 2]), dueAt: Number(r[i + 3]), token: Number(r[i + 4]) });
    }
    const dead: DiedItem[] = [];
    for (let i = deadFrom; i < r.length; i += DIED_FIELDS) dead.push({ id: String(r[i]), attempts: Number(r[i + 1]), lastError: String(r[i + 2]) });
    return {
      now: Number(r[0]),
      nextWake: r[1] === '' ? null : Number(r[1]),
      readyLeft: Number(r[2]),
      promoted: Number(r[3]),
      requeued: Number(r[4]),
      died,
      claimed,
      dead,
    };
  }

  /** True when the delivery is still the live one (its deadline pushed to now + `visibilityTimeoutMs`). */
  async extend(k: QueueKeys, id: string, token: number, visibilityTimeoutMs: number): Promise<boolean> {
    return (await this.scripts.run<number>('delay-queue/extend', k.keys, [id, token, visibilityTimeoutMs])) === 1;
  }

  /** True when the delivery was the live one and the item is now gone. */
  /**
   * Acknowledges a delivery; true when it was still the live one. Acks of one queue asked for in the same
   * event-loop turn go to Redis as one script call (at most ACK_BATCH pairs each), so a burst of finished
   * handlers costs one call, not one each; each caller still gets its own answer, or the call's error.
   */
  ack(k: QueueKeys, id: string, token: number): Promise<boolean> {
    let batch = this.acks.get(k);
    if (!batch || batch.pairs.length >= ACK_BATCH) {
      batch = { pairs: [], waiters: [] };
      this.acks.set(k, batch);
      const taken = batch;
      setImmediate(() => void this.flushAcks(k, taken));
    }
    const open = batch;
    open.pairs.push(id, token);
    return new Promise<boolean>((resolve, reject) => open.waiters.push({ resolve, reject }));
  }

  private async flushAcks(k: QueueKeys, batch: AckBatch): Promise<void> {
    if (this.acks.get(k) === batch) this.acks.delete(k);
    try {
      const acked = await this.scripts.run<number[]>('delay-queue/ack', k.keys, batch.pairs);
      batch.waiters.forEach((w, i) => w.resolve(acked[i] === 1));
    } catch (err) {
      for (const w of batch.waiters) w.reject(err);
    }
  }

  /** Records a failed delivery: a retry after `retryDelayMs`, or dead once it had `maxAttempts` deliveries. */
  async fail(k: QueueKeys, id: string, token: number, maxAttempts: number, retryDelayMs: number, errorText: string): Promise<FailOutcome> {
    const r = await this.scripts.run<number>('delay-queue/fail', k.keys, [id, token, maxAttempts, retryDelayMs, errorText, 'fail', k.channel]);
    return r === 1 ? 'retried' : r === 2 ? 'dead' : 'stale';
  }

  /** Hands a delivery back to ready at its due time (the delivery still counts). True when it was the live one. */
  async release(k: QueueKeys, id: string, token: number, maxAttempts: number): Promise<boolean> {
    const r = await this.scripts.run<number>('delay-queue/fail', k.keys, [id, token, maxAttempts, 0, 'released at shutdown', 'release', k.channel]);
    return r === 3;
  }

  /** Adds `queue` to the shared registry of queue names. */
  async register(queue: string): Promise<void> {
    await this.redis.command((c) => c.sadd(registryKey(this.keyBuilder), queue));
  }

  async isRegistered(queue: string): Promise<boolean> {
    return (await this.redis.command((c) => c.sismember(registryKey(this.keyBuilder), queue))) === 1;
  }

  /** Every name in the shared registry, unsorted. */
  async registered(): Promise<string[]> {
    return this.redis.command((c) => c.smembers(registryKey(this.keyBuilder)));
  }
}
