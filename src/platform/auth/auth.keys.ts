import { defineKeySpace, KeyBuilder } from '../redis/key-builder';

/** Signed-request nonces, by merchant (`{m:<merchantId>}`). */
export const AUTH_KEYS = defineKeySpace('auth', { m: 'id' });

/** A merchant's used nonce, under the merchant's tag `{m:<merchantId>}`. */
export function nonceKey(builder: KeyBuilder, merchantId: string, nonce: string): string {
  return builder.tagged(AUTH_KEYS, 'm', merchantId).key('nonce', nonce);
}
