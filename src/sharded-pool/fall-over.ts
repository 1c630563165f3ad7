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
 * One unit for a buyer whose home shard is empty: the other shards are read at once, and only those holding units
 * are visited, in visiting order, until one gives it. A shard read with units can be emptied by others before the
 * visit: then the shards are read again, at most `rounds` times in all. Answers the first visit's answer that is
 * not EMPTY, or EMPTY when every shard was read or found empty: the pool is empty then (as far as any reader could
 * see), never earlier. Work: `rounds` reads and at most `rounds` × (shards − 1) visits.
 */
export async function takeFromAny<R>(o: {
  home: number;
  shards: number;
  readLeft: ReadLeft;
  visit: (shard: number) => Promise<R | typeof EMPTY>;
  rounds?: number;
}): Promise<R | typeof EMPTY> {
  const rounds = o.rounds ?? 2;
  for (let round = 0; round < rounds; round++) {
    const { plan } = await stockMap(o.home, o.shards, o.readLeft);
    if (plan.length === 0) return EMPTY;
    for (const k of plan) {
      const r = await o.visit(k);
      if (r !== EMPTY) return r;
    }
  }
  return EMPTY;
}
