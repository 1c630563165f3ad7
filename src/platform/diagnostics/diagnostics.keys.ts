import { defineKeySpace, KeyBuilder } from '../redis/key-builder';

/** The diagnostics visit counters, by account (`{a:<accountId>}`). */
export const DIAGNOSTICS_KEYS = defineKeySpace('diagnostics', { a: 'id' });

/** An account's visit counter for one label, under the account's tag `{a:<accountId>}`. */
export function visitsKey(builder: KeyBuilder, accountId: string, label: string): string {
  return builder.tagged(DIAGNOSTICS_KEYS, 'a', accountId).key('visits', label);
}
