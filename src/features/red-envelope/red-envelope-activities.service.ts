import { Injectable, Logger } from '@nestjs/common';
import { createHash, randomBytes } from 'node:crypto';
import { DelayQueueService } from '../../engines/delay-queue/delay-queue.service';
import type { Delivery } from '../../engines/delay-queue/delay-queue.types';
import { crashPoint } from '../../platform/core/crash-points';
import { DomainError } from '../../platform/core/domain.error';
import { LockService } from '../../engines/locks/lock.service';
import { WalletService, type WalletEntry } from '../wallet';
import { configured, DelayQueueHandler, PeriodicJob } from '../../engines/workers/worker-declarations';
import { checkTiming, memoOf } from './red-envelope-activity.command';
import { CreditingService } from './crediting.service';
import { DEAD_LETTERED, RainStalls } from './rain-stalls';
import { SPREAD_TAGS } from '../../platform/redis/slot-tags';
import { envelopeId } from './red-envelope.keys';
import type { CreateActivityCommand } from './red-envelope.commands';
import { RedEnvelopeConfig } from './red-envelope.config';
import { RedEnvelopeConflictError, RedEnvelopeNotFoundError } from './red-envelope.errors';
import { RedEnvelopeStore } from './red-envelope.store';
import type { ActivityRecord, ActivityState, PoolStats, Stall } from './red-envelope.types';
import { distribution, splitAmounts, verifySplit } from './split';

/** The activities' jobs: `advance:<id>` (fund and load, resumed after a crash), `end:<id>` (end, refund, settle). */
export const JOBS_QUEUE = 'red-envelope-jobs';
const LOAD_LOCK = { policy: 'red-envelope-load' } as const;
/** Envelopes written per staging command. */
const STAGE_BATCH = 10_000;
/** A job that failed this many times in a row (for a cause that is not a refusal) shows its rain as stalled. */
const STALL_AFTER_ATTEMPTS = 5;
/** How long a repeated create waits for the first one's funding to end, ms. */
const FUNDING_WAIT_MS = 3000;
/** Activity ids read from the index at a time when looking for rains to credit. */
const RESUME_PAGE = 1000;
/** Most settled rains one instance remembers (past it, it starts again: they are only read once more). */
const MAX_SETTLED_REMEMBERED = 100_000;
/** A rain found settled is read again after this long (its id may be used again once its keys are gone), ms. */
const SETTLED_RECHECK_MS = 10 * 60_000;

export interface Reconciliation {
  total: number;
  count: number;
  grabbed: { count: number; amount: number };
  credited: { count: number; amount: number };
  pending: { count: number; amount: number };
  dead: { count: number; amount: number };
  left: { count: number; amount: number };
  refunded: { count: number; amount: number };
  /** Funded (the sponsor debited) but not yet in an armed sub-pool: the rain is loading. */
  loading: { count: number; amount: number };
  /**
   * What the sponsor's ledger shows: `funded`, the debit of kind funding (reference `red-envelope:<id>`), and
   * `refunded`, the credit of kind refund (`red-envelope:<id>:leftover`); refunded − sponsor.refunded is on its way back.
   */
  sponsor: { funded: number; refunded: number };
  /**
   * total = grabbed + left + refunded + loading, and grabbed = credited + pending + dead; once every sub-pool is armed,
   * nothing is loading; past FUNDING the sponsor's ledger holds the funding of the total; the refund entry never holds
   * more than was drained, and once SETTLED exactly that. A credit counts only once its wallet entry (kind
   * red-envelope, the envelope's amount) is there: the crediting checks it before moving the envelope to credited.
   */
  balanced: boolean;
}

/**
 * Ops' side of the rain. Creating an activity debits the sponsor's wallet (reference = the activity id, so a retry
 * never debits twice), then preloads the pre-split envelopes in the background (202): each sub-pool is staged and
 * armed only when complete, so nothing half-loaded is ever grabbed. A job on the delay queue takes a crashed
 * create or load up again (every step is idempotent); another, at the end, refunds what is left to the sponsor and
 * settles the activity once every grab is credited.
 */
