import { Logger } from '@nestjs/common';
import type { RedisService } from '../redis/redis.service';
import type { BackgroundWorker } from '../workers/background-workers.service';
import { ConsumeOptions, EventConsumer, OrderEventHandler, toOrderEvent } from './order-event';
import type { OrdersMetrics } from './orders.metrics';

type Entry = [id: string, fields: string[] | null];

/**
 * One consumer of one group over every shard stream. Each round it takes over
 * entries left pending too long (XAUTOCLAIM: a dead consumer's, or ones whose
 * handler failed), reads new ones (XREADGROUP), hands them to the handler one
 * at a time per shard and XACKs each after the handler returns: at-least-once.
 */
export class OrderEventConsumer implements EventConsumer, BackgroundWorker {
  private readonly logger = new Logger(OrderEventConsumer.name);
  private stopped = false;
  private running?: Promise<void>;
  private wake?: () => void;
  private lastClaim = 0;

  constructor(
    readonly group: string,
    readonly consumer: string,
    private readonly streams: string[],
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
        const counts = await Promise.all(this.streams.map((s) => this.round(s, claim)));
        handled = counts.reduce((a, b) => a + b, 0);
      } catch (err) {
        this.logger.warn({ group: this.group, err: (err as Error).message }, 'reading order events failed; trying again');
      }
      if (handled === 0 && !this.stopped) await this.sleep(this.options.pollMs * (0.5 + Math.random() / 2));
    }
  }

  private async round(stream: string, claim: boolean): Promise<number> {
    const { batchSize, claimIdleMs } = this.options;
    const entries: Entry[] = [];
    if (claim) {
      const r = (await this.redis.command((c) => c.xautoclaim(stream, this.group, this.consumer, claimIdleMs, '0-0', 'COUNT', batchSize))) as [string, Entry[]];
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
        // Left pending: taken over again after claimIdleMs.
        this.metrics.eventsHandled.inc({ group: this.group, outcome: 'failed' });
        this.logger.warn({ group: this.group, stream, id, err: (err as Error).message }, 'order event handler failed; the event stays pending');
      }
    }
    return entries.length;
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
