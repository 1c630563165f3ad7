import { LRUCache } from 'lru-cache';
import type { PaymentMethod } from '../order.types';
import type { ChannelOp, ChannelOutcome, ChannelSettings, PaymentChannel } from './payment-channel';

/** What the simulated channel knows about one payment reference: whether money moved, and whether it went back. */
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

/** Refs remembered per channel; the oldest are forgotten past this (the simulator runs in long-lived processes too). */
export const LEDGER_LIMIT = 100_000;

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
 * Settings and ledger are per process (env at boot, PUT /admin/channels/{method} at run time).
 */
export class SimulatedChannel implements PaymentChannel {
  private settings: ChannelSettings;
  private readonly counts: Record<ChannelOp, number> = { pay: 0, query: 0, reverse: 0 };
  private readonly entries = new LRUCache<string, LedgerEntry>({ max: LEDGER_LIMIT });

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

  /** What this channel recorded for `ref` (a copy), or undefined when it never saw a pay of it. */
  ledger(ref: string): LedgerEntry | undefined {
    const e = this.entries.get(ref);
    return e && { ...e };
  }

  configure(patch: Partial<ChannelSettings>): ChannelSettings {
    this.settings = { ...this.settings, ...Object.fromEntries(Object.entries(patch).filter(([, v]) => v !== undefined)) };
    return this.current;
  }

  async pay(ref: string, amount: number): Promise<ChannelOutcome> {
    const outcome = await this.call('pay');
    const known = this.entries.get(ref);
    if (known) {
      known.payCalls++;
      return answer(known);
    }
    this.remember({ ref, amount, state: outcome === 'success' ? 'paid' : outcome === 'failure' ? 'declined' : 'undetermined', payCalls: 1, refunds: 0 });
    return outcome;
  }

  async query(ref: string): Promise<ChannelOutcome> {
    const outcome = await this.call('query');
    if (outcome === 'unknown') return 'unknown';
    const known = this.entries.get(ref);
    if (!known) return 'failure';
    if (known.state === 'undetermined') known.state = outcome === 'success' ? 'paid' : 'declined';
    return answer(known);
  }

  async reverse(ref: string, _amount: number): Promise<ChannelOutcome> {
    const outcome = await this.call('reverse');
    const known = this.entries.get(ref);
    if (!known || known.state !== 'paid') return 'failure';
    if (known.refunds > 0) return 'success';
    if (outcome === 'success') known.refunds = 1;
    return outcome;
  }

  private remember(e: LedgerEntry): void {
    this.entries.set(e.ref, e);
  }

  private async call(op: ChannelOp): Promise<ChannelOutcome> {
    this.counts[op]++;
    const { latencyMs, [op]: outcome } = this.settings;
    if (latencyMs > 0) await new Promise((r) => setTimeout(r, latencyMs));
    return outcome;
  }
}

const answer = (e: LedgerEntry): ChannelOutcome => (e.state === 'paid' ? 'success' : e.state === 'declined' ? 'failure' : 'unknown');
