import { randomUUID } from 'node:crypto';
import Redis from 'ioredis';
import { forEachLimit } from '../../src/platform/core/for-each-limit';

/**
 * The two flash-sale reservation designs the seckill benchmark sets against the
 * module's one-script reservation, run directly against Redis with ioredis (no
 * HTTP), and a load runner that drives any design with the shape the HTTP run
 * uses (distinct buyers, a few tries each, a fixed number in flight).
 *
 * Both baselines are several separate commands with decisions made in the
 * client between them, and neither checks a per-buyer limit: that is what is
 * being measured, not a bug to fix here.
 *
 * - {@link LlenLpushDesign}: the design the seckill article in shared/seeds
 *   describes (written from its description): one list per product; LLEN,
 *   check `count + quantity <= stock`, LPUSH `quantity` copies of a token
 *   (uuid + buyer), and when the LPUSH reply exceeds the stock, LREM of those
 *   copies (the compensation).
 * - {@link DecrCheckDesign}: DECRBY the stock counter, and when the result is
 *   negative INCRBY it back (the compensation) and refuse.
 */

/** A reservation's answer. */
export type ReserveOutcome = 'ok' | 'sold-out';

/** What a design counted about its own commands since {@link SeckillDesign.resetCounters}. */
export interface DesignCounters {
  /** reserve() calls. */
  requests: number;
  ok: number;
  /** Answered sold-out. */
  refused: number;
  /** Undo commands sent after an over-reservation (LREM, INCRBY). */
  compensations: number;
  /** Most units ever reserved at one moment, as Redis answered it (LPUSH reply; stock − lowest DECRBY reply); may exceed the stock transiently. */
  peakReserved: number;
  /** Redis commands sent by reserve() (round trips: none of them is pipelined). */
  commands: number;
}

/** The state of one product after a run, read from Redis. */
export interface DesignFinalState {
  /** Units held at the end (list length; stock − counter). */
  sold: number;
  /** The raw value read (list length or counter). */
  raw: number;
  /** Units per buyer, when the design stores who holds them (the list design); else undefined. */
  unitsByBuyer?: Map<string, number>;
}

/** A reservation design the load runner can drive: a baseline below, or an adapter over the module's store. */
export interface SeckillDesign {
  /** Short id for tables and JSON (`llen-lpush`, `decr-check`, …). */
  readonly id: string;
  /** One line saying what it does. */
  readonly label: string;
  /** Makes `productKey` a product with `stock` units, none sold (deletes what was there). */
  setup(productKey: string, stock: number): Promise<void>;
  /** One buyer's attempt to reserve `quantity` units of a product with `stock` units. */
  reserve(productKey: string, buyerId: string, quantity: number, stock: number): Promise<ReserveOutcome>;
  /** Reads the product's final state. */
  inspect(productKey: string, stock: number): Promise<DesignFinalState>;
  /** Counters since the last reset (a copy). */
  counters(): DesignCounters;
  resetCounters(): void;
}

const zeroCounters = (): DesignCounters => ({ requests: 0, ok: 0, refused: 0, compensations: 0, peakReserved: 0, commands: 0 });

/** A client per call, chosen round-robin from a pool (one connection is fine too). */
type Clients = Redis | Redis[];
function picker(clients: Clients): () => Redis {
  const pool = Array.isArray(clients) ? clients : [clients];
  if (pool.length === 0) throw new Error('at least one Redis connection is needed');
  let n = 0;
  return () => pool[n++ % pool.length];
}

/**
 * The seed's design: one list per product, a token per unit.
 *
 * reserve: LLEN; refuse if `count + quantity > stock`; LPUSH `quantity` copies
 * of `uuid:buyerId`; if the reply exceeds the stock, LREM those copies
 * (counted as a compensation) and refuse. Four commands at most, each its own
 * round trip. Between LLEN and LPUSH others push, so the list can be longer
 * than the stock for a moment (counted in `peakReserved`); a buyer who reads
 * that moment's length is refused although the units come back afterwards.
 * No per-buyer limit.
 */
