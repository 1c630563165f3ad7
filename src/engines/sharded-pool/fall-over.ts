import { othersOf } from './home';

/** How many units each of the given shards has left, read together (the reads go out at once: one round trip). */
export type ReadLeft = (shards: readonly number[]) => Promise<number[]>;

/** Where a pool's units are, read at once: what the home shard has, the total, and the other shards that have some. */
export interface StockMap {
  home: number;
  total: number;
  /** The shards other than home that hold units, in the order a fall-over visits them (home + 1, home + 2, …). */
  plan: number[];
}

/**
 * Reads every shard of the pool at once and names the other shards that hold units, in visiting order. The work is
 * one round trip whatever the shard count, and the plan names every shard that had stock when read: a fall-over
 * that follows it never misses stock on a shard it would not have visited.
 */
export async function stockMap(home: number, shards: number, readLeft: ReadLeft): Promise<StockMap> {
  const others = othersOf(home, shards);
  const [homeLeft, ...left] = await readLeft([home, ...others]);
  return {
    home: homeLeft,
    total: left.reduce((s, n) => s + n, homeLeft),
    plan: others.filter((_, i) => left[i] > 0),
  };
}

/** A shard visit's answer: something taken (or a refusal to pass on as it is), or this shard was empty. */
export const EMPTY = Symbol('empty');

/**
 * One shard as a fall-over reads it: the units it has left, and what this very request (an earlier or concurrent
 * copy of it) already took there, if it did. Read the units first and the request's record second, on the same
 * connection (one slot, so Redis answers them in that order): a record missed by the second read was not there when
 * the first read saw units, so the shard is in the plan and its visit finds the record.
 */
export interface ShardSeen<R> {
  left: number;
  mine?: R;
}

/**
 * One unit for a buyer whose home shard is empty (units never come back to a shard once it is empty): every other
 * shard is read at once, and only those holding units are visited, in visiting order, until one gives it. Copies of
 * one request (retried, or sent twice at once) take one unit in all: a copy that finds what another copy took
 * answers that, and every copy walks the shards in the same order, so a shard's first take decides (the visit
 * script finds the request's record before taking). A shard read with units can be emptied by others before the
 * visit: then the shards are read again, at most `rounds` times in all. Answers the first visit's answer that is not
 * EMPTY, or EMPTY when every shard was read or found empty: the pool is empty then, never earlier. Work: `rounds`
 * reads (one round trip each) and at most `rounds` × (shards − 1) visits.
 */
export async function takeFromAny<R>(o: {
  home: number;
  shards: number;
  read: (shards: readonly number[]) => Promise<ShardSeen<R>[]>;
  visit: (shard: number) => Promise<R | typeof EMPTY>;
  rounds?: number;
}): Promise<R | typeof EMPTY> {
  const rounds = o.rounds ?? 2;
  const others = othersOf(o.home, o.shards);
  for (let round = 0; round < rounds; round++) {
    const seen = await o.read(others);
    const mine = seen.find((s) => s.mine !== undefined)?.mine;
    if (mine !== undefined) return mine;
    const plan = others.filter((_, i) => seen[i].left > 0);
    if (plan.length === 0) return EMPTY;
    for (const k of plan) {
      const r = await o.visit(k);
      if (r !== EMPTY) return r;
    }
  }
  return EMPTY;
}
