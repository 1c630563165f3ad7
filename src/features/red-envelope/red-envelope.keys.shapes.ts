import { fixedKeyShape, idKeyShape, type KeyShape, partKeyShapes } from '../../platform/redis/key-shape';
import { ACTIVITY_ID_RE } from '../../platform/core/ids';
import { SPREAD_TAGS } from '../../platform/redis/slot-tags';
import { activityIndexKey, activityKey, POOL_PARTS, poolKeys, type PoolPlacement, poolTagId, RED_ENVELOPE_KEYS, stallsKey } from './red-envelope.keys';

const POOL_RE = /^(0|[1-9][0-9]?)$/;
/** How the activity's sub-pool tags are made: `first` (the sub-pool's number) or `spread` (slot-tags). */
const TAGS_RE = /^(first|spread)$/;

/** The activity record's placement of the arguments: spread over (at least) 16 sub-pools, so that sub-pool k is one of them. */
const placementOf = (activityId: string, pool: string, tags: string): PoolPlacement => {
  const subPools = Math.max(16, Number(pool) + 1);
  return tags === 'spread' ? { activityId, subPools, tags: SPREAD_TAGS } : { activityId, subPools };
};

/** The red envelopes' keys, for the key-space proof (src/platform/redis/key-space.spec.ts). */
export const KEY_SHAPES: KeyShape[] = [
  ...partKeyShapes(
    RED_ENVELOPE_KEYS,
    'p',
    POOL_PARTS,
    'sub-pool',
    [ACTIVITY_ID_RE, POOL_RE, TAGS_RE],
    (b, [activityId, pool, tags]) => poolKeys(b, placementOf(activityId, pool, tags), Number(pool)),
    ([activityId, pool, tags]) => ({ id: poolTagId(placementOf(activityId, pool, tags), Number(pool)) }),
  ),
  idKeyShape(RED_ENVELOPE_KEYS, 'a', 'activity', 'activity', ACTIVITY_ID_RE, activityKey),
  idKeyShape(RED_ENVELOPE_KEYS, 'a', 'stalls', 'activity stalled step', ACTIVITY_ID_RE, stallsKey),
  fixedKeyShape(RED_ENVELOPE_KEYS, 'i', 'activities', 'activity index', activityIndexKey),
];