@Injectable()
export class RedEnvelopeActivities {
  private readonly logger = new Logger(RedEnvelopeActivities.name);
  /** Rains found SETTLED (final), with when: the periodic look for rains to credit does not read them again for a while. */
  private readonly settled = new Map<string, number>();

  constructor(
    private readonly store: RedEnvelopeStore,
    private readonly wallets: WalletService,
    private readonly queue: DelayQueueService,
    private readonly locks: LockService,
    private readonly crediting: CreditingService,
    private readonly config: RedEnvelopeConfig,
    private readonly stalls: RainStalls,
  ) {}

  /**
   * Starts crediting every rain of the retention that is READY or ENDED and not credited here yet: at boot, and then
   * every RED_ENVELOPE_CREDIT_RETRY_MS, so a rain loaded by another instance after this one booted is credited here
   * too, even if no grab of it ever comes to this instance (otherwise, once the instances that credit it die, its
   * grabs would wait for the end job). Settled rains are remembered and read again only every SETTLED_RECHECK_MS.
   * Crediting runs on every instance for every activity not yet settled. At boot it is not awaited: the service boots
   * (and answers 503) while Redis is down, and a failed look is tried again, backing off, until Redis answers.
   */
  @PeriodicJob({
    name: 'red-envelope:resume-crediting',
    everyMs: configured('RED_ENVELOPE_CREDIT_RETRY_MS', (get) => get(RedEnvelopeConfig).creditRetryMs),
    runAtStart: true,
    backoff: { initialMs: 250, maxMs: 10_000 },
  })
  async resumeCrediting(signal?: AbortSignal): Promise<void> {
    // Every activity of the retention, a page at a time (there can be more than a page of them).
    const from = Date.now() - this.config.liveRetentionMs;
    for (let offset = 0; ; offset += RESUME_PAGE) {
      const ids = await this.store.activityIds(from, RESUME_PAGE, offset);
      for (const id of ids) {
        if (this.crediting.isRunning(id) || Date.now() - (this.settled.get(id) ?? -Infinity) < SETTLED_RECHECK_MS) continue;
        const a = await this.store.activity(id);
        if (a?.state === 'SETTLED') this.rememberSettled(id);
        else if (a && (a.state === 'READY' || a.state === 'ENDED') && !signal?.aborted) await this.crediting.start(a);
      }
      if (ids.length < RESUME_PAGE || signal?.aborted) break;
    }
  }

  private rememberSettled(id: string): void {
    if (this.settled.size >= MAX_SETTLED_REMEMBERED) this.settled.clear();
    this.settled.set(id, Date.now());
  }

