import type { KeyShape } from '../redis/key-shape';
import { ACTIVITY_ID_RE } from '../kernel/ids';
import { SPREAD_TAGS } from '../redis/slot-tags';
import { activityIndexKey, activityKey, POOL_PARTS, poolKeys, type PoolPlacement, poolTagId, RED_ENVELOPE_KEYS, stallsKey } from './red-envelope-keys';

const POOL_RE = /^(0|[1-9][0-9]?)$/;
/** How the activity's sub-pool tags are made: `first` (the sub-pool's number) or `spread` (slot-tags). */
const TAGS_RE = /^(first|spread)$/;

/** The activity record's placement of the arguments: spread over (at least) 16 sub-pools, so that sub-pool k is one of them. */
const placementOf = (activityId: string, pool: string, tags: string): PoolPlacement => {
  const subPools = Math.max(16, Number(pool) + 1);
  return tags === 'spread' ? { activityId, subPools, tags: SPREAD_TAGS } : { activityId, subPools };
};

/** The red envelopes' keys, for the key-space proof (src/redis/key-space.spec.ts). */
export const KEY_SHAPES: KeyShape[] = [
  ...POOL_PARTS.map((part): KeyShape => ({
    name: `sub-pool ${part}`,
    space: RED_ENVELOPE_KEYS,
    kind: 'p',
    part,
    rules: [ACTIVITY_ID_RE, POOL_RE, TAGS_RE],
    make: (b, [activityId, pool, tags]) => poolKeys(b, placementOf(activityId, pool, tags), Number(pool))[part],
    carries: ([activityId, pool, tags]) => ({ id: poolTagId(placementOf(activityId, pool, tags), Number(pool)) }),
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
