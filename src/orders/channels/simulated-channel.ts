import type { PaymentMethod } from '../order.types';
import type { ChannelOp, ChannelOutcome, ChannelSettings, PaymentChannel } from './payment-channel';

/**
 * A stand-in for a real channel: answers each operation with its configured
 * outcome after its configured latency, and counts its calls. Settings are
 * per process (env at boot, PUT /admin/channels/{method} at run time).
 */
export class SimulatedChannel implements PaymentChannel {
  private settings: ChannelSettings;
  private readonly counts: Record<ChannelOp, number> = { pay: 0, query: 0, reverse: 0 };

  constructor(
    readonly method: PaymentMethod,
    settings: ChannelSettings,
  ) {
    this.settings = { ...settings };
  }

  get current(): ChannelSettings {
    return { ...this.settings };
  }

  /** Calls made so far, by operation. */
  get calls(): Record<ChannelOp, number> {
    return { ...this.counts };
  }

  configure(patch: Partial<ChannelSettings>): ChannelSettings {
    this.settings = { ...this.settings, ...Object.fromEntries(Object.entries(patch).filter(([, v]) => v !== undefined)) };
    return this.current;
  }

  pay(_ref: string, _amount: number): Promise<ChannelOutcome> {
    return this.call('pay');
  }

  query(_ref: string): Promise<ChannelOutcome> {
    return this.call('query');
  }

  reverse(_ref: string, _amount: number): Promise<ChannelOutcome> {
    return this.call('reverse');
  }

  private async call(op: ChannelOp): Promise<ChannelOutcome> {
    this.counts[op]++;
    const { latencyMs, [op]: outcome } = this.settings;
    if (latencyMs > 0) await new Promise((r) => setTimeout(r, latencyMs));
    return outcome;
  }
}
