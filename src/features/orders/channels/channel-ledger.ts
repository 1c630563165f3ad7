import { Injectable } from '@nestjs/common';
import { KeyBuilder } from '../../../platform/redis/key-builder';
import { RedisService } from '../../../platform/redis/redis.service';
import { ScriptRegistry } from '../../../platform/scripts/script-registry.service';
import { channelLedgerKey } from '../order.keys';
import { OrdersConfig } from '../orders.config';
import type { ChannelOp, ChannelOutcome } from './payment-channel';

/** What a simulated channel knows about one payment reference: whether money moved, and whether it went back. */
export interface LedgerEntry {
  ref: string;
  amount: number;
  /** `paid`: money taken; `declined`: none taken; `undetermined`: the pay answered unknown and no query has settled it yet. */
  state: 'paid' | 'declined' | 'undetermined';
  /** Pay calls made with this ref (money moves on the first only). */
  payCalls: number;
  /** Times money was given back (0 or 1). */
  refunds: number;
}

/**
 * The simulated channels' ledger, in Redis (lua/features/orders/channel-ledger-1.lua): one entry per method and payment
 * reference, kept ORDERS_RETENTION_SECONDS after its last call, shared by every instance as a real provider's is.
 */
@Injectable()
export class ChannelLedger {
  constructor(
    private readonly scripts: ScriptRegistry,
    private readonly keys: KeyBuilder,
    private readonly redis: RedisService,
    private readonly config: OrdersConfig,
  ) {}

  /** One call on `ref`'s entry, `outcome` being what the channel is configured to answer; the channel's answer. */
  call(method: string, ref: string, op: ChannelOp, amount: number, outcome: ChannelOutcome): Promise<ChannelOutcome> {
    return this.scripts.run<ChannelOutcome>(
      'orders/channel-ledger',
      [channelLedgerKey(this.keys, method, ref)],
      [op, amount, outcome, this.config.retentionMs],
    );
  }

  /** What the channel recorded for `ref`, or undefined when it never saw a pay of it. */
  async entry(method: string, ref: string): Promise<LedgerEntry | undefined> {
    const h = await this.redis.command((c) => c.hgetall(channelLedgerKey(this.keys, method, ref)));
    if (!h.state) return undefined;
    return { ref, amount: Number(h.amount), state: h.state as LedgerEntry['state'], payCalls: Number(h.payCalls), refunds: Number(h.refunds) };
  }
}