export class LlenLpushDesign implements SeckillDesign {
  readonly id = 'llen-lpush';
  readonly label = "seed's design: LLEN, check, LPUSH quantity tokens, LREM them if the reply exceeds the stock (separate commands)";
  private readonly client: () => Redis;
  private c = zeroCounters();

  /** `clients`: one connection or a pool used round-robin. */
  constructor(clients: Clients) {
    this.client = picker(clients);
  }

  async setup(productKey: string, _stock: number): Promise<void> {
    await this.client().del(productKey);
  }

  async reserve(productKey: string, buyerId: string, quantity: number, stock: number): Promise<ReserveOutcome> {
    const r = this.client();
    this.c.requests++;
    this.c.commands++;
    const count = await r.llen(productKey);
    if (count + quantity > stock) {
      this.c.refused++;
      return 'sold-out';
    }
    const token = `${randomUUID()}:${buyerId}`;
    this.c.commands++;
    const length = await r.lpush(productKey, ...Array.from({ length: quantity }, () => token));
    this.c.peakReserved = Math.max(this.c.peakReserved, length);
    if (length > stock) {
      this.c.commands++;
      this.c.compensations++;
      await r.lrem(productKey, quantity, token);
      this.c.refused++;
      return 'sold-out';
    }
    this.c.ok++;
    return 'ok';
  }

  async inspect(productKey: string, _stock: number): Promise<DesignFinalState> {
    const tokens = await this.client().lrange(productKey, 0, -1);
    const unitsByBuyer = new Map<string, number>();
    for (const t of tokens) {
      // randomUUID() is 36 characters, then ':' and the buyer id.
      const buyer = t.slice(37);
      unitsByBuyer.set(buyer, (unitsByBuyer.get(buyer) ?? 0) + 1);
    }
    return { sold: tokens.length, raw: tokens.length, unitsByBuyer };
  }

  counters(): DesignCounters {
    return { ...this.c };
  }

  resetCounters(): void {
    this.c = zeroCounters();
  }
}

/**
 * Naive DECR-then-check: DECRBY the product's counter by the quantity; if the
 * result is negative, INCRBY it back (counted as a compensation) and refuse.
 * Two round trips on a refusal. While refused requests are between their
 * DECRBY and INCRBY the counter reads lower than the units left, so a buyer
 * asking for fewer units than remain can be refused. No per-buyer limit.
 */
export class DecrCheckDesign implements SeckillDesign {
  readonly id = 'decr-check';
  readonly label = 'naive DECRBY, then INCRBY back and refuse when the result is negative (separate commands)';
  private readonly client: () => Redis;
  private c = zeroCounters();

  /** `clients`: one connection or a pool used round-robin. */
  constructor(clients: Clients) {
    this.client = picker(clients);
  }

  async setup(productKey: string, stock: number): Promise<void> {
    await this.client().set(productKey, stock);
  }

  async reserve(productKey: string, _buyerId: string, quantity: number, stock: number): Promise<ReserveOutcome> {
    const r = this.client();
    this.c.requests++;
    this.c.commands++;
    const left = await r.decrby(productKey, quantity);
    this.c.peakReserved = Math.max(this.c.peakReserved, stock - left);
    if (left < 0) {
      this.c.commands++;
      this.c.compensations++;
      await r.incrby(productKey, quantity);
      this.c.refused++;
      return 'sold-out';
    }
    this.c.ok++;
    return 'ok';
  }

  async inspect(productKey: string, stock: number): Promise<DesignFinalState> {
    const raw = Number(await this.client().get(productKey));
    return { sold: stock - raw, raw };
  }

  counters(): DesignCounters {
    return { ...this.c };
  }

  resetCounters(): void {
    this.c = zeroCounters();
  }
}

// ---------------------------------------------------------------------------------------------
// The load

/** The order of the requests: a buyer's tries back to back (`grouped`: they overlap in flight), every buyer once per round (`rounds`), or a seeded shuffle. */
export type LoadOrder = 'grouped' | 'rounds' | 'shuffled';

