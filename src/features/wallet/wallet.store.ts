import { Injectable } from '@nestjs/common';
import { KeyBuilder } from '../../platform/redis/key-builder';
import { RedisService } from '../../platform/redis/redis.service';
import { ScriptRegistry } from '../../platform/scripts/script-registry.service';
import { walletKeys, type WalletOwner } from './wallet.keys';
import type { WalletBalance, WalletCommand, WalletEntry, WalletEntryKind, WalletEntryPage } from './wallet.types';

/** What the credit and debit scripts answered: see lua/features/wallet/includes/wallet-ledger.lua. */
export type ApplyReply =
  | { case: 'applied' | 'existing'; entry: WalletEntry; balance: number }
  | { case: 'reused'; entry: WalletEntry }
  | { case: 'voided' }
  | { case: 'insufficient' | 'limit'; balance: number };

/** The one typed wrapper of the lua/features/wallet scripts and keys. */
@Injectable()
export class WalletStore {
  constructor(
    private readonly scripts: ScriptRegistry,
    private readonly redis: RedisService,
    private readonly keys: KeyBuilder,
  ) {}

  async apply(direction: 'credit' | 'debit', cmd: WalletCommand): Promise<ApplyReply> {
    const k = walletKeys(this.keys, cmd.owner);
    const [c, a, b] = await this.scripts.run<[string, string, string?]>(
      `wallet/${direction}`,
      [k.balances, k.ledger, k.refs],
      [cmd.currency, cmd.amount, cmd.reference, cmd.kind, cmd.memo ?? ''],
    );
    switch (c) {
      case 'APPLIED':
      case 'EXISTING':
        return { case: c === 'APPLIED' ? 'applied' : 'existing', entry: JSON.parse(a) as WalletEntry, balance: Number(b) };
      case 'REUSED':
        return { case: 'reused', entry: JSON.parse(a) as WalletEntry };
      case 'VOIDED':
        return { case: 'voided' };
      case 'INSUFFICIENT':
      case 'LIMIT':
        return { case: c === 'INSUFFICIENT' ? 'insufficient' : 'limit', balance: Number(a) };
      default:
        throw new Error(`wallet/${direction} answered ${String(c)}`);
    }
  }

  /** Every currency the wallet has held, by currency code. */
  async balances(owner: WalletOwner): Promise<WalletBalance[]> {
    const raw = await this.redis.command((c) => c.hgetall(walletKeys(this.keys, owner).balances));
    return Object.entries(raw)
      .map(([currency, v]) => ({ currency, balance: Number(v) }))
      .sort((x, y) => (x.currency < y.currency ? -1 : x.currency > y.currency ? 1 : 0));
  }

  /** The entry (kind, reference) made, or null when it was never applied to this wallet: see lua/features/wallet/entry-2.lua. */
  async entryOf(owner: WalletOwner, kind: WalletEntryKind, reference: string): Promise<WalletEntry | null> {
    const k = walletKeys(this.keys, owner);
    const [c, entry] = await this.scripts.run<[string, string?]>('wallet/entry', [k.ledger, k.refs], [reference, kind]);
    return c === 'ENTRY' ? (JSON.parse(entry!) as WalletEntry) : null;
  }

  /** The entry (kind, reference) made, or null after marking it void (it can then never be applied): see lua/features/wallet/void-2.lua. */
  async settle(owner: WalletOwner, kind: WalletEntryKind, reference: string): Promise<WalletEntry | null> {
    const k = walletKeys(this.keys, owner);
    const [c, entry] = await this.scripts.run<[string, string?]>('wallet/void', [k.ledger, k.refs], [reference, kind]);
    return c === 'ENTRY' ? (JSON.parse(entry!) as WalletEntry) : null;
  }

  /**
   * Up to `limit` entries newest first, older than entry `before` (from the newest when absent). Entry n sits at
   * index n-1 of a list that only grows at its tail, so a cursor stays valid while entries are added. A `before`
   * past the newest entry (no page gave it) pages from the newest too: every entry is older than it.
   */
  async entries(owner: WalletOwner, before: number | undefined, limit: number): Promise<WalletEntryPage> {
    const { ledger } = walletKeys(this.keys, owner);
    let raw: string[];
    if (before !== undefined && before > 1) before = Math.min(before, (await this.redis.command((c) => c.llen(ledger))) + 1);
    if (before === undefined) raw = await this.redis.command((c) => c.lrange(ledger, -limit, -1));
    else if (before <= 1) raw = [];
    else raw = await this.redis.command((c) => c.lrange(ledger, Math.max(0, before - 1 - limit), before - 2));
    const items = raw.map((r) => JSON.parse(r) as WalletEntry).reverse();
    const oldest = items.at(-1);
    return oldest && Number(oldest.entryId) > 1 && items.length === limit ? { items, next: oldest.entryId } : { items };
  }
}
