import type { PaymentMethod } from '../order.types';
import type { ChannelLedger, LedgerEntry } from './channel-ledger';
import type { ChannelOp, ChannelOutcome, ChannelSettings, PaymentChannel } from './payment-channel';

/**
 * A stand-in for a real channel: answers each operation after its configured
 * latency, counts its calls and, like a real channel, keeps a ledger per
 * reference so that every call is idempotent on `ref`:
 * - `pay` moves money once per ref; a repeat returns what the ref is now (the first outcome);
 * - `query` of a ref never paid is `failure` ("no such payment"); of a settled ref, its outcome; an
 *   undetermined ref (its pay answered `unknown`) is settled by the configured `query` outcome; a
 *   configured `query: unknown` means the channel cannot answer at all (an outage);
 * - `reverse` gives money back once, and only for a paid ref (`failure` otherwise); a repeat of a
 *   done reversal is `success` without moving money.
 * The ledger is in Redis (ChannelLedger), shared by every instance as a real provider's is; settings and call
 * counts are per process (env at boot, PUT /admin/channels/{method} at run time).
 */
export class SimulatedChannel implements PaymentChannel {
  private settings: ChannelSettings;
  private readonly counts: Record<ChannelOp, number> = { pay: 0, query: 0, reverse: 0 };
  constructor(
    readonly method: PaymentMethod,
    settings: ChannelSettings,
    private readonly entries: ChannelLedger,
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

  /** What this channel recorded for `ref`, or undefined when it never saw a pay of it. */
  ledger(ref: string): Promise<LedgerEntry | undefined> {
    return this.entries.entry(this.method, ref);
  }

  configure(patch: Partial<ChannelSettings>): ChannelSettings {
    this.settings = { ...this.settings, ...Object.fromEntries(Object.entries(patch).filter(([, v]) => v !== undefined)) };
    return this.current;
  }

  async pay(ref: string, amount: number): Promise<ChannelOutcome> {
    return this.entries.call(this.method, ref, 'pay', amount, await this.call('pay'));
  }

  async query(ref: string): Promise<ChannelOutcome> {
    return this.entries.call(this.method, ref, 'query', 0, await this.call('query'));
  }

  async reverse(ref: string, _amount: number): Promise<ChannelOutcome> {
    return this.entries.call(this.method, ref, 'reverse', 0, await this.call('reverse'));
  }

  private async call(op: ChannelOp): Promise<ChannelOutcome> {
    this.counts[op]++;
    const { latencyMs, [op]: outcome } = this.settings;
    if (latencyMs > 0) await new Promise((r) => setTimeout(r, latencyMs));
    return outcome;
  }
}
