import type { KeyShape } from '../redis/key-shape';
import { AUTH_KEYS, nonceKey } from './auth.keys';
import { SIGNED_MERCHANT_ID_RE } from '../core/ids';
import { NONCE_RE } from './merchant-verifier.service';

/** The auth keys, for the key-space proof (src/platform/redis/key-space.spec.ts). */
export const KEY_SHAPES: KeyShape[] = [
  {
    name: 'merchant nonce',
    space: AUTH_KEYS,
    kind: 'm',
    part: 'nonce',
    rules: [SIGNED_MERCHANT_ID_RE, NONCE_RE],
    make: (b, [m, n]) => nonceKey(b, m, n),
    carries: ([m, n]) => ({ id: m, partId: n }),
  },
];
