import { ACCOUNT_ID_RE } from '../../platform/core/ids';
import { defineKeySpace, KeyBuilder } from '../../platform/redis/key-builder';

/**
 * The wallets' keys: one tag per owner, its kind the owner's kind (`{a:<accountId>}` for an account,
 * `{m:<merchantId>}` for a merchant), so an account can never spell a merchant's wallet.
 */
export const WALLET_KEYS = defineKeySpace('wallet', { a: 'id', m: 'id' });

/** Who holds a wallet: an app user's account, or a merchant (a sponsor). */
export type WalletOwnerKind = 'account' | 'merchant';
export interface WalletOwner {
  kind: WalletOwnerKind;
  id: string;
}

/** Account and merchant ids: 1-64 of A-Z a-z 0-9 _ . : -, never `.` or `..` (they appear in URLs); the kernel's MERCHANT_ID_RE is this rule. */
export const OWNER_ID_RE = ACCOUNT_ID_RE;
/** An owner as URLs write it: `account:<id>` or `merchant:<id>`. */
export const OWNER_REF_RE = /^(account|merchant):(?!\.\.?$)[A-Za-z0-9_.:-]{1,64}$/;

/** The tag kind of each owner kind. */
const TAG_KIND = { account: 'a', merchant: 'm' } as const;

/** The parts of one wallet's tag, in the credit and debit scripts' KEYS order. */
export const WALLET_PARTS = ['balances', 'ledger', 'refs'] as const;
export type WalletPart = (typeof WALLET_PARTS)[number];

/** One wallet's keys: its balances (hash currency → minor units), its ledger (list, oldest first) and its applied references (hash reference → entry number). */
export function walletKeys(builder: KeyBuilder, owner: WalletOwner): Record<WalletPart, string> {
  const t = builder.tagged(WALLET_KEYS, TAG_KIND[owner.kind], owner.id);
  return { balances: t.key('balances'), ledger: t.key('ledger'), refs: t.key('refs') };
}

/** `account:<id>` / `merchant:<id>` → the owner, or undefined when it is not one. */
export function parseOwner(text: string): WalletOwner | undefined {
  if (typeof text !== 'string' || !OWNER_REF_RE.test(text)) return undefined;
  const colon = text.indexOf(':');
  return { kind: text.slice(0, colon) as WalletOwnerKind, id: text.slice(colon + 1) };
}

/** The owner as URLs write it. */
export const formatOwner = (o: WalletOwner) => `${o.kind}:${o.id}`;
