import { defineKeySpace, KeyBuilder } from '../redis/key-builder';

/**
 * The red envelopes' keys:
 * - `{a:<activityId>}`: an activity's record (configuration, state, seed, progress), and the step it is stalled at;
 * - `{p:<activityId>:<pool>}`: one sub-pool's envelopes, staging list, grabs, claims, envelope states, stats, credit
 *   stream and its dead letters (every key one grab touches, in one slot);
 * - `{i}`: activities by end time, for the instances to resume their jobs.
 */
export const RED_ENVELOPE_KEYS = defineKeySpace('red-envelope', { a: 'id', p: 'id', i: 'fixed' });

/** The parts of a sub-pool. */
export const POOL_PARTS = ['pool', 'staging', 'grabs', 'claims', 'env', 'stats', 'credits', 'dead'] as const;
export type PoolKeys = Record<(typeof POOL_PARTS)[number], string>;

export function poolKeys(builder: KeyBuilder, activityId: string, pool: number): PoolKeys {
  const t = builder.tagged(RED_ENVELOPE_KEYS, 'p', `${activityId}:${pool}`);
  return Object.fromEntries(POOL_PARTS.map((p) => [p, t.key(p)])) as PoolKeys;
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
 * `p:<activityId>:<pool>` one activity and one sub-pool: no activity id spells another's envelope or sub-pool.
 */
export const envelopeId = (activityId: string, index: number) => `${activityId}.${index}`;
