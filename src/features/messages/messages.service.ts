import { Injectable } from '@nestjs/common';
import { randomUUID } from 'node:crypto';
import { crashPoint } from '../../platform/core/crash-points';
import { InvalidArgumentError } from '../../platform/core/domain.error';
import { BroadcastFeed } from './broadcast-feed';
import { MessageDto, PullResultDto } from './dto/pull.dto';
import { BROADCAST_BIZ_TYPE, MessageCommandDto, WithdrawCommandDto } from './dto/write-message.dto';
import { validateCommand } from '../../platform/http/validation';
import type {
  BroadcastCommand,
  BroadcastResult,
  InvalidBatchItem,
  WithdrawMessageCommand,
  WithdrawMessageResult,
  WriteBatchItemResult,
  WriteBatchResult,
  WriteMessageCommand,
  WriteMessageResult,
} from './message.commands';
import { MessagesMetrics } from './messages.metrics';
import { BroadcastEntry, MessagesStore, PageRow, PullResult, StoredMessage } from './messages.store';

/** Most broadcasts-to-all kept (each account takes in at most these on a pull). */
export const MAX_BROADCASTS_KEPT = 1000;
/** Writes in flight at once for a batch or a listed broadcast. */
const FAN_OUT = 64;
type Source = 'api' | 'batch' | 'broadcast' | 'reminder';

/**
 * The app message center: idempotent writes from business
 * systems, gap-free pulls by server sequence, read state, deletes, and
 * broadcasts. Every change to an inbox is one Lua script on the account's slot.
 */
@Injectable()
export class MessagesService {
  constructor(
    private readonly store: MessagesStore,
    private readonly feed: BroadcastFeed,
    private readonly metrics: MessagesMetrics,
  ) {}

  /**
   * Writes one message; `duplicate` when (bizType, outerBizId) was already written for the account,
   * `withdrawn` (and msgId '') when it was withdrawn: a withdrawn key stays withdrawn for the
   * retention time, so a retried or late write never brings the message back; `expired` (duplicate
   * false, msgId '') when `expiresAt` was at or before the Redis clock's now: nothing stored. A command
   * that breaks the HTTP body's rules (MessageCommandDto: any bizType, expiresAt in epoch ms) is an
   * InvalidArgumentError (400) naming the fields, and nothing is stored.
   */
  async write(cmd: WriteMessageCommand, source: Source = 'api'): Promise<WriteMessageResult> {
    await validateCommand(MessageCommandDto, cmd);
    const { outcome, msgId } = await this.store.write(cmd.accountId, toStored(cmd), { ttlMs: cmd.ttlMs, expiresAt: cmd.expiresAt });
    if (outcome === 3) return { msgId: '', duplicate: true, withdrawn: true };
    if (outcome === 4) return { msgId: '', duplicate: false, expired: true };
    this.count(outcome === 1, source);
    return { msgId, duplicate: outcome !== 1 };
  }

  /**
   * Takes back the message with (bizType, outerBizId) from the account's inbox, atomically: no pull,
   * unread count or get shows it afterwards. Idempotent (again, or for a key never written:
   * `withdrawn: false`). The key stays withdrawn for the retention time: a write of it meanwhile
   * stores nothing and answers `withdrawn: true`, whichever of the two came first.
   */
  async withdraw(cmd: WithdrawMessageCommand): Promise<WithdrawMessageResult> {
    await validateCommand(WithdrawCommandDto, cmd);
    const withdrawn = await this.store.withdraw(cmd.accountId, idemField(cmd.bizType, cmd.outerBizId));
    if (withdrawn) this.metrics.withdrawn.inc();
    return { withdrawn };
  }

  /**
   * Writes each item on its own, at most FAN_OUT at once, keeping their order. An item the caller
   * already found invalid (`{ invalid }`) fails alone with status 400.
   */
  async writeBatch(items: ReadonlyArray<WriteMessageCommand | InvalidBatchItem>): Promise<WriteBatchResult> {
    const results = await mapLimit([...items], FAN_OUT, async (item, index): Promise<WriteBatchItemResult> => {
      if ('invalid' in item) return { index, status: 400, error: item.invalid };
      // A command the write refuses (e.g. an expiresAt before 1970) fails its item alone; nothing of it is stored.
      const r = await this.write(item, 'batch').catch((e: unknown) => {
        if (e instanceof InvalidArgumentError) return e;
        throw e;
      });
      if (r instanceof InvalidArgumentError) return { index, status: 400, error: r.message };
      crashPoint('messages.batch.after-item');
      if (r.withdrawn) return { index, status: 200, withdrawn: true };
      if (r.expired) return { index, status: 200, msgId: '', expired: true };
      return { index, status: r.duplicate ? 200 : 201, msgId: r.msgId };
    });
    return {
      results,
      created: results.filter((r) => r.status === 201).length,
      duplicates: results.filter((r) => r.status === 200 && !r.expired).length,
      expired: results.filter((r) => r.expired).length,
      invalid: results.filter((r) => r.status === 400).length,
    };
  }

  /** Messages stored after `after` (oldest first), or the newest page. */
  async pull(accountId: string, after: string | undefined, limit: number): Promise<PullResultDto> {
    const page = await this.pullSynced(accountId, after, limit);
    const messages = page.rows.map(toDto);
    this.metrics.pulled.inc(messages.length);
    return { messages, hasMore: page.hasMore, latestId: messages.at(-1)?.msgId ?? after ?? null, unread: page.unread };
  }

  async unreadCount(accountId: string): Promise<number> {
    return (await this.pullSynced(accountId, undefined, 0)).unread;
  }

