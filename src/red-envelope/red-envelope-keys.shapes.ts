import type { KeyShape } from '../redis/key-shape';
import { ACTIVITY_ID_RE } from '../kernel/ids';
import { activityIndexKey, activityKey, POOL_PARTS, poolKeys, RED_ENVELOPE_KEYS, stallsKey } from './red-envelope-keys';

const POOL_RE = /^(0|[1-9][0-9]?)$/;

/** The red envelopes' keys, for the key-space proof (src/redis/key-space.spec.ts). */
export const KEY_SHAPES: KeyShape[] = [
  ...POOL_PARTS.map((part): KeyShape => ({
    name: `sub-pool ${part}`,
    space: RED_ENVELOPE_KEYS,
    kind: 'p',
    part,
    rules: [ACTIVITY_ID_RE, POOL_RE],
    make: (b, [activityId, pool]) => poolKeys(b, activityId, Number(pool))[part],
    carries: ([activityId, pool]) => ({ id: `${activityId}:${Number(pool)}` }),
  })),
  {
    name: 'activity',
    space: RED_ENVELOPE_KEYS,
    kind: 'a',
    part: 'activity',
    rules: [ACTIVITY_ID_RE],
    make: (b, [activityId]) => activityKey(b, activityId),
    carries: ([activityId]) => ({ id: activityId }),
  },
  {
    name: 'activity stalled step',
    space: RED_ENVELOPE_KEYS,
    kind: 'a',
    part: 'stalls',
    rules: [ACTIVITY_ID_RE],
    make: (b, [activityId]) => stallsKey(b, activityId),
    carries: ([activityId]) => ({ id: activityId }),
  },
  {
    name: 'activity index',
    space: RED_ENVELOPE_KEYS,
    kind: 'i',
    part: 'activities',
    rules: [],
    make: (b) => activityIndexKey(b),
    carries: () => ({}),
  },
];