/** The load shape. Defaults are the HTTP run's: 10,000 buyers × 3 tries, 200 in flight, 1,000 units of 1. */
export interface SeckillLoadOptions {
  buyers: number;
  triesPerBuyer: number;
  /** Requests in flight at once. */
  concurrency: number;
  stock: number;
  /** Units per request, fixed or per (buyer index, try). */
  quantity: number | ((buyer: number, attempt: number) => number);
  order: LoadOrder;
  /** Seed of the `shuffled` order. */
  seed: number;
  /** The product's key (default `bench:seckill:{p:1}:<design id>`). */
  productKey?: string;
  /** A buyer is over the limit when the run gave it more than this many units (default 1). */
  perBuyerLimit: number;
}

export const DEFAULT_SECKILL_LOAD: SeckillLoadOptions = {
  buyers: 10_000,
  triesPerBuyer: 3,
  concurrency: 200,
  stock: 1000,
  quantity: 1,
  order: 'grouped',
  seed: 1,
  perBuyerLimit: 1,
};

/** One request of the load: which buyer, its try number (0-based) and the units asked for. */
export interface PlannedRequest {
  buyer: number;
  attempt: number;
  quantity: number;
}

/** The buyer id of buyer index `i` (the same ids for every design and the HTTP run). */
export const seckillBuyerId = (i: number) => `buyer-${i}`;

/** mulberry32: a small seeded PRNG, so a shuffled order is the same for every design. */
function prng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** The requests of a load, in the order they are started; the HTTP run can replay the same list. */
export function seckillLoadPlan(options: Partial<SeckillLoadOptions> = {}): PlannedRequest[] {
  const o = { ...DEFAULT_SECKILL_LOAD, ...options };
  const qty = typeof o.quantity === 'function' ? o.quantity : () => o.quantity as number;
  const plan: PlannedRequest[] = [];
  if (o.order === 'rounds') {
    for (let attempt = 0; attempt < o.triesPerBuyer; attempt++)
      for (let buyer = 0; buyer < o.buyers; buyer++) plan.push({ buyer, attempt, quantity: qty(buyer, attempt) });
  } else {
    for (let buyer = 0; buyer < o.buyers; buyer++)
      for (let attempt = 0; attempt < o.triesPerBuyer; attempt++) plan.push({ buyer, attempt, quantity: qty(buyer, attempt) });
  }
  if (o.order === 'shuffled') {
    const rand = prng(o.seed);
    for (let i = plan.length - 1; i > 0; i--) {
      const j = Math.floor(rand() * (i + 1));
      [plan[i], plan[j]] = [plan[j], plan[i]];
    }
  }
  return plan;
}

/** One run of a design under a load: the design's counters, what the answers and Redis say at the end, and the speed. */
export interface BaselineRunResult extends DesignCounters {
  design: string;
  label: string;
  stock: number;
  /** Units the `ok` answers granted (sum of their quantities). */
  unitsGranted: number;
  final: DesignFinalState;
  /** Units held at the end beyond the stock (0 when none). */
  oversoldUnits: number;
  /** Units still unsold at the end although some request was refused (0 when none was refused). */
  undersoldUnits: number;
  /**
   * Refusals answered while the units granted so far left room for the request (stock − granted ≥ its
   * quantity): buyers turned away by a transient count (a list longer than the stock for a moment, a
   * counter below zero) although units remained. Counted as the answers arrive, so a lower bound.
   */
  refusedWithStockLeft: number;
  /** Units by which the count in Redis exceeded the stock at its peak (0 when it never did). */
  peakOverStock: number;
  /** Buyers that received more than `perBuyerLimit` units, and the units beyond the limit. */
  buyersOverLimit: number;
  unitsOverLimit: number;
  perBuyerLimit: number;
  /** Units granted (by the answers) differ from units held (in Redis): a lost or phantom reservation. */
  grantedMatchesHeld: boolean;
  /** Requests that threw (connection errors); not counted as ok or refused. */
  errors: number;
  /** The first error's message, when there was one. */
  firstError?: string;
  wallS: number;
  /** Requests answered per second over the run. */
  rps: number;
  /** Redis commands per request. */
  commandsPerRequest: number;
  concurrency: number;
}

