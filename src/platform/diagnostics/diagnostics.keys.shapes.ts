import { ACCOUNT_ID_RE } from '../core/ids';
import type { KeyShape } from '../redis/key-shape';
import { DIAGNOSTICS_KEYS, visitsKey } from './diagnostics.keys';

/** Labels of the visit counters (TouchDto). */
const LABEL_RE = /^[A-Za-z0-9_-]{1,32}$/;

/** The diagnostics keys, for the key-space proof (src/platform/redis/key-space.spec.ts). */
export const KEY_SHAPES: KeyShape[] = [
  {
    name: 'diagnostics visits',
    space: DIAGNOSTICS_KEYS,
    kind: 'a',
    part: 'visits',
    rules: [ACCOUNT_ID_RE, LABEL_RE],
    make: (b, [acc, label]) => visitsKey(b, acc, label),
    carries: ([acc, label]) => ({ id: acc, partId: label }),
  },
];
