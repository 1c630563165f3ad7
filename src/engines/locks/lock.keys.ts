import { defineKeySpace, KeyBuilder } from '../../platform/redis/key-builder';

/** The locks' keys, by lock name (`{n:<name>}`). */
export const LOCK_KEYS = defineKeySpace('locks', { n: 'id' });

/** The keys of one lock, all under the lock's tag `{n:<name>}` (one cluster slot). */
export interface LockKeys {
  /** The holders hash (see lua/engines/locks/includes/lock-holders.lua). */
  hash: string;
  /** The fencing counter. */
  fence: string;
  /** The pub/sub channel its releases are published on. */
  channel: string;
}

/** `name` must be a valid lock name (LOCK_NAME_RE); the key builder refuses anything that is not a valid tag id. */
export function lockKeys(builder: KeyBuilder, name: string): LockKeys {
  const t = builder.tagged(LOCK_KEYS, 'n', name);
  return { hash: t.key('h'), fence: t.key('fence'), channel: t.key('released') };
}
