/**
 * The message center's in-process API: plain commands and results, no HTTP
 * types. Controllers map their DTOs to these; other modules (close-reminder,
 * seckill, red-envelope) call MessagesService and PendingActionsService with
 * them directly. Field rules are the HTTP ones (see dto/write-message.dto.ts).
 */

/** The furthest ahead a message may expire: 90 days after the Redis clock. */
export const MAX_MESSAGE_EXPIRY_MS = 90 * 24 * 60 * 60 * 1000;

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
   * When the message stops showing (epoch ms, Redis clock): from then on no
   * pull, unread count or get returns it, and its storage is reclaimed by the
   * next script on the inbox. Must be after the Redis clock and at most
   * MAX_MESSAGE_EXPIRY_MS ahead of it. Omitted: kept until retention drops it.
   */
  expiresAt?: number;
}

export interface WriteMessageResult {
  /** The message id (the original one for a duplicate); '' when the key was withdrawn. */
  msgId: string;
  /** True when (bizType, outerBizId) was already written (or withdrawn) for this account: nothing was stored. */
  duplicate: boolean;
  /** Present (true) only when (bizType, outerBizId) was withdrawn for this account: nothing was stored, and nothing will be. */
  withdrawn?: true;
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
}

export interface BroadcastResult {
  broadcastId: string;
  audience: 'all' | 'accounts';
  written: number;
  duplicates: number;
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
