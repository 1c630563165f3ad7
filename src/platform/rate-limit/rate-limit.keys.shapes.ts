import { ACCOUNT_ID_RE, SIGNED_MERCHANT_ID_RE } from '../core/ids';
import type { KeyShape } from '../redis/key-shape';
import { RATE_LIMIT_KEYS, rateLimitKey } from './rate-limit.keys';

/** Service and admin key names (load-config's credential names). */
const CREDENTIAL_NAME_RE = /^[A-Za-z0-9_.-]{1,64}$/;
/** Anonymous callers go by their IP address; any id the key builder takes stands in for it. */
const ANY_TAG_ID_RE = /^[^{}\s]{1,128}$/;

/** The rate-limit windows, for the key-space proof (src/platform/redis/key-space.spec.ts). */
export const KEY_SHAPES: KeyShape[] = (
  [
    ['user', ACCOUNT_ID_RE],
    ['merchant', SIGNED_MERCHANT_ID_RE],
    ['service', CREDENTIAL_NAME_RE],
    ['admin', CREDENTIAL_NAME_RE],
    ['anonymous', ANY_TAG_ID_RE],
  ] as const
).map(([kind, rule]): KeyShape => ({
  name: `rate window of ${kind}`,
  space: RATE_LIMIT_KEYS,
  kind,
  part: 'window',
  rules: [rule],
  make: (b, [id]) => rateLimitKey(b, { kind, id }),
  carries: ([id]) => ({ id }),
}));