/**
 * Sets the product up, runs the load on `design` (`concurrency` requests in
 * flight, in the order of {@link seckillLoadPlan}) and reads the end state.
 * Oversold: units held beyond the stock at the end. Undersold: units left
 * unsold at the end while some request was refused. Buyers over the limit are
 * counted from the answers (every design) and, when the design stores holders,
 * from Redis (the larger count is reported).
 */
export async function runBaselineLoad(design: SeckillDesign, options: Partial<SeckillLoadOptions> = {}): Promise<BaselineRunResult> {
  const o = { ...DEFAULT_SECKILL_LOAD, ...options };
  const productKey = o.productKey ?? `bench:seckill:{p:1}:${design.id}`;
  const plan = seckillLoadPlan(o);
  await design.setup(productKey, o.stock);
  design.resetCounters();

  const granted = new Map<number, number>();
  let unitsGranted = 0;
  let errors = 0;
  let firstError: string | undefined;
  let refusedWithStockLeft = 0;
  const t0 = performance.now();
  await forEachLimit(plan.length, o.concurrency, async (i) => {
    const p = plan[i];
    try {
      if ((await design.reserve(productKey, seckillBuyerId(p.buyer), p.quantity, o.stock)) === 'ok') {
        granted.set(p.buyer, (granted.get(p.buyer) ?? 0) + p.quantity);
        unitsGranted += p.quantity;
      } else if (o.stock - unitsGranted >= p.quantity) refusedWithStockLeft++;
    } catch (err) {
      errors++;
      firstError ??= (err as Error).message;
    }
  });
  const wallS = (performance.now() - t0) / 1000;
  const c = design.counters();
  const final = await design.inspect(productKey, o.stock);

  const overLimit = (units: Iterable<number>) => {
    let buyers = 0;
    let extra = 0;
    for (const u of units)
      if (u > o.perBuyerLimit) {
        buyers++;
        extra += u - o.perBuyerLimit;
      }
    return { buyers, extra };
  };
  const fromAnswers = overLimit(granted.values());
  const fromRedis = final.unitsByBuyer ? overLimit(final.unitsByBuyer.values()) : fromAnswers;
  const over = fromRedis.buyers > fromAnswers.buyers ? fromRedis : fromAnswers;

  return {
    ...c,
    design: design.id,
    label: design.label,
    stock: o.stock,
    unitsGranted,
    final,
    oversoldUnits: Math.max(0, final.sold - o.stock),
    undersoldUnits: c.refused > 0 ? Math.max(0, o.stock - final.sold) : 0,
    refusedWithStockLeft,
    peakOverStock: Math.max(0, c.peakReserved - o.stock),
    buyersOverLimit: over.buyers,
    unitsOverLimit: over.extra,
    perBuyerLimit: o.perBuyerLimit,
    grantedMatchesHeld: unitsGranted === final.sold,
    errors,
    firstError,
    wallS,
    rps: wallS > 0 ? plan.length / wallS : 0,
    commandsPerRequest: c.requests > 0 ? c.commands / c.requests : 0,
    concurrency: o.concurrency,
  };
}

/**
 * Opens `n` ioredis connections to `url` (for a design's pool) and returns them
 * with a function that closes them all.
 */
export async function openConnections(url: string, n = 1): Promise<{ clients: Redis[]; close(): Promise<void> }> {
  const clients = Array.from({ length: n }, () => new Redis(url, { lazyConnect: true, maxRetriesPerRequest: 1 }));
  await Promise.all(clients.map((c) => c.connect()));
  return {
    clients,
    async close() {
      await Promise.all(clients.map((c) => c.quit().catch(() => c.disconnect())));
    },
  };
}
