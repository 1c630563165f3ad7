import { Logger } from '@nestjs/common';
import type { RedisService } from '../redis/redis.service';
import type { BackgroundWorker } from '../workers/background-workers.service';
import { ConsumeOptions, EventConsumer, OrderEventHandler, toOrderEvent } from './order-event';
import type { OrdersMetrics } from './orders.metrics';

type Entry = [id: string, fields: string[] | null];

/** Dead events kept per shard (approximately): the newest ones. */
export const DEAD_EVENTS_MAXLEN = 10_000;

/**
 * One consumer of one group over every shard stream. Each round it takes over
 * entries left pending too long (XAUTOCLAIM: a dead consumer's, or ones whose
 * handler failed; the scan follows its cursor over the pending list, so a few
 * failing entries cannot hide the ones behind them), reads new ones
 * (XREADGROUP), hands them to the handler one at a time per shard and XACKs
 * each after the handler returns: at-least-once. An event whose handler failed
 * on its `maxDeliveries`th delivery is given up: acked and recorded on its
 * shard's dead-events stream. A round waits for every shard's round, so a
 * shard never has two rounds at once and stop() returns only after all of them.
 */
export class OrderEventConsumer implements EventConsumer, BackgroundWorker {
  private readonly logger = new Logger(OrderEventConsumer.name);
  private stopped = false;
  private running?: Promise<void>;
  private wake?: () => void;
  private lastClaim = 0;
  /** Where each shard's XAUTOCLAIM scan carries on ('0-0': from the start). */
  private readonly claimCursor = new Map<string, string>();

  constructor(
    readonly group: string,
    readonly consumer: string,
    private readonly streams: string[],
    /** Each shard's dead-events stream, in the order of `streams`. */
    private readonly deadStreams: string[],
    private readonly handler: OrderEventHandler,
    private readonly options: Required<Omit<ConsumeOptions, 'consumer' | 'startFrom'>>,
    private readonly redis: RedisService,
    private readonly metrics: OrdersMetrics,
  ) {}

  start(): void {
    this.running = this.loop();
  }

  async stop(): Promise<void> {
    this.stopped = true;
    this.wake?.();
    await this.running;
  }

  private async loop(): Promise<void> {
    while (!this.stopped) {
      let handled = 0;
      try {
        const claim = Date.now() - this.lastClaim >= this.options.claimIdleMs / 2;
        if (claim) this.lastClaim = Date.now();
        // allSettled, not all: a shard whose round failed must not start the next rounds while others still run.
        const rounds = await Promise.allSettled(this.streams.map((s, i) => this.round(s, this.deadStreams[i], claim)));
        for (const [i, r] of rounds.entries()) {
          if (r.status === 'fulfilled') handled += r.value;
          else this.logger.warn({ group: this.group, stream: this.streams[i], err: (r.reason as Error).message }, 'reading order events failed; trying again');
        }
      } catch (err) {
        this.logger.warn({ group: this.group, err: (err as Error).message }, 'reading order events failed; trying again');
      }
      if (handled === 0 && !this.stopped) await this.sleep(this.options.pollMs * (0.5 + Math.random() / 2));
    }
  }

  private async round(stream: string, deadStream: string, claim: boolean): Promise<number> {
    const { batchSize, claimIdleMs } = this.options;
    const entries: Entry[] = [];
    if (claim) {
      const cursor = this.claimCursor.get(stream) ?? '0-0';
      const r = (await this.redis.command((c) => c.xautoclaim(stream, this.group, this.consumer, claimIdleMs, cursor, 'COUNT', batchSize))) as [string, Entry[]];
      this.claimCursor.set(stream, r[0]);
      entries.push(...r[1].filter(Boolean));
    }
    const fresh = (await this.redis.command((c) => c.xreadgroup('GROUP', this.group, this.consumer, 'COUNT', batchSize, 'STREAMS', stream, '>'))) as Array<[string, Entry[]]> | null;
    if (fresh) entries.push(...fresh[0][1]);
    for (const [id, fields] of entries) {
      if (this.stopped) break;
      try {
        // An entry trimmed away while pending comes back without fields: nothing to hand over.
        if (fields) await this.handler(toOrderEvent(stream, id, fields));
        await this.redis.command((c) => c.xack(stream, this.group, id));
        this.metrics.eventsHandled.inc({ group: this.group, outcome: 'acked' });
      } catch (err) {
        await this.failed(stream, deadStream, id, fields, err as Error).catch((e: Error) => this.logger.warn({ group: this.group, stream, id, err: e.message }, 'could not record a failed order event'));
      }
    }
    return entries.length;
  }

  /** A handler failed: the event stays pending (taken over again after claimIdleMs) unless that was its last delivery. */
  private async failed(stream: string, deadStream: string, id: string, fields: string[] | null, err: Error): Promise<void> {
    this.metrics.eventsHandled.inc({ group: this.group, outcome: 'failed' });
    const pending = (await this.redis.command((c) => c.xpending(stream, this.group, id, id, 1))) as Array<[string, string, number, number]>;
    const deliveries = Number(pending[0]?.[3] ?? 0);
    if (deliveries < this.options.maxDeliveries) {
      this.logger.warn({ group: this.group, stream, id, deliveries, err: err.message }, 'order event handler failed; the event stays pending');
      return;
    }
    await this.redis.command((c) =>
      c.xadd(deadStream, 'MAXLEN', '~', DEAD_EVENTS_MAXLEN, '*', 'group', this.group, 'consumer', this.consumer, 'eventId', id, 'deliveries', deliveries, 'error', err.message.slice(0, 500), ...(fields ?? [])),
    );
    await this.redis.command((c) => c.xack(stream, this.group, id));
    this.metrics.eventsHandled.inc({ group: this.group, outcome: 'dead' });
    this.logger.error({ group: this.group, stream, id, deliveries, err: err.message }, `order event given up after ${deliveries} deliveries; recorded on ${deadStream}`);
  }

  private sleep(ms: number): Promise<void> {
    return new Promise((resolve) => {
      const timer = setTimeout(resolve, ms);
      this.wake = () => {
        clearTimeout(timer);
        resolve();
      };
    });
  }
}