  /** Creates (funds, then loads in the background) the activity once; the same command again answers its state. */
  async create(cmd: CreateActivityCommand): Promise<{ activity: ActivityRecord; created: boolean }> {
    const fingerprint = createHash('sha256').update(JSON.stringify(cmd)).digest('hex');
    let existing = await this.store.activity(cmd.activityId);
    // The rules that depend on the time hold for a new rain only: the same create after the window answers the rain.
    if (!existing) checkTiming(cmd);
    if (existing) {
      if (existing.fingerprint !== fingerprint)
        throw new RedEnvelopeConflictError('ACTIVITY_EXISTS', `Activity ${cmd.activityId} exists with another configuration`);
      if (existing.state === 'FUNDING') {
        // Another request is funding it: its outcome is this request's. Refused funds delete the record, and then
        // this request is a new attempt (answered 409 the same way, or creating it if the money has come since).
        existing = await this.afterFunding(cmd.activityId);
        if (!existing) return this.create(cmd);
      }
      if (existing.state === 'FUNDING' || existing.state === 'LOADING') void this.advance(existing.activityId).catch(() => undefined);
      return { activity: existing, created: false };
    }
    // Envelope ids and the funding and refund references are made of the activity id: never reused, so that an
    // earlier rain's wallet entries can never stand for a new one's.
    if (await this.store.wasUsed(cmd.activityId)) {
      // The index entry is written just after the record: a record there now is a concurrent create of this id.
      if (await this.store.activity(cmd.activityId)) return this.create(cmd);
      throw new RedEnvelopeConflictError('ACTIVITY_EXISTS', `Activity id ${cmd.activityId} was used by an earlier rain; ids are never reused`);
    }
    const now = await this.store.now();
    const a: ActivityRecord = { ...cmd, tags: SPREAD_TAGS, seed: randomBytes(16).toString('hex'), fingerprint, state: 'FUNDING', loaded: 0, createdAt: now };
    // The job first: a crash after any later step is taken up by it.
    await this.queue.schedule(
      JOBS_QUEUE,
      `advance:${a.activityId}`,
      { delayMs: this.config.resumeAfterMs },
      { activityId: a.activityId },
      { ifExists: 'keep' },
    );
    if (!(await this.store.saveActivity(a, this.expireAt(a), true))) return this.create(cmd);
    crashPoint('red-envelope.create.after-record');
    try {
      await this.fund(a);
    } catch (err) {
      if (err instanceof DomainError) {
        // The wallet refused the debit (too little, or its reference taken with other terms): nothing was debited, so
        // nothing is created, and the refusal is the answer (documented on the endpoint).
        await this.store.deleteActivity(a.activityId);
        await this.queue.cancel(JOBS_QUEUE, `advance:${a.activityId}`).catch(() => undefined);
      }
      throw err;
    }
    crashPoint('red-envelope.create.after-funding');
    const loading = { ...a, state: 'LOADING' as const };
    await this.store.saveActivity(loading, this.expireAt(a));
    void this.advance(a.activityId).catch((err: Error) =>
      this.logger.warn({ activityId: a.activityId, err: err.message }, 'preload failed; its job takes it up again'),
    );
    return { activity: loading, created: true };
  }

