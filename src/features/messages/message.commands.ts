/**
 * The message center's in-process API: plain commands and results, no HTTP
 * types. Controllers map their DTOs to these; other modules (close-reminder,
 * seckill, red-envelope) call MessagesService and PendingActionsService with
 * them directly. Field rules are the HTTP ones (see dto/write-message.dto.ts).
 */

/** The longest a message may be given to live: 90 days. */
export const MAX_MESSAGE_TTL_MS = 90 * 24 * 60 * 60 * 1000;
/** The latest `expiresAt` taken: 9999-12-31T23:59:59.999Z, the last time ISO 8601's four-digit years can write (catches µs or ns given for ms). */
export const MAX_MESSAGE_EXPIRES_AT = 253_402_300_799_999;

/** One message for one account, idempotent on (bizType, outerBizId). */
export interface WriteMessageCommand {
  accountId: string;
  bizType: string;
  outerBizId: string;
  title: string;
  content: string;
  url?: string;
  logoUrl?: string;
  needPush?: boolean;
  /** When the business event happened (ISO 8601 with a zone); defaults to now. */
  createdAt?: string;
  /**
   * How long the message shows, in ms from its write (on the Redis clock),
   * an integer from 1 to MAX_MESSAGE_TTL_MS: from then on no pull, unread
   * count or get returns it, and the next script on the inbox reclaims its
   * storage. A duplicate keeps the original's expiry. Omitted: kept until
   * retention drops it. (Relative, not a date, so that no caller's clock
   * decides and no example in the API document goes stale.)
   */
  ttlMs?: number;
  /**
   * When the message stops showing: epoch ms on the Redis clock (an order's
   * `expiresAt`, say), an integer from 1 to MAX_MESSAGE_EXPIRES_AT. Whether
   * it has passed is decided in the write script on the Redis clock: at or
   * before its now, nothing is stored and the result is `expired: true`.
   * With `ttlMs` too, the earlier of the two applies. A duplicate keeps the
   * original's expiry. There is no 90-day bound as for `ttlMs`: a time
   * after the retention time changes nothing (retention removes the message
   * first), and a fixed date in the API document stays a valid example.
   */
  expiresAt?: number;
}

export interface WriteMessageResult {
  /** The message id (the original one for a duplicate); '' when the key was withdrawn or the message had already expired. */
  msgId: string;
  /** True when (bizType, outerBizId) was already written (or withdrawn) for this account: nothing was stored. */
  duplicate: boolean;
  /** Present (true) only when (bizType, outerBizId) was withdrawn for this account: nothing was stored, and nothing will be. */
  withdrawn?: true;
  /** Present (true) only when `expiresAt` was at or before the Redis clock's now: nothing was stored (duplicate false). */
  expired?: true;
}

/** A batch item the caller found invalid: it fails alone, with this error. */
export interface InvalidBatchItem {
  invalid: string;
}

export interface WriteBatchItemResult {
  index: number;
  /** 201 new, 200 duplicate, withdrawn or already expired, 400 invalid (nothing stored). */
  status: 200 | 201 | 400;
  msgId?: string;
  withdrawn?: true;
  expired?: true;
  error?: string;
}

export interface WriteBatchResult {
  results: WriteBatchItemResult[];
  created: number;
  duplicates: number;
  /** Items whose `expiresAt` had already passed: nothing stored. */
  expired: number;
  invalid: number;
}

/** Take back the message with (bizType, outerBizId) from one account's inbox. */
export interface WithdrawMessageCommand {
  accountId: string;
  bizType: string;
  outerBizId: string;
}

export interface WithdrawMessageResult {
  /** True when a message the app could see was removed; false when there was none (never written, expired, already withdrawn). */
  withdrawn: boolean;
}

/** A message to every account ("all") or to a list of accounts. */
export interface BroadcastCommand {
  title: string;
  content: string;
  url?: string;
  audience: 'all' | string[];
  /** The caller's idempotency key: the same request id again makes no second broadcast. */
  requestId?: string;
}

export interface BroadcastResult {
  broadcastId: string;
  audience: 'all' | 'accounts';
  written: number;
  duplicates: number;
  /** True when `requestId` was broadcast before: nothing new was written. */
  duplicate: boolean;
}

/** A user started an action the app reminds them about if it is not finished. */
export interface StartPendingActionCommand {
  accountId: string;
  /** One of PENDING_ACTION_NAMES. */
  bizType: string;
  /** Kept with the reminder; at most 1 KiB as JSON. */
  context?: Record<string, unknown>;
}

export interface StartPendingActionResult {
  actionId: string;
  /** When the reminder is due unless the action is finished first (epoch ms, Redis clock). */
  remindAt: number;
}

/** The user finished the action: no reminder. */
export interface FinishPendingActionCommand {
  accountId: string;
  bizType: string;
}
