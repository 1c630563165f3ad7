import { Injectable } from '@nestjs/common';
import { OrdersConfig } from '../orders.config';
import { OrdersMetrics } from '../orders.metrics';
import { PAYMENT_METHODS, PaymentMethod } from '../order.types';
import type { ChannelOp, ChannelOutcome, ChannelSettings, Payer } from './payment-channel';
import { ChannelLedger } from './channel-ledger';
import { SimulatedChannel } from './simulated-channel';
import { WalletChannel } from './wallet-channel';

/**
 * The payment channels, one per method. `balance` pays from the payer's wallet
 * (WalletChannel) unless BALANCE_CHANNEL=simulated; the others are simulated
 * (latency and outcomes from CHANNEL_LATENCY_MS / CHANNEL_OUTCOMES, changed at
 * run time by the ops endpoint); a real deployment binds real clients behind
 * the same calls. Any exception from a channel counts as an unknown outcome.
 */
@Injectable()
export class ChannelGateway {
  private readonly channels: ReadonlyMap<PaymentMethod, SimulatedChannel>;

  /** Serves `balance` when set (BALANCE_CHANNEL=wallet, the default). */
  private readonly wallet?: WalletChannel;

  constructor(
    config: OrdersConfig,
    private readonly metrics: OrdersMetrics,
    wallet: WalletChannel,
    ledger: ChannelLedger,
  ) {
    if (config.balanceChannel === 'wallet') this.wallet = wallet;
    const { channelLatencyMs, channelOutcomes } = config;
    const outcome = (method: string, op: ChannelOp) => channelOutcomes.get(`${method}.${op}`) ?? 'success';
    this.channels = new Map(
      PAYMENT_METHODS.map((m) => [
        m,
        new SimulatedChannel(m, { latencyMs: channelLatencyMs, pay: outcome(m, 'pay'), query: outcome(m, 'query'), reverse: outcome(m, 'reverse') }, ledger),
      ]),
    );
  }

  /** Whether `method` is served by its simulated channel (not the wallet). */
  simulated(method: PaymentMethod): boolean {
    return !(method === 'balance' && this.wallet);
  }

  /** The simulated channel of `method` (for `balance` with the wallet channel on, one that is not called). */
  channel(method: PaymentMethod): SimulatedChannel {
    return this.channels.get(method)!;
  }

  all(): SimulatedChannel[] {
    return [...this.channels.values()];
  }

  configure(method: PaymentMethod, patch: Partial<ChannelSettings>): ChannelSettings {
    return this.channel(method).configure(patch);
  }

  pay(method: PaymentMethod, ref: string, amount: number, payer: Payer): Promise<ChannelOutcome> {
    const w = this.walletFor(method);
    return this.call(method, 'pay', () => (w ? w.pay(ref, amount, payer) : this.channel(method).pay(ref, amount)));
  }

  query(method: PaymentMethod, ref: string, payer: Payer): Promise<ChannelOutcome> {
    const w = this.walletFor(method);
    return this.call(method, 'query', () => (w ? w.query(ref, payer) : this.channel(method).query(ref)));
  }

  reverse(method: PaymentMethod, ref: string, amount: number, payer: Payer): Promise<ChannelOutcome> {
    const w = this.walletFor(method);
    return this.call(method, 'reverse', () => (w ? w.reverse(ref, amount, payer) : this.channel(method).reverse(ref, amount)));
  }

  private walletFor(method: PaymentMethod): WalletChannel | undefined {
    return method === 'balance' ? this.wallet : undefined;
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