  /** The activity once it has left FUNDING (null: deleted, its funds refused), or still FUNDING after FUNDING_WAIT_MS (a crashed create: its job takes it up). */
  private async afterFunding(activityId: string): Promise<ActivityRecord | null> {
    const deadline = Date.now() + FUNDING_WAIT_MS;
    for (;;) {
      const a = await this.store.activity(activityId);
      if (!a || a.state !== 'FUNDING' || Date.now() >= deadline) return a;
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
  }

  async mustRead(activityId: string): Promise<ActivityRecord> {
    const a = await this.store.activity(activityId);
    if (!a) throw new RedEnvelopeNotFoundError();
    return a;
  }

  /** The state as shown: READY inside the window is OPEN, and after it ENDED (grabs stop at endsAt, whenever the end job runs). */
  stateOf(a: ActivityRecord, now = Date.now()): ActivityState {
    if (a.state !== 'READY' || now < a.startsAt) return a.state;
    return now < a.endsAt ? 'OPEN' : 'ENDED';
  }

  /** The steps the rain cannot get past, oldest first (the admin view's `stalls`, and `stalled` the oldest). */
  stallsOf(a: ActivityRecord): Promise<Stall[]> {
    return this.store.stalls(a.activityId);
  }

  async poolStats(a: ActivityRecord): Promise<PoolStats[]> {
    return Promise.all(Array.from({ length: a.subPools }, (_, k) => this.store.stats(this.store.pool(a, k))));
  }

  async reconciliation(activityId: string): Promise<Reconciliation> {
    const a = await this.mustRead(activityId);
    const stats = await this.poolStats(a);
    const sum = (f: keyof PoolStats) => stats.reduce((s, p) => s + Number(p[f]), 0);
    const pair = (name: string) => ({ count: sum(`${name}Count` as keyof PoolStats), amount: sum(`${name}Amount` as keyof PoolStats) });
    const r = {
      total: a.totalAmount,
      count: a.count,
      grabbed: pair('grabbed'),
      credited: pair('credited'),
      pending: pair('pending'),
      dead: pair('dead'),
      left: pair('left'),
      refunded: pair('refunded'),
    };
    // What the armed sub-pools hold came from the funded total; the rest is still being loaded.
    const armed = stats.filter((p) => p.armed);
    const loading = {
      count: a.count - armed.reduce((s, p) => s + Number(p.loadedCount), 0),
      amount: a.totalAmount - armed.reduce((s, p) => s + Number(p.loadedAmount), 0),
    };
    const sponsor = await this.sponsorEntries(a);
    const balanced =
      (a.state === 'FUNDING' || sponsor.funded === a.totalAmount) &&
      sponsor.refunded <= r.refunded.amount &&
      (a.state !== 'SETTLED' || sponsor.refunded === r.refunded.amount) &&
      loading.count >= 0 &&
      loading.amount >= 0 &&
      (armed.length < stats.length || (loading.count === 0 && loading.amount === 0)) &&
      r.total === r.grabbed.amount + r.left.amount + r.refunded.amount + loading.amount &&
      r.grabbed.amount === r.credited.amount + r.pending.amount + r.dead.amount &&
      r.grabbed.count === r.credited.count + r.pending.count + r.dead.count;
    return { ...r, loading, sponsor, balanced };
  }

  /** The rain's funding and refund as the sponsor's ledger holds them, by kind (0 for none). */
  private async sponsorEntries(a: ActivityRecord): Promise<{ funded: number; refunded: number }> {
    const owner = { kind: 'merchant', id: a.sponsorMerchantId } as const;
    const [funding, refund] = await Promise.all([
      this.wallets.entryOf(owner, 'funding', fundingReference(a.activityId)),
      this.wallets.entryOf(owner, 'refund', refundReference(a.activityId)),
    ]);
    const of = (e: { currency: string; amount: number } | null, sign: number) => (e && e.currency === a.currency ? sign * e.amount : 0);
    return { funded: of(funding, -1), refunded: of(refund, 1) };
  }

  /** The split's amounts (computed again from the stored seed: the split is reproducible). */
  amounts(a: ActivityRecord): ArrayLike<number> {
    return splitAmounts({ total: a.totalAmount, count: a.count, minAmount: a.minAmount, seed: a.seed });
  }

  distributionOf(a: ActivityRecord) {
    return distribution(this.amounts(a));
  }

  /**
   * Ops re-drive a rain: the dead-lettered grabs of every sub-pool go back to crediting, and the job of a step that
   * has not finished runs again now (its queue may have given up on it): the load of a rain still FUNDING or LOADING,
   * the end of one past its window and not SETTLED. The way out of every stall, once its cause is fixed.
   */
  async redrive(activityId: string): Promise<number> {
    const a = await this.mustRead(activityId);
    let n = 0;
    for (let k = 0; k < a.subPools; k++) n += await this.store.redrive(this.store.pool(a, k), 10_000);
    if (n > 0) await this.crediting.start(a);
    if (n > 0) await this.stalls.clear(a.activityId, 'credit');
    const job = a.state === 'FUNDING' || a.state === 'LOADING' ? 'advance' : a.state !== 'SETTLED' && (await this.store.now()) >= a.endsAt ? 'end' : null;
    if (job) await this.queue.schedule(JOBS_QUEUE, `${job}:${a.activityId}`, { delayMs: 0 }, { activityId: a.activityId }, { ifExists: 'replace' });
    return n;
  }

  // ---- the jobs

  /**
   * Runs a job; one that cannot advance is reported (RainStalls): at once for a refusal (a DomainError, which retrying
   * does not fix) or a rain step that says so, else after STALL_AFTER_ATTEMPTS failures in a row.
   */
  @DelayQueueHandler({
    queue: JOBS_QUEUE,
    retry: {
      attempts: 1000,
      backoff: { initialMs: 500, maxMs: 10_000 },
      visibilityMs: configured('RED_ENVELOPE_JOB_VISIBILITY_MS', (get) => get(RedEnvelopeConfig).jobVisibilityMs),
    },
    options: () => ({ concurrency: 4 }),
    metric: 'red_envelope_stalls_total',
  })
  private async job(d: Delivery<{ activityId: string }>): Promise<void> {
    const id = d.payload.activityId;
    const advance = d.id.startsWith('advance:');
    try {
      if (advance) await this.advance(id);
      else await this.end(id);
    } catch (err) {
      const step: Stall['step'] = err instanceof RainStepError ? err.step : advance ? 'load' : 'end';
      if (err instanceof RainStepError || err instanceof DomainError || d.attempt >= STALL_AFTER_ATTEMPTS) {
        const a = await this.store.activity(id).catch(() => null);
        if (a && (!(err instanceof RainStepError) || err.stalled)) await this.stalls.note(a, step, (err as Error).message);
      }
      throw err;
    }
  }

  /** Funding, then the preload, as far as they got: idempotent, and run by one instance at a time. */
  async advance(activityId: string): Promise<void> {
    await this.locks.withLock(`red-envelope-load:${activityId}`, LOAD_LOCK, async () => {
      let a = await this.store.activity(activityId);
      if (!a || (a.state !== 'FUNDING' && a.state !== 'LOADING')) return;
      if (a.state === 'FUNDING') {
        try {
          await this.fund(a);
        } catch (err) {
          if (!(err instanceof DomainError)) throw err;
          // The wallet refused it (nothing debited): the rain is not made, as a create refused at once would not be.
          await this.store.deleteActivity(a.activityId);
          this.stalls.refused(a.activityId, 'funding', err.message);
          return;
        }
        crashPoint('red-envelope.create.after-funding');
        a = { ...a, state: 'LOADING' };
        await this.store.saveActivity(a, this.expireAt(a));
      }
      await this.load(a);
    });
  }

  private fund(a: ActivityRecord) {
    return this.wallets.debit({
      owner: { kind: 'merchant', id: a.sponsorMerchantId },
      currency: a.currency,
      amount: a.totalAmount,
      reference: fundingReference(a.activityId),
      kind: 'funding',
      memo: memoOf(a.title),
    });
  }

  /** Splits (from the stored seed), verifies, stages every sub-pool and arms it when complete; then READY. */
  private async load(a: ActivityRecord): Promise<void> {
    const amounts = this.amounts(a);
    const problems = verifySplit(amounts, { total: a.totalAmount, count: a.count, minAmount: a.minAmount });
    if (problems.length) throw new Error(`the split of ${a.activityId} is wrong: ${problems.slice(0, 3).join('; ')}`);
    const expireAt = this.expireAt(a);
    let loaded = 0;
    for (let k = 0; k < a.subPools; k++) {
      const keys = this.store.pool(a, k);
      // Envelope i goes to sub-pool i mod subPools.
      let count = 0;
      let amount = 0;
      for (let i = k; i < a.count; i += a.subPools) {
        count++;
        amount += amounts[i];
      }
      if ((await this.store.stats(keys)).armed) {
        loaded += count;
        continue;
      }
      await this.store.clearStaging(keys);
      let batch: string[] = [];
      for (let i = k; i < a.count; i += a.subPools) {
        batch.push(`${envelopeId(a.activityId, i)}:${amounts[i]}`);
        if (batch.length === STAGE_BATCH) {
          await this.store.stage(keys, batch);
          loaded += batch.length;
          batch = [];
          await this.store.saveActivity({ ...a, loaded }, expireAt);
        }
      }
      if (batch.length) await this.store.stage(keys, batch);
      loaded += batch.length;
      const r = await this.store.arm(keys, { count, amount, startsAt: a.startsAt, endsAt: a.endsAt, limit: a.perUserLimit, pool: k, expireAt });
      if (!r.armed) throw new Error(`sub-pool ${k} of ${a.activityId}: ${r.staged} of ${count} envelopes staged`);
      crashPoint('red-envelope.load.after-arm');
    }
    const ready: ActivityRecord = { ...a, state: 'READY', loaded, readyAt: await this.store.now() };
    await this.queue.schedule(JOBS_QUEUE, `end:${a.activityId}`, { dueAt: a.endsAt }, { activityId: a.activityId }, { ifExists: 'keep' });
    await this.store.saveActivity(ready, expireAt);
    crashPoint('red-envelope.load.after-ready');
    await this.stalls.clear(a.activityId);
    await this.crediting.start(ready);
    await this.queue.cancel(JOBS_QUEUE, `advance:${a.activityId}`).catch(() => undefined);
  }

  /**
   * At the end: every sub-pool stops and gives up what is left (drain-2.lua), the activity is ENDED, the total left is
   * credited back to the sponsor in one ledger entry (kind refund, reference `red-envelope:<id>:leftover`), and once
   * every grab is credited the activity is SETTLED. Until then this throws, and the queue tries again later; a refund
   * the wallet refuses, or grabs dead-lettered, are reported as the rain's stall (RainStepError).
   */
  async end(activityId: string): Promise<void> {
    const a = await this.store.activity(activityId);
    if (!a || a.state === 'SETTLED') return;
    if (a.state !== 'READY' && a.state !== 'ENDED') throw new Error(`activity ${activityId} is ${a.state}: not ended yet`);
    let refunded = 0;
    for (let k = 0; k < a.subPools; k++) refunded += (await this.store.drain(this.store.pool(a, k))).amount;
    crashPoint('red-envelope.end.after-drain');
    // Drained, no sub-pool takes a grab any more: every key of the rain now expires with its record.
    await this.expirePools(a);
    const now = await this.store.now();
    const ended: ActivityRecord = { ...a, state: 'ENDED', endedAt: a.endedAt ?? now, refundedAmount: refunded };
    if (a.state !== 'ENDED' || a.refundedAmount !== refunded) await this.store.saveActivity(ended, this.expireAt(a));
    if (refunded > 0) {
      let entry: WalletEntry;
      try {
        ({ entry } = await this.wallets.credit({
          owner: { kind: 'merchant', id: a.sponsorMerchantId },
          currency: a.currency,
          amount: refunded,
          reference: refundReference(a.activityId),
          kind: 'refund',
          memo: memoOf(a.title),
        }));
      } catch (err) {
        if (err instanceof DomainError) throw new RainStepError('refund', `the sponsor's wallet refused the refund of ${refunded}: ${err.code} ${err.message}`);
        throw err;
      }
      // Settled only on the refund's own entry: never on another entry's money.
      if (entry.kind !== 'refund' || entry.amount !== refunded || entry.currency !== a.currency)
        throw new RainStepError('refund', `the sponsor's wallet answered entry ${entry.entryId} (${entry.kind} ${entry.amount}) for the refund of ${refunded}`);
      await this.stalls.clear(a.activityId, 'refund');
    }
    crashPoint('red-envelope.end.after-refund');
    const stats = await this.poolStats(a);
    if (stats.some((p) => p.pendingCount > 0 || p.deadCount > 0)) {
      await this.crediting.start(ended);
      const dead = stats.reduce((n, p) => n + Number(p.deadCount), 0);
      if (dead > 0) throw new RainStepError('credit', DEAD_LETTERED, true);
      throw new RainStepError('credit', `activity ${activityId}: grabs still to credit`, false);
    }
    // Again once settled: a dead-letter stream made by a failed credit after the end has no expiry yet.
    await this.expirePools(a);
    await this.store.saveActivity({ ...ended, state: 'SETTLED', settledAt: now }, this.expireAt(a));
    await this.stalls.clear(a.activityId);
    await this.crediting.stop(activityId);
  }

  private async expirePools(a: ActivityRecord): Promise<void> {
    for (let k = 0; k < a.subPools; k++) await this.store.expirePool(this.store.pool(a, k), this.expireAt(a));
  }

  private expireAt(a: { endsAt: number }): number {
    return a.endsAt + this.config.liveRetentionMs;
  }
}

export type { ActivityState };

/** The sponsor's wallet references of a rain (kinds funding and refund: no top-up can stand for them). */
export const fundingReference = (activityId: string) => `red-envelope:${activityId}`;
export const refundReference = (activityId: string) => `red-envelope:${activityId}:leftover`;

/** A rain step that did not finish: `stalled` when retrying alone will not get it past (a refusal, dead letters). */
class RainStepError extends Error {
  constructor(
    readonly step: Stall['step'],
    message: string,
    readonly stalled = true,
  ) {
    super(message);
  }
}
