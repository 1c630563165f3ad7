import { defineKeySpace, KeyBuilder } from '../../platform/redis/key-builder';

/** The message center's keys: one account's inbox (`{a:<accountId>}`); the broadcast feed (`{bc}`). */
export const MESSAGE_KEYS = defineKeySpace('messages', { a: 'id', bc: 'fixed' });
/** Message ids are the account's server sequence numbers. */
export const MSG_ID_RE = /^[1-9][0-9]{0,16}$/;

/**
 * Idempotency fields the service writes itself (a reminder's) begin with `!`, which no bizType holds
 * (`bizType|outerBizId` is a caller's): no message a caller writes or withdraws can spell one.
 */
export const SYSTEM_IDEM_PREFIX = '!';

/** The parts of an account's inbox, in the scripts' KEYS order. */
export const INBOX_PARTS = ['inbox', 'bodies', 'idem', 'read', 'meta', 'expiry', 'withdrawn'] as const;

/** The seven keys of one account's inbox (see lua/features/messages/includes/messages-inbox.lua), all under the account's tag `{a:<accountId>}`. */
export function inboxKeys(builder: KeyBuilder, accountId: string): string[] {
  const t = builder.tagged(MESSAGE_KEYS, 'a', accountId);
  return INBOX_PARTS.map((p) => t.key(p));
}

/** The broadcast-to-everyone stream: one slot for the whole service, under the fixed tag `{bc}` (no account id can spell it). */
export function broadcastKeys(builder: KeyBuilder): string[] {
  const t = builder.tagged(MESSAGE_KEYS, 'bc');
  return ['stream', 'bodies', 'meta'].map((p) => t.key(p));
}
