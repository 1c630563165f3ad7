import { Injectable } from '@nestjs/common';
import { InsufficientFundsError, ReferenceReusedError, ReferenceVoidedError, WalletService } from '../../wallet';
import type { ChannelOutcome, Payer } from './payment-channel';

/** The wallet reference of a reversal: the leg's own reference, marked. */
export const reversalReference = (ref: string) => `${ref}:reversal`;

/**
 * The `balance` method for real: a leg is a debit of the payer's account wallet in the order's currency,
 * with the leg's reference (`legReference`: `<planId>:<index>:<stamp>`) as the wallet reference, so a repeated pay moves money once.
 * - pay: the debit; a short balance (INSUFFICIENT_FUNDS), a reference applied with other terms or voided is `failure`;
 * - query: `success` when the debit entry exists; else `failure`, and the reference is voided (`WalletService.settle`),
 *   so that a debit arriving after the answer (from a run that stalled mid-call) is refused instead of taken;
 * - reverse: a credit of what the debit took, once (reference `<ref>:reversal`); `failure` when there is no debit.
 * Any other error (Redis unreachable, a timeout) is thrown, and the gateway counts it as `unknown`: the
 * outcome is then settled by a query, which reads the wallet.
 */
@Injectable()
export class WalletChannel {
  readonly method = 'balance' as const;
  private readonly counts = { pay: 0, query: 0, reverse: 0 };

  constructor(private readonly wallets: WalletService) {}

  /** Calls made so far, by operation. */
  get calls() {
    return { ...this.counts };
  }

  async pay(ref: string, amount: number, payer: Payer): Promise<ChannelOutcome> {
    this.counts.pay++;
    try {
      await this.wallets.debit({ owner: { kind: 'account', id: payer.accountId }, currency: payer.currency, amount, reference: ref, kind: 'payment' });
      return 'success';
    } catch (err) {
      if (err instanceof InsufficientFundsError || err instanceof ReferenceReusedError || err instanceof ReferenceVoidedError) return 'failure';
      throw err;
    }
  }

  async query(ref: string, payer: Payer): Promise<ChannelOutcome> {
    this.counts.query++;
    // Settles the leg: with no debit, the reference is voided, so a debit still on its way (a stalled run) is refused.
    const entry = await this.wallets.settle({ kind: 'account', id: payer.accountId }, 'payment', ref);
    return entry && entry.amount < 0 ? 'success' : 'failure';
  }

  async reverse(ref: string, _amount: number, payer: Payer): Promise<ChannelOutcome> {
    this.counts.reverse++;
    const owner = { kind: 'account', id: payer.accountId } as const;
    const paid = await this.wallets.entryOf(owner, 'payment', ref);
    if (!paid || paid.amount >= 0) return 'failure';
    try {
      await this.wallets.credit({
        owner,
        currency: paid.currency,
        amount: -paid.amount,
        reference: reversalReference(ref),
        kind: 'reversal',
        memo: `reversal of ${ref}`,
      });
      return 'success';
    } catch (err) {
      if (err instanceof ReferenceReusedError) return 'failure';
      throw err;
    }
  }
}
