import type { Caller } from '../http/caller';
import { defineKeySpace, KeyBuilder } from '../redis/key-builder';

/** Rate-limit windows, by caller kind and caller id (anonymous callers by IP). */
export const RATE_LIMIT_KEYS = defineKeySpace('rate-limit', { user: 'id', merchant: 'id', service: 'id', admin: 'id', anonymous: 'id' });

/** One caller's window, under the tag `{<caller kind>:<caller id>}` (anonymous callers by IP). */
export function rateLimitKey(builder: KeyBuilder, caller: Caller): string {
  return builder.tagged(RATE_LIMIT_KEYS, caller.kind, caller.id).key('window');
}
