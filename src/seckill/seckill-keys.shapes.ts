import { ACCOUNT_ID_RE, ACTIVITY_ID_RE } from '../kernel/ids';
import type { KeyShape } from '../redis/key-shape';
import {
  ACTIVITY_PARTS,
  activityIndexKey,
  activityKeys,
  buyerIndexKey,
  PRODUCT_ID_RE,
  SECKILL_KEYS,
  SHARD_PARTS,
  shardKeys,
  shardTagId,
  sweepLeaseKey,
} from './seckill-keys';

const SHARD_RE = /^(0|[1-9][0-9]?)$/;

/** The flash sales' keys, for the key-space proof (src/redis/key-space.spec.ts). */
export const KEY_SHAPES: KeyShape[] = [
  ...SHARD_PARTS.map((part): KeyShape => ({
    name: `product shard ${part}`,
    space: SECKILL_KEYS,
    kind: 'p',
    part,
    rules: [ACTIVITY_ID_RE, PRODUCT_ID_RE, SHARD_RE],
    make: (b, [activityId, productId, shard]) => shardKeys(b, activityId, productId, Number(shard))[part],
    carries: ([activityId, productId, shard]) => ({ id: shardTagId(activityId, productId, Number(shard)) }),
  })),
  ...ACTIVITY_PARTS.map((part): KeyShape => ({
    name: `activity ${part}`,
    space: SECKILL_KEYS,
    kind: 'a',
    part,
    rules: [ACTIVITY_ID_RE],
    make: (b, [activityId]) => activityKeys(b, activityId)[part],
    carries: ([activityId]) => ({ id: activityId }),
  })),
  {
    name: 'buyer reservations',
    space: SECKILL_KEYS,
    kind: 'u',
    part: 'reservations',
    rules: [ACCOUNT_ID_RE],
    make: (b, [accountId]) => buyerIndexKey(b, accountId),
    carries: ([accountId]) => ({ id: accountId }),
  },
  {
    name: 'activity index',
    space: SECKILL_KEYS,
    kind: 'i',
    part: 'activities',
    rules: [],
    make: (b) => activityIndexKey(b),
    carries: () => ({}),
  },
  {
    name: 'safety-net sweep lease',
    space: SECKILL_KEYS,
    kind: 'i',
    part: 'sweep',
    rules: [],
    make: (b) => sweepLeaseKey(b),
    carries: () => ({}),
  },
];
