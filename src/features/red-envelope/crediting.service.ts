import { Injectable, Logger } from '@nestjs/common';
import DataLoader from 'dataloader';
import { hostname } from 'node:os';
import { STREAM_RETRY, type StreamEntry, type StreamGroupRunner } from '../../engines/streams/stream-group-runner';
import { StreamRunners } from '../../engines/streams/stream-runners.service';
import { WalletService } from '../wallet';
import { crashPoint } from '../../platform/core/crash-points';
import { configured, PeriodicJob, StreamConsumer } from '../../engines/workers/worker-declarations';
import { WorkerRegistry } from '../../engines/workers/worker-registry';
import { memoOf } from './red-envelope-activity.command';
import { DEAD_LETTERED, RainStalls } from './rain-stalls';
import { RedEnvelopeConfig } from './red-envelope.config';
import { RedEnvelopeMetrics, type RainProgress } from './red-envelope.metrics';
import { RedEnvelopeStore, type Settled } from './red-envelope.store';
import type { ActivityRecord, PoolStats } from './red-envelope.types';

/** Most envelopes settled in one script call. */
const SETTLE_BATCH_MAX = 500;

/**
 * How often an instance looks whether the rains it credits are settled: the instance that ends a rain stops its own
 * crediting, the others' would otherwise idle on the rain's streams until they restart.
 */
const RETIRE_CHECK_MS = 30_000;

/** The consumer group that credits grabs into wallets. */
export const CREDIT_GROUP = 'red-envelope-credit';
/** The stream source of the grabs to credit: every sub-pool's credit stream, one runner per rain. */
export const CREDIT_STREAMS = 'red-envelope-credits';
const CREDIT_WORKER = `stream:${CREDIT_STREAMS}:${CREDIT_GROUP}`;

const fieldsOf = (flat: string[]): Record<string, string> => {
  const o: Record<string, string> = {};
  for (let i = 0; i + 1 < flat.length; i += 2) o[flat[i]] = flat[i + 1];
  return o;
};

/**
 * Credits every grab into the user's wallet exactly once: a consumer group on each sub-pool's credit stream (the
 * grab script adds the entry in the same step as the pop), the envelope id as the wallet reference (a redelivery
 * moves no money twice), then the envelope's state moves to credited. A failed crediting stays pending and is taken
 * over after RED_ENVELOPE_CREDIT_RETRY_MS (by this or another instance: a dead consumer's entries too, XAUTOCLAIM), and
 * its later retries back off, doubling up to RED_ENVELOPE_CREDIT_RETRY_MAX_MS;
 * after RED_ENVELOPE_CREDIT_MAX_DELIVERIES it goes to the sub-pool's dead-letter stream, for ops to re-drive.
 * The envelopes of a sub-pool credited in one turn of the event loop are settled together, in one script call.
 */
@Injectable()
export class CreditingService {
  private readonly logger = new Logger(CreditingService.name);
  private readonly runners = new Map<string, StreamGroupRunner>();
  private readonly starting = new Map<string, Promise<void>>();
  private readonly consumer = `${hostname()}-${process.pid}`;
  /** By sub-pool (activity:pool): settles to 'credited' what was credited in the same turn, in one call. */
  private readonly settlers = new Map<string, DataLoader<string, Settled>>();

  constructor(
    private readonly store: RedEnvelopeStore,
    private readonly wallets: WalletService,
    private readonly streams: StreamRunners,
    private readonly metrics: RedEnvelopeMetrics,
    private readonly stalls: RainStalls,
    private readonly registry: WorkerRegistry,
  ) {
    metrics.setProgressSource(() => this.progress());
    // The source of the declared consumer below: its runners are started here, one per rain (see start).
    registry.provide(`stream:${CREDIT_STREAMS}`, {
      defaults: STREAM_RETRY,
      trigger: () => `stream \`${CREDIT_STREAMS}\` (each sub-pool's credit stream), group \`${CREDIT_GROUP}\`, one runner per rain`,
      deadLetter: () => "the sub-pool's dead-letter stream",
      metric: () => 'red_envelope_credited_total, stream_entries_total{runner,group}',
      start: () => Promise.reject(new Error(`${CREDIT_WORKER} is started per rain`)),
    });
  }

  /** Starts crediting an activity's grabs on this instance (once, however many calls race). */
  start(a: ActivityRecord): Promise<void> {
    if (this.runners.has(a.activityId)) return Promise.resolve();
    // Grabs, the jobs and the periodic look for rains call this concurrently: the first call's start is shared, so
    // no second runner is started for the rain (one the map would forget, never retired).
    let starting = this.starting.get(a.activityId);
    if (!starting) {
      starting = this.startRunner(a).finally(() => this.starting.delete(a.activityId));
      this.starting.set(a.activityId, starting);
    }
    return starting;
  }

  private async startRunner(a: ActivityRecord): Promise<void> {
    const pools = Array.from({ length: a.subPools }, (_, k) => this.store.pool(a, k));
    const declared = this.registry.declared(CREDIT_WORKER);
    const runner = await this.streams.start({
      ...declared.options,
      name: `red-envelope-credit:${a.activityId}`,
      // Named per rain: a settled rain's series leave the scrape with its runner.
      forgetMetricsOnStop: true,
      streams: pools.map((k) => ({ key: k.credits, deadLetterKey: k.dead })),
      group: CREDIT_GROUP,
      consumer: this.consumer,
      handler: (e) => this.credit(a, e),
      retry: declared.retry,
      onOutcome: (outcome, e) => {
        if (outcome === 'dead') void this.deadLettered(a, e);
      },
    });
    this.runners.set(a.activityId, runner);
  }

