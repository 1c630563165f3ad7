import { ACCOUNT_ID_RE, ACTIVITY_ID_RE } from '../../platform/core/ids';
import { fixedKeyShape, idKeyShape, type KeyShape, partKeyShapes } from '../../platform/redis/key-shape';
import { SPREAD_TAGS } from '../../platform/redis/slot-tags';
import {
  ACTIVITY_PARTS,
  activityIndexKey,
  activityKeys,
  buyerIndexKey,
  PRODUCT_ID_RE,
  SECKILL_KEYS,
  SHARD_PARTS,
  shardKeys,
  type ShardPlacement,
  shardTagId,
  sweepLeaseKey,
} from './seckill.keys';

const SHARD_RE = /^(0|[1-9][0-9]?)$/;
/** How the product's shard tags are made: `first` (the shard number), a salt (and that salt), `spread` (slot-tags). */
const TAGS_RE = /^(first|spread|[1-9][0-9]{0,3})$/;

/** The product record's placement of the arguments: spread over (at least) 16 shards, so that shard k is one of them. */
const placementOf = (shard: string, tags: string): ShardPlacement => {
  const k = Number(shard);
  if (tags === 'spread') return { shards: Math.max(16, k + 1), tags: SPREAD_TAGS };
  return { shards: k + 1, ...(tags === 'first' ? {} : { salts: Object.assign(new Array<number>(k + 1).fill(0), { [k]: Number(tags) }) }) };
};

/** The flash sales' keys, for the key-space proof (src/platform/redis/key-space.spec.ts). */
export const KEY_SHAPES: KeyShape[] = [
  ...partKeyShapes(
    SECKILL_KEYS,
    'p',
    SHARD_PARTS,
    'product shard',
    [ACTIVITY_ID_RE, PRODUCT_ID_RE, SHARD_RE, TAGS_RE],
    (b, [activityId, productId, shard, tags]) => shardKeys(b, activityId, productId, Number(shard), placementOf(shard, tags)),
    ([activityId, productId, shard, tags]) => ({ id: shardTagId(activityId, productId, Number(shard), placementOf(shard, tags)) }),
  ),
  ...partKeyShapes(
    SECKILL_KEYS,
    'a',
    ACTIVITY_PARTS,
    'activity',
    [ACTIVITY_ID_RE],
    (b, [activityId]) => activityKeys(b, activityId),
    ([activityId]) => ({ id: activityId }),
  ),
  idKeyShape(SECKILL_KEYS, 'u', 'reservations', 'buyer reservations', ACCOUNT_ID_RE, buyerIndexKey),
  fixedKeyShape(SECKILL_KEYS, 'i', 'activities', 'activity index', activityIndexKey),
  fixedKeyShape(SECKILL_KEYS, 'i', 'sweep', 'safety-net sweep lease', sweepLeaseKey),
];
