import type { WalletOwner } from './wallet.keys';

export type { WalletOwner } from './wallet.keys';

/** What an entry is for. */
export const WALLET_ENTRY_KINDS = ['top-up', 'payment', 'reversal', 'red-envelope', 'funding', 'refund'] as const;
export type WalletEntryKind = (typeof WALLET_ENTRY_KINDS)[number];

export const MAX_MEMO = 256;

/** A credit or a debit. */
export interface WalletCommand {
  owner: WalletOwner;
  currency: string;
  /** Minor units, 1..10,000,000,000. */
  amount: number;
  /** 1-128 of A-Z a-z 0-9 _ . : -; the same kind and reference twice move money once (a reference is per kind). */
  reference: string;
  kind: WalletEntryKind;
  memo?: string;
}

/** What a credit or a debit did: `applied` false when the reference had been applied before (nothing moved). */
export interface WalletResult {
  applied: boolean;
  entryId: string;
  /** The balance in the command's currency now, minor units. */
  balance: number;
  /** The ledger entry the (kind, reference) made (now or before). */
  entry: WalletEntry;
}

/** One ledger entry. */
export interface WalletEntry {
  /** The entry's number in its wallet, from 1 (newer entries have greater numbers). */
  entryId: string;
  kind: WalletEntryKind;
  currency: string;
  /** Signed minor units: > 0 a credit, < 0 a debit. */
  amount: number;
  /** The balance in this currency after the entry. */
  balanceAfter: number;
  reference: string;
  memo: string;
  /** Epoch ms, Redis clock. */
  at: number;
}

export interface WalletBalance {
  currency: string;
  balance: number;
}

/** A page of entries, newest first; `next` (absent on the last page) is the cursor of the next one. */
export interface WalletEntryPage {
  items: WalletEntry[];
  next?: string;
}
