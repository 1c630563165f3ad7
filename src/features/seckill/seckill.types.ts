import type { SPREAD_TAGS } from '../../platform/redis/slot-tags';

/** A product of an activity, as stored. */
export interface ProductRecord {
  productId: string;
  title: string;
  /** Minor units. */
  price: number;
  currency: string;
  stock: number;
  /** Overrides the activity's per-user limit for this product. */
  perUserLimit?: number;
  /** Sub-stocks on different hash slots (1: none). */
  shards: number;
  /**
   * How its shards' hash tags are made: 2, spread over equal slot ranges (src/platform/redis/slot-tags.ts), for products loaded
   * since; absent, the first scheme (shard number and salt), kept by products loaded before.
   */
  tags?: typeof SPREAD_TAGS;
  /** First scheme only: per shard, the tag salt that placed it on a cluster master (absent or 0: none). */
  salts?: number[];
}

/** An activity as stored (times epoch ms). */
export interface ActivityRecord {
  activityId: string;
  merchantId: string;
  title: string;
  startsAt: number;
  endsAt: number;
  payWindowMinutes: number;
  perUserLimit: number;
  /** True when an eligibility list was given: only those accounts may buy. */
  restricted: boolean;
  eligibleCount: number;
  products: ProductRecord[];
  /** This load's id: every product shard carries it, so a leftover of another load is told apart. */
  gen: string;
  /**
   * 2: the reservation ids of this activity include `gen`, so an activity id used again (after its keys expired)
   * never meets an earlier sale's reservations or their orders; absent on activities loaded before (ids without it).
   */
  ids?: 2;
  /** sha256 of the create request's payload: the same activityId with another payload is a 409 (edit with PUT). */
  fingerprint: string;
  createdAt: number;
  updatedAt: number;
  /** When ops ended the sale early (0: not). */
  endedAt: number;
}

/** One shard's live stock. */
export interface ShardStock {
  gen: string;
  initial: number;
  available: number;
  reserved: number;
  sold: number;
  released: number;
  startsAt: number;
  endsAt: number;
  endedAt: number;
  limit: number;
}

export type ReservationState = 'RESERVED' | 'SOLD' | 'RELEASED';

/** A reservation record as the scripts store it (see lua/features/seckill/includes/seckill-shard.lua). */
export interface ReservationRecord {
  s: ReservationState;
  /** Account. */
  a: string;
  /** Quantity. */
  q: number;
  /** Expires at. */
  e: number;
  /** The buyer's home shard. */
  h: number;
  /** Created at. */
  c: number;
  /** Settled at (sold or released; 0 until then). */
  t: number;
  /** A reservation taken over several shards: its whole quantity (q is this shard's part, maybe 0), on every part. */
  n?: number;
  /** Its master record (on the home shard): the other shards it takes from, in order, comma-separated. */
  p?: string;
  /** Its master record: 1 when it was given back because its whole quantity could not be taken. */
  f?: number;
  /** A fresh attempt of a reservation given back (f) and made again under its id: 1.. (absent: the first), on its master and parts. */
  g?: number;
  /** Its order's id (on a whole reservation and a master record; absent on reservations made before it was recorded). */
  o?: string;
}

/** The units a reservation holds in all (of every shard it was taken from). */
export const unitsOf = (r: ReservationRecord): number => r.n ?? r.q;

/** Where a reservation is: what the buyer's index keeps. */
export interface ReservationLocation {
  activityId: string;
  productId: string;
  /** The shard holding its units. */
  shard: number;
  /** The buyer's home shard (holds its units against the per-user limit). */
  home: number;
  requestId: string;
  /** When the reservation was made (epoch ms; absent in entries written before it was kept): the buyer's list is newest first. */
  at?: number;
}
