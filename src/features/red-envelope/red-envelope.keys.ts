import { defineKeySpace, KeyBuilder } from '../../platform/redis/key-builder';
import { SPREAD_TAGS, spreadTagId } from '../../platform/redis/slot-tags';

/**
 * The red envelopes' keys:
 * - `{a:<activityId>}`: an activity's record (configuration, state, seed, progress), and the step it is stalled at;
 * - `{p:<activityId>:<pool>:<4 chars>}`: one sub-pool's envelopes, staging list, grabs, claims, envelope states, stats,
 *   credit stream and its dead letters (every key one grab touches, in one slot); the 4 chars put sub-pool k of n in the
 *   k-th of n equal slot ranges (rotated per activity), so an activity's sub-pools spread evenly over the cluster's
 *   masters (src/platform/redis/slot-tags.ts). Activities created before (their record has no `tags`) keep `{p:<activityId>:<pool>}`;
 * - `{i}`: activities by end time, for the instances to resume their jobs.
 */
export const RED_ENVELOPE_KEYS = defineKeySpace('red-envelope', { a: 'id', p: 'id', i: 'fixed' });

/** The parts of a sub-pool. */
export const POOL_PARTS = ['pool', 'staging', 'grabs', 'claims', 'env', 'stats', 'credits', 'dead'] as const;
export type PoolKeys = Record<(typeof POOL_PARTS)[number], string>;

/**
 * Where an activity's sub-pools are: its record. `tags` 2 (SPREAD_TAGS): spread over the slot ranges, sub-pool k of
 * `subPools`; absent: the first tags, the sub-pool's number.
 */
export interface PoolPlacement {
  activityId: string;
  subPools: number;
  tags?: typeof SPREAD_TAGS;
}

export function poolKeys(builder: KeyBuilder, a: PoolPlacement, pool: number): PoolKeys {
  const t = builder.tagged(RED_ENVELOPE_KEYS, 'p', poolTagId(a, pool));
  return Object.fromEntries(POOL_PARTS.map((p) => [p, t.key(p)])) as PoolKeys;
}

/** The id in a sub-pool's hash tag. */
export function poolTagId(a: PoolPlacement, pool: number): string {
  const id = `${a.activityId}:${pool}`;
  return a.tags === SPREAD_TAGS ? spreadTagId('p', id, a.activityId, pool, a.subPools) : id;
}

export function activityKey(builder: KeyBuilder, activityId: string): string {
  return builder.tagged(RED_ENVELOPE_KEYS, 'a', activityId).key('activity');
}

/** The steps the activity cannot get past, while it cannot (a hash: step → JSON {reason, since}). */
export function stallsKey(builder: KeyBuilder, activityId: string): string {
  return builder.tagged(RED_ENVELOPE_KEYS, 'a', activityId).key('stalls');
}

export function activityIndexKey(builder: KeyBuilder): string {
  return builder.tagged(RED_ENVELOPE_KEYS, 'i').key('activities');
}

/**
 * An envelope's id: the activity and its place in the split (also its wallet reference, kind red-envelope). Activity
 * ids hold no '.' nor ':' (kernel ACTIVITY_ID_RE), so an envelope id names one activity and one index, and a sub-pool's tag
 * `p:<activityId>:<pool>[:<4 chars>]` one activity and one sub-pool: no activity id spells another's envelope or sub-pool.
 */
export const envelopeId = (activityId: string, index: number) => `${activityId}.${index}`;