  async get(accountId: string, msgId: string): Promise<MessageDto> {
    return toDto(await this.store.get(accountId, msgId));
  }

  markRead(accountId: string, msgId: string) {
    return this.store.markRead(accountId, msgId);
  }

  async markAllRead(accountId: string): Promise<{ marked: number; unread: number }> {
    await this.unreadCount(accountId); // take in pending broadcasts first, so they are marked too
    return { marked: await this.store.markAllRead(accountId), unread: 0 };
  }

  remove(accountId: string, msgId: string): Promise<number> {
    return this.store.remove(accountId, msgId);
  }

  /** "all": one write, taken in by each account on its next pull. A list: written into each inbox. */
  async broadcast(cmd: BroadcastCommand): Promise<BroadcastResult> {
    const createdAt = new Date().toISOString();
    if (cmd.audience === 'all') {
      const message: StoredMessage = {
        k: '',
        bizType: BROADCAST_BIZ_TYPE,
        outerBizId: '',
        title: cmd.title,
        content: cmd.content,
        needPush: false,
        createdAt,
        ...(cmd.url ? { url: cmd.url } : {}),
      };
      const { id, duplicate } = await this.store.broadcast(JSON.stringify({ ...message, outerBizId: 'all' }), MAX_BROADCASTS_KEPT, cmd.requestId);
      if (!duplicate) {
        this.feed.invalidate();
        this.metrics.broadcasts.inc({ audience: 'all' });
      }
      return { broadcastId: id, audience: 'all', written: 0, duplicates: 0, duplicate };
    }
    // Under a request id, each inbox's write is idempotent on it: a retry writes only where the first did not.
    const broadcastId = cmd.requestId ?? randomUUID();
    const accounts = [...new Set(cmd.audience)];
    const results = await mapLimit(accounts, FAN_OUT, async (accountId) => {
      const r = await this.write(
        { accountId, bizType: BROADCAST_BIZ_TYPE, outerBizId: broadcastId, title: cmd.title, content: cmd.content, url: cmd.url, needPush: false, createdAt },
        'broadcast',
      );
      crashPoint('messages.broadcast.after-inbox');
      return r;
    });
    const duplicates = results.filter((r) => r.duplicate).length;
    const written = results.length - duplicates;
    if (written > 0) this.metrics.broadcasts.inc({ audience: 'accounts' });
    return { broadcastId, audience: 'accounts', written, duplicates, duplicate: written === 0 };
  }

  /** A pull after taking in any broadcasts the account has not seen yet (one script call when there are none). */
  private async pullSynced(accountId: string, after: string | undefined, limit: number): Promise<Extract<PullResult, { sync: false }>> {
    const feed = await this.feed.get();
    for (let round = 0; round < 3; round++) {
      const r = await this.store.pull(accountId, after, limit, feed.latest);
      if (!r.sync) return r;
      let synced = await this.store.syncBroadcasts(accountId, feed.from, feed.entries.filter((e) => e.seq > r.mark).map(asInboxEntry));
      // An account that has not pulled for longer than the feed covers: read what it missed from Redis.
      while (!synced.done) {
        const { entries } = await this.store.recentBroadcasts(synced.mark, MAX_BROADCASTS_KEPT);
        synced = await this.store.syncBroadcasts(accountId, synced.mark, entries.map(asInboxEntry));
      }
    }
    throw new Error(`pull for ${accountId} kept asking for broadcasts`);
  }

  private count(created: boolean, source: Source): void {
    (created ? this.metrics.written : this.metrics.duplicates).inc({ source });
  }
}

/** The idempotency field of (bizType, outerBizId): the "k" of a stored message. */
function idemField(bizType: string, outerBizId: string): string {
  return `${bizType}|${outerBizId}`;
}

export function toStored(cmd: WriteMessageCommand): StoredMessage {
  return {
    k: idemField(cmd.bizType, cmd.outerBizId),
    bizType: cmd.bizType,
    outerBizId: cmd.outerBizId,
    title: cmd.title,
    content: cmd.content,
    ...(cmd.url ? { url: cmd.url } : {}),
    ...(cmd.logoUrl ? { logoUrl: cmd.logoUrl } : {}),
    needPush: cmd.needPush ?? false,
    createdAt: cmd.createdAt ?? new Date().toISOString(),
  };
}

function toDto(row: PageRow): MessageDto {
  const { k: _k, ...fields } = row.body;
  return {
    msgId: row.msgId,
    ...fields,
    ...(fields.bizType === BROADCAST_BIZ_TYPE ? { broadcastId: fields.outerBizId } : {}),
    storedAt: new Date(Math.floor(Number(row.msgId) / 1000)).toISOString(),
    read: row.read,
  };
}

/** A broadcast-to-all as it enters an inbox: its outerBizId is the broadcast id. */
function asInboxEntry(e: BroadcastEntry): BroadcastEntry {
  return { ...e, body: JSON.stringify({ ...(JSON.parse(e.body) as StoredMessage), outerBizId: e.id }) };
}

/** Runs `fn` over `items` with at most `limit` in flight, keeping order. */
async function mapLimit<T, R>(items: T[], limit: number, fn: (item: T, index: number) => Promise<R>): Promise<R[]> {
  const out = new Array<R>(items.length);
  let next = 0;
  const worker = async () => {
    while (next < items.length) {
      const i = next++;
      out[i] = await fn(items[i], i);
    }
  };
  await Promise.all(Array.from({ length: Math.min(limit, items.length) }, worker));
  return out;
}
