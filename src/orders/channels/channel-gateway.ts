import { Injectable } from '@nestjs/common';
import { OrdersConfig } from '../orders.config';
import { OrdersMetrics } from '../orders.metrics';
import { PAYMENT_METHODS, PaymentMethod } from '../order.types';
import type { ChannelOp, ChannelOutcome, ChannelSettings } from './payment-channel';
import { SimulatedChannel } from './simulated-channel';

/**
 * The payment channels, one per method. Here they are simulated (latency and
 * outcomes from CHANNEL_LATENCY_MS / CHANNEL_OUTCOMES, changed at run time by
 * the ops endpoint); a real deployment binds real clients behind the same
 * calls. Any exception from a channel counts as an unknown outcome.
 */
@Injectable()
export class ChannelGateway {
  private readonly channels: ReadonlyMap<PaymentMethod, SimulatedChannel>;

  constructor(
    config: OrdersConfig,
    private readonly metrics: OrdersMetrics,
  ) {
    const { channelLatencyMs, channelOutcomes } = config;
    const outcome = (method: string, op: ChannelOp) => channelOutcomes.get(`${method}.${op}`) ?? 'success';
    this.channels = new Map(
      PAYMENT_METHODS.map((m) => [
        m,
        new SimulatedChannel(m, { latencyMs: channelLatencyMs, pay: outcome(m, 'pay'), query: outcome(m, 'query'), reverse: outcome(m, 'reverse') }),
      ]),
    );
  }

  channel(method: PaymentMethod): SimulatedChannel {
    return this.channels.get(method)!;
  }

  all(): SimulatedChannel[] {
    return [...this.channels.values()];
  }

  configure(method: PaymentMethod, patch: Partial<ChannelSettings>): ChannelSettings {
    return this.channel(method).configure(patch);
  }

  pay(method: PaymentMethod, ref: string, amount: number): Promise<ChannelOutcome> {
    return this.call(method, 'pay', () => this.channel(method).pay(ref, amount));
  }

  query(method: PaymentMethod, ref: string): Promise<ChannelOutcome> {
    return this.call(method, 'query', () => this.channel(method).query(ref));
  }

  reverse(method: PaymentMethod, ref: string, amount: number): Promise<ChannelOutcome> {
    return this.call(method, 'reverse', () => this.channel(method).reverse(ref, amount));
  }

  private async call(method: PaymentMethod, op: ChannelOp, fn: () => Promise<ChannelOutcome>): Promise<ChannelOutcome> {
    let outcome: ChannelOutcome;
    try {
      outcome = await fn();
    } catch {
      outcome = 'unknown';
    }
    this.metrics.channelCalls.inc({ method, op, outcome });
    return outcome;
  }
}
