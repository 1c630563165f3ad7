import type { WalletDto } from './dto/wallet.dto';
import { formatOwner, type WalletOwner } from './wallet.keys';
import type { WalletService } from './wallet.service';

export const DEFAULT_PAGE = 20;

/** A wallet as the HTTP API shows it: balances and one page of entries. */
export async function walletView(wallets: WalletService, owner: WalletOwner, cursor: string | undefined, limit: number | undefined): Promise<WalletDto> {
  const [{ balances }, page] = await Promise.all([wallets.wallet(owner), wallets.entries(owner, cursor, limit ?? DEFAULT_PAGE)]);
  return {
    owner: formatOwner(owner),
    balances,
    entries: page.items.map((e) => ({ ...e, at: new Date(e.at).toISOString() })),
    ...(page.next ? { next: page.next } : {}),
  };
}
