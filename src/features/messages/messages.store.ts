import { Injectable } from '@nestjs/common';
import { KeyBuilder } from '../../platform/redis/key-builder';
import { ScriptRegistry } from '../../platform/scripts/script-registry.service';
import type { WriteMessageCommand } from './message.commands';
import { broadcastKeys, inboxKeys } from './message.keys';
import { MessagesConfig } from './messages.config';

/** A stored message as the scripts keep it: the public fields of the write, with `needPush` and `createdAt` settled, plus `k`, its idempotency field. */
export interface StoredMessage extends Pick<WriteMessageCommand, 'bizType' | 'outerBizId' | 'title' | 'content' | 'url' | 'logoUrl'> {
  k: string;
  needPush: boolean;
  createdAt: string;
  broadcastId?: string;
}

export interface PageRow {
  msgId: string;
  body: StoredMessage;
  read: boolean;
}

export type PullResult = { sync: true; mark: number } | { sync: false; unread: number; hasMore: boolean; rows: PageRow[] };

export interface BroadcastEntry {
  seq: number;
  id: string;
  body: string;
}

/** The one typed wrapper per lua/features/messages script: keys and arguments are built here and nowhere else. */
@Injectable()
export class MessagesStore {
  private readonly maxCount: number;
  private readonly retentionMs: number;

  constructor(
    private readonly scripts: ScriptRegistry,
    private readonly keys: KeyBuilder,
    config: MessagesConfig,
  ) {
    this.maxCount = config.maxPerAccount;
    this.retentionMs = config.retentionMs;
  }

  get retention(): number {
    return this.retentionMs;
  }

  /**
   * 1 new, 0 duplicate (msgId = the original), 2 the pending action was finished meanwhile,
   * 3 (bizType, outerBizId) was withdrawn (msgId ''). `pendingBizType` makes the write a
   * reminder: it happens only while that action is pending (any recorded start), and ends it.
   * `ttlMs` (a checked positive integer) makes the message expire that long after the write;
   * `expiresAt` (epoch ms, Redis clock) at that time, the earlier of the two when both are given.
   * 4: `expiresAt` was at or before the Redis clock's now, nothing stored (msgId '').
   */
  async write(
    accountId: string,
    message: StoredMessage,
    opts: { ttlMs?: number; expiresAt?: number; pendingBizType?: string } = {},
  ): Promise<{ outcome: 0 | 1 | 2 | 3 | 4; msgId: string }> {
    const [outcome, msgId] = await this.scripts.run<[0 | 1 | 2 | 3 | 4, string, number]>('messages/write', inboxKeys(this.keys, accountId), [
      message.k,
      JSON.stringify(message),
      this.maxCount,
      this.retentionMs,
      opts.pendingBizType === undefined ? '' : pendingField(opts.pendingBizType),
      '',
      opts.ttlMs ?? '',
      opts.expiresAt ?? '',
    ]);
    return { outcome, msgId };
  }

  /** Withdraws (bizType, outerBizId) from the inbox for the retention time; true when a visible message was removed. */
  async withdraw(accountId: string, idemField: string): Promise<boolean> {
    const [removed] = await this.scripts.run<[number, number]>('messages/withdraw', inboxKeys(this.keys, accountId), [
      idemField,
      this.retentionMs,
      this.maxCount,
    ]);
    return removed === 1;
  }

  /** Records a start of a pending action (the newest start wins); the reminder's write checks it. */
  async startPendingAction(accountId: string, bizType: string, actionId: string): Promise<void> {
    await this.scripts.run('messages/pending-start', [this.metaKey(accountId)], [pendingField(bizType), actionId, this.retentionMs]);
  }

  /** Ends a pending action; true when it was pending. */
  async finishPendingAction(accountId: string, bizType: string): Promise<boolean> {
    return (await this.scripts.run<number>('messages/pending-finish', [this.metaKey(accountId)], [pendingField(bizType)])) === 1;
  }

  async pull(accountId: string, after: string | undefined, limit: number, latestBroadcast: number): Promise<PullResult> {
    const r = await this.scripts.run<Array<string | number>>('messages/pull', inboxKeys(this.keys, accountId), [
      after ?? '',
      limit,
      latestBroadcast,
      this.retentionMs,
    ]);
    if (r[0] === 1) return { sync: true, mark: Number(r[1]) };
    const rows: PageRow[] = [];
    for (let i = 3; i < r.length; i += 3) rows.push({ msgId: String(r[i]), body: JSON.parse(String(r[i + 1])) as StoredMessage, read: r[i + 2] === 1 });
    return { sync: false, unread: Number(r[1]), hasMore: r[2] === 1, rows };
  }

  /** Takes broadcasts above `from` into the inbox; `{done: false, mark}` asks for every broadcast above `mark`. */
  async syncBroadcasts(accountId: string, from: number, entries: BroadcastEntry[]): Promise<{ done: boolean; mark: number }> {
    const args: Array<string | number> = [this.maxCount, this.retentionMs, from];
    for (const e of entries) args.push(e.seq, e.id, e.body);
    const [done, mark] = await this.scripts.run<[number, string]>('messages/sync-broadcasts', inboxKeys(this.keys, accountId), args);
    return { done: done === 1, mark: Number(mark) };
  }

  async get(accountId: string, msgId: string): Promise<PageRow> {
    const [body, read] = await this.scripts.run<[string, number]>('messages/get', inboxKeys(this.keys, accountId), [msgId, this.retentionMs]);
    return { msgId, body: JSON.parse(body) as StoredMessage, read: read === 1 };
  }

  async markRead(accountId: string, msgId: string): Promise<{ changed: boolean; unread: number }> {
    const [changed, unread] = await this.scripts.run<[number, number]>('messages/mark-read', inboxKeys(this.keys, accountId), [msgId, this.retentionMs]);
    return { changed: changed === 1, unread };
  }

  markAllRead(accountId: string): Promise<number> {
    return this.scripts.run<number>('messages/mark-all-read', inboxKeys(this.keys, accountId));
  }

  remove(accountId: string, msgId: string): Promise<number> {
    return this.scripts.run<number>('messages/delete', inboxKeys(this.keys, accountId), [msgId, this.retentionMs]);
  }

  /** Records a broadcast to everyone; one made before under `requestId` (while it is kept) is answered instead. */
  async broadcast(body: string, maxKept: number, requestId = ''): Promise<{ id: string; duplicate: boolean }> {
    const [id, duplicate] = await this.scripts.run<[string, number]>('messages/broadcast', broadcastKeys(this.keys), [
      body,
      this.retentionMs,
      maxKept,
      requestId,
    ]);
    return { id, duplicate: duplicate === 1 };
  }

  /** Broadcasts above `after` (oldest first), or the newest `limit` when `after` is undefined; and the latest sequence. */
  async recentBroadcasts(after: number | undefined, limit: number): Promise<{ latest: number; entries: BroadcastEntry[] }> {
    const r = await this.scripts.run<string[]>('messages/recent-broadcasts', broadcastKeys(this.keys), [after === undefined ? '' : after, limit]);
    const entries: BroadcastEntry[] = [];
    for (let i = 1; i < r.length; i += 3) entries.push({ seq: Number(r[i]), id: r[i + 1], body: r[i + 2] });
    return { latest: Number(r[0]), entries };
  }

  /** Pending-action records live in the account's meta hash, so the reminder's write can check them atomically. */
  private metaKey(accountId: string): string {
    return inboxKeys(this.keys, accountId)[4];
  }
}

function pendingField(bizType: string): string {
  return `pa:${bizType}`;
}