  /** Stops crediting the rains that are settled (whichever instance ended them) or gone; the next check retries a failed read. */
  @PeriodicJob({ name: 'red-envelope:retire-credited-rains', everyMs: RETIRE_CHECK_MS })
  async retireSettled(): Promise<void> {
    for (const id of [...this.runners.keys()]) {
      const a = await this.store.activity(id).catch(() => undefined);
      if (a === null || a?.state === 'SETTLED') await this.stop(id);
    }
  }

  /** Stops crediting an activity on this instance (it is settled). */
  async stop(activityId: string): Promise<void> {
    const r = this.runners.get(activityId);
    this.runners.delete(activityId);
    await r?.stop();
    for (const id of this.settlers.keys()) if (id.startsWith(`${activityId}:`)) this.settlers.delete(id);
  }

  /** The envelopes of each rain this instance credits, summed over its sub-pools (the progress gauge). */
  private async progress(): Promise<RainProgress[]> {
    const out: RainProgress[] = [];
    for (const id of this.runners.keys()) {
      const a = await this.store.activity(id);
      if (!a) continue;
      const pools = await Promise.all(Array.from({ length: a.subPools }, (_, k) => this.store.stats(this.store.pool(a, k))));
      const sum = (pick: (p: PoolStats) => number) => pools.reduce((n, p) => n + pick(p), 0);
      out.push({
        activityId: id,
        left: sum((p) => p.leftCount),
        grabbed: sum((p) => p.grabbedCount),
        pending: sum((p) => p.pendingCount),
        credited: sum((p) => p.creditedCount),
        dead: sum((p) => p.deadCount),
      });
    }
    return out;
  }

  isRunning(activityId: string): boolean {
    return this.runners.has(activityId);
  }

  @StreamConsumer({
    stream: CREDIT_STREAMS,
    group: CREDIT_GROUP,
    startedPer: 'rain',
    retry: {
      attempts: configured('RED_ENVELOPE_CREDIT_MAX_DELIVERIES', (get) => get(RedEnvelopeConfig).creditMaxDeliveries),
      visibilityMs: configured('RED_ENVELOPE_CREDIT_RETRY_MS', (get) => get(RedEnvelopeConfig).creditRetryMs),
      backoff: {
        initialMs: configured('RED_ENVELOPE_CREDIT_RETRY_MS', (get) => get(RedEnvelopeConfig).creditRetryMs),
        maxMs: configured('RED_ENVELOPE_CREDIT_RETRY_MAX_MS', (get) => Math.max(get(RedEnvelopeConfig).creditRetryMs, get(RedEnvelopeConfig).creditRetryMaxMs)),
      },
    },
    options: (get) => ({ batchSize: 200, concurrency: get(RedEnvelopeConfig).creditConcurrency, blockMs: 2000 }),
    metric: 'red_envelope_dead_lettered_total',
  })
  private async credit(a: ActivityRecord, e: StreamEntry): Promise<void> {
    const f = fieldsOf(e.fields);
    const amount = Number(f.amount);
    const { entry } = await this.wallets.credit({
      owner: { kind: 'account', id: f.account },
      currency: a.currency,
      amount,
      reference: f.envelopeId,
      kind: 'red-envelope',
      memo: memoOf(a.title),
    });
    // Counted credited only when the entry the wallet answered is this grab's credit: never another entry's money.
    if (entry.kind !== 'red-envelope' || entry.reference !== f.envelopeId || entry.amount !== amount || entry.currency !== a.currency)
      throw new Error(`the wallet answered entry ${entry.entryId} (${entry.kind} ${entry.reference} ${entry.amount}) for ${f.envelopeId}: not its credit`);
    crashPoint('red-envelope.credit.after-wallet');
    const s = await this.settler(a, Number(f.pool)).load(f.envelopeId);
    if (s.moved) {
      this.metrics.credited.inc();
      // The grab's time is its stream entry id's.
      this.metrics.creditLag.observe(Math.max(0, Date.now() - Number(e.id.split('-')[0])) / 1000);
    }
  }

  private settler(a: ActivityRecord, pool: number): DataLoader<string, Settled> {
    const id = `${a.activityId}:${pool}`;
    let l = this.settlers.get(id);
    if (!l) {
      const k = this.store.pool(a, pool);
      l = new DataLoader((ids) => this.store.settleMany(k, ids, 'credited'), {
        cache: false,
        maxBatchSize: SETTLE_BATCH_MAX,
        // After the I/O callbacks of this turn: the wallet replies that arrived together settle together.
        batchScheduleFn: (run) => setImmediate(run),
      });
      this.settlers.set(id, l);
    }
    return l;
  }

  private async deadLettered(a: ActivityRecord, e: StreamEntry): Promise<void> {
    const f = fieldsOf(e.fields);
    try {
      await this.store.settle(this.store.pool(a, Number(f.pool)), f.envelopeId, 'dead');
      this.metrics.deadLettered.inc();
      await this.stalls.note(a, 'credit', DEAD_LETTERED);
    } catch (err) {
      this.logger.warn({ envelopeId: f.envelopeId, err: (err as Error).message }, 'could not mark a dead-lettered grab; the reconciliation shows it pending');
    }
  }
}
