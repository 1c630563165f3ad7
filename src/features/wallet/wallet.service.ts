import { Injectable } from '@nestjs/common';
import { InvalidArgumentError } from '../../platform/core/domain.error';
import { codePoints } from '../../platform/core/text';
import { REFERENCE_RE } from '../../platform/core/ids';
import { CURRENCY_RE, currencyMessage, MAX_AMOUNT, MIN_AMOUNT } from '../../platform/core/money';
import { OWNER_ID_RE, type WalletOwner } from './wallet.keys';
import { BalanceLimitError, InsufficientFundsError, ReferenceReusedError, ReferenceVoidedError } from './wallet.errors';
import { WalletMetrics } from './wallet.metrics';
import { WalletStore } from './wallet.store';
import {
  MAX_MEMO,
  WALLET_ENTRY_KINDS,
  type WalletBalance,
  type WalletCommand,
  type WalletEntry,
  type WalletEntryKind,
  type WalletEntryPage,
  type WalletResult,
} from './wallet.types';

export const MAX_PAGE = 200;

/**
 * Wallets of accounts and merchants: a balance per currency and a ledger. A credit or a debit is one
 * script: idempotent on (owner, kind, reference), and a debit never takes a balance below zero. The kind is part of
 * the reference: a top-up's reference (chosen by ops) never stands for a rain's credit, funding or refund.
 */
@Injectable()
export class WalletService {
  constructor(
    private readonly store: WalletStore,
    private readonly metrics: WalletMetrics,
  ) {}

  /** Adds `amount` once per (kind, reference). Throws ReferenceReusedError when they were applied with other terms. */
  credit(cmd: WalletCommand): Promise<WalletResult> {
    return this.apply('credit', cmd);
  }

  /** Takes `amount` once per (kind, reference). Throws InsufficientFundsError (nothing stored) when the balance is short. */
  debit(cmd: WalletCommand): Promise<WalletResult> {
    return this.apply('debit', cmd);
  }

  /** The owner's balances, by currency (an empty list for a wallet never used). */
  wallet(owner: WalletOwner): Promise<{ owner: WalletOwner; balances: WalletBalance[] }> {
    checkOwner(owner);
    return this.store.balances(owner).then((balances) => ({ owner, balances }));
  }

  /** A page of the owner's entries, newest first; pass the previous page's `next` as `cursor`. */
  entries(owner: WalletOwner, cursor: string | undefined, limit: number): Promise<WalletEntryPage> {
    checkOwner(owner);
    if (cursor !== undefined && !/^[1-9][0-9]{0,15}$/.test(cursor)) throw new InvalidArgumentError('cursor must be an entry id', 'cursor');
    if (!Number.isInteger(limit) || limit < 1 || limit > MAX_PAGE) throw new InvalidArgumentError(`limit must be an integer 1-${MAX_PAGE}`, 'limit');
    return this.store.entries(owner, cursor === undefined ? undefined : Number(cursor), limit);
  }

  /** The entry (kind, reference) made in the owner's wallet, or null when it was never applied there. */
  entryOf(owner: WalletOwner, kind: WalletEntryKind, reference: string): Promise<WalletEntry | null> {
    checkOwner(owner);
    checkKind(kind);
    checkReference(reference);
    return this.store.entryOf(owner, kind, reference);
  }

  /**
   * Settles (kind, reference) for good: the entry it made, or null, and then it can never be applied (a later credit
   * or debit of that kind with it throws ReferenceVoidedError). For a payment channel's query, so "no such payment"
   * stays true.
   */
  settle(owner: WalletOwner, kind: WalletEntryKind, reference: string): Promise<WalletEntry | null> {
    checkOwner(owner);
    checkKind(kind);
    checkReference(reference);
    return this.store.settle(owner, kind, reference);
  }

  private async apply(direction: 'credit' | 'debit', cmd: WalletCommand): Promise<WalletResult> {
    checkCommand(cmd);
    const r = await this.store.apply(direction, cmd);
    this.metrics.entries.inc({ direction, kind: cmd.kind, outcome: r.case });
    switch (r.case) {
      case 'applied':
      case 'existing':
        return { applied: r.case === 'applied', entryId: r.entry.entryId, balance: r.balance, entry: r.entry };
      case 'reused':
        throw new ReferenceReusedError({ reference: cmd.reference, entryId: r.entry.entryId });
      case 'voided':
        throw new ReferenceVoidedError({ reference: cmd.reference });
      case 'insufficient':
        throw new InsufficientFundsError({ currency: cmd.currency, balance: r.balance, amount: cmd.amount });
      case 'limit':
        throw new BalanceLimitError({ currency: cmd.currency, balance: r.balance });
    }
  }
}

function checkOwner(owner: WalletOwner): void {
  if (!owner || (owner.kind !== 'account' && owner.kind !== 'merchant') || typeof owner.id !== 'string' || !OWNER_ID_RE.test(owner.id))
    throw new InvalidArgumentError('owner must be an account or a merchant with an id of 1-64 of A-Z a-z 0-9 _ . : -', 'owner');
}

function checkReference(reference: string): void {
  if (typeof reference !== 'string' || !REFERENCE_RE.test(reference))
    throw new InvalidArgumentError('reference must be 1-128 of A-Z a-z 0-9 _ . : -', 'reference');
}

function checkKind(kind: string): void {
  if (!(WALLET_ENTRY_KINDS as readonly string[]).includes(kind)) throw new InvalidArgumentError(`kind must be one of ${WALLET_ENTRY_KINDS.join(', ')}`, 'kind');
}

function checkCommand(cmd: WalletCommand): void {
  checkOwner(cmd.owner);
  if (typeof cmd.currency !== 'string' || !CURRENCY_RE.test(cmd.currency)) throw new InvalidArgumentError(currencyMessage(), 'currency');
  if (!Number.isInteger(cmd.amount) || cmd.amount < MIN_AMOUNT || cmd.amount > MAX_AMOUNT)
    throw new InvalidArgumentError(`amount must be an integer ${MIN_AMOUNT}-${MAX_AMOUNT} (minor units)`, 'amount');
  checkReference(cmd.reference);
  checkKind(cmd.kind);
  if (cmd.memo !== undefined && (typeof cmd.memo !== 'string' || codePoints(cmd.memo) > MAX_MEMO))
    throw new InvalidArgumentError(`memo must be at most ${MAX_MEMO} characters`, 'memo');
}
