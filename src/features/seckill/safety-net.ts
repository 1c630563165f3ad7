import { Injectable, Logger } from '@nestjs/common';
import { eachLimit } from '../../platform/core/for-each-limit';
import { DelayQueueService } from '../../engines/delay-queue/delay-queue.service';
import type { Delivery } from '../../engines/delay-queue/delay-queue.types';
import { KeyBuilder } from '../../platform/redis/key-builder';
import { configured, PeriodicJob } from '../../engines/workers/worker-declarations';
import { type Activity, ActivityCatalog } from './activity-catalog';
import { ReservationsService } from './reservations.service';
import { type ShardKeys, sweepLeaseKey } from './seckill.keys';
import { SeckillConfig } from './seckill.config';
import { SeckillMetrics } from './seckill.metrics';
import { SeckillStore } from './seckill.store';
import type { ProductRecord, ReservationLocation } from './seckill.types';
import { productTopic } from './product-sold-out';

/**
 * The safety net's former delay queue (one entry per reservation, scheduled before the script, by earlier releases).
 * Reservations are now found by the sweep of the shards' due sets; nothing schedules into this queue any more and no
 * processor consumes it: each sweep round drains the entries that have come due (see drainFormerQueue).
 */
export const SAFETY_NET_QUEUE = 'seckill-reservations';
/** Entries of the former queue claimed per call, and its policy (as its processor had): 50 deliveries, 1 s doubling to 1 min. */
const FORMER_QUEUE_BATCH = 100;
const FORMER_QUEUE_RETRY = { attempts: 50, backoff: { initialMs: 1000, maxMs: 60_000 } };
/** Shards of one sweep read at once, and due reservations one read of a shard returns (a sweep reads on while a shard has more). */
const SWEEP_PARALLEL = 32;
const SWEEP_BATCH = 100;
/** Members of one read settled at once. */
const SWEEP_MEMBERS_PARALLEL = 20;
/** Activities read from the index per call by the sweep. */
const SWEEP_PAGE = 1000;
/** A claim's member in a due set (lua/features/seckill/includes/seckill-shard.lua). */
const CLAIM_DUE_RE = /^c\|(sk_[0-9a-f]{24})\|(.+)$/;

interface SafetyNetPayload extends ReservationLocation {
  accountId: string;
}

/**
 * The reservations' safety net: whatever no order outcome settled (its order event lost or dead-lettered, or its
 * process killed before the order was made) is settled as the buyer's cancel is, a grace after its expiry. One
 * mechanism: a periodic job under a lease (one instance per round) sweeps the shards' due sets, then the entries of
 * the former safety-net queue that have come due.
 */
@Injectable()
export class SafetyNet {
  private readonly logger = new Logger(SafetyNet.name);

  constructor(
    private readonly reservations: ReservationsService,
    private readonly store: SeckillStore,
    private readonly catalog: ActivityCatalog,
    private readonly queue: DelayQueueService,
    private readonly metrics: SeckillMetrics,
    private readonly config: SeckillConfig,
  ) {}

  /** One round: the due sets, then the former queue. A round that fails is logged by the job and the next one tries again. */
  @PeriodicJob({
    name: 'seckill:safety-net-sweep',
    everyMs: configured('SECKILL_SAFETY_NET_SWEEP_MS', (get) => get(SeckillConfig).safetyNetSweepMs),
    lease: { key: (get) => sweepLeaseKey(get(KeyBuilder)), shown: 'seckill:{i}:sweep' },
    metric: 'seckill_safety_net_releases_total',
    drains: [SAFETY_NET_QUEUE],
  })
  async round(): Promise<void> {
    const readUntil = Date.now() + this.config.safetyNetSweepMs / 2;
    await this.sweep(readUntil);
    await this.drainFormerQueue(readUntil);
  }

  /**
   * The entries of the former safety-net queue that have come due (its processor would have had them now), each
   * settled as before: a reservation still RESERVED is released, its order closed first. An entry whose settle fails
   * is retried after its backoff, and dead-lettered after 50 deliveries (GET /admin/delay-queues/seckill-reservations/dead).
   */
  async drainFormerQueue(readUntil = Infinity): Promise<number> {
    let handled = 0;
    for (;;) {
      const r = await this.queue.drainDue<SafetyNetPayload>(SAFETY_NET_QUEUE, (d) => this.safetyNet(d), {
        batch: FORMER_QUEUE_BATCH,
        retry: FORMER_QUEUE_RETRY,
      });
      handled += r.handled;
      if (!r.more || Date.now() >= readUntil) return handled;
    }
  }

  /**
   * The safety net's sweep: every reservation still in its shard's due set a grace after its expiry (its order event
   * lost or dead-lettered, or its process killed before the order was made) is settled as the buyer's cancel is:
   * the order made unpayable first, then RELEASED, or SOLD when the order turns out paid. One instance sweeps per
   * round (the job's lease); a reservation that cannot be settled now stays in the set for the next round. Answers
   * how many it released.
   */
  async sweep(readUntil = Date.now() + this.config.safetyNetSweepMs / 2): Promise<number> {
    const now = await this.store.now();
    const upTo = now - this.config.safetyNetGraceMs;
    let released = 0;
    // Every live activity, a page at a time (a week of activities can be more than a page).
    const ids: string[] = [];
    for (;;) {
      const page = await this.store.activityIds(now - this.config.liveRetentionMs, SWEEP_PAGE, ids.length);
      ids.push(...page);
      if (page.length < SWEEP_PAGE) break;
    }
    for (const activityId of ids) {
      const a = await this.catalog.get(activityId);
      if (!a || a.startsAt > now) continue;
      const shards = a.products.flatMap((p) => Array.from({ length: p.shards }, (_, k) => [p, k] as const));
      await eachLimit(shards, SWEEP_PARALLEL, async ([p, k]) => {
        const keys = this.store.shard(a.activityId, p, k);
        // A settled member leaves the set; one that could not be settled stays, and the next read starts after those,
        // so they never hold up the rest. Reads go on while a shard has more due, within half a round.
        let stayed = 0;
        for (;;) {
          const batch = await this.store.due(keys, upTo, SWEEP_BATCH, stayed);
          // The members of a read are settled up to SWEEP_MEMBERS_PARALLEL at a time: every unpaid reservation expires
          // through here. Settling is idempotent and safe to run twice at once (a claim and its master record in one read).
          await eachLimit(batch, SWEEP_MEMBERS_PARALLEL, async (member) => {
            try {
              if (await this.settleDue(a, p, k, keys, member)) released++;
            } catch (err) {
              stayed++;
              this.logger.warn({ member, err: (err as Error).message }, 'the safety net could not settle a reservation; the next sweep tries again');
            }
          });
          if (batch.length < SWEEP_BATCH || Date.now() >= readUntil) break;
        }
      });
    }
    return released;
  }

  /**
   * One member of shard `k`'s due set, settled: a reservation taken there, or (`c|<id>|<account>`) a claim held there
   * for a reservation to be taken on another shard (a claim releases no units: it is freed, or left to its
   * reservation). True when it released a reservation.
   */
  private async settleDue(a: Activity, p: ProductRecord, k: number, keys: ShardKeys, member: string): Promise<boolean> {
    const claim = CLAIM_DUE_RE.exec(member);
    if (claim) {
      const [, rsvId, accountId] = claim;
      const home: ReservationLocation = { activityId: a.activityId, productId: p.productId, shard: k, home: k, requestId: '' };
      // A reservation taken over several shards: settled whole, from its master record here.
      if ((await this.store.record(keys, rsvId))?.n !== undefined) {
        const released = (await this.reservations.settle(accountId, rsvId, home, 'close')) === 'RELEASED';
        await this.store.forgetDue(keys, member);
        if (released) this.metrics.safetyNetReleases.inc();
        return released;
      }
      for (let j = 0; j < p.shards; j++) {
        const taken = j === k ? null : await this.store.record(this.store.shard(a.activityId, p, j), rsvId);
        if (!taken) continue;
        // Taken on shard j: still RESERVED, its own due entry there settles it (and frees this claim) when it is due,
        // which may be later than this claim (a retried request takes it later); sold, it keeps its claim for good;
        // released, the claim is freed now.
        if (taken.s === 'RELEASED') await this.reservations.settle(accountId, rsvId, { ...home, shard: j }, 'close');
        await this.store.forgetDue(keys, member);
        return false;
      }
      // Never taken elsewhere (its process died between the claim and the take): the claim alone is freed.
      await this.reservations.settle(accountId, rsvId, home, 'close');
      await this.store.forgetDue(keys, member);
      return false;
    }
    const record = await this.store.record(keys, member);
    // The scripts add and remove due entries with the record: none without one, but a stray one goes.
    if (!record || record.s !== 'RESERVED') {
      await this.store.forgetDue(keys, member);
      return false;
    }
    // A part of a reservation taken over several shards is settled whole, from its master record on the home shard;
    // a part of another attempt than its master's (left by a walk that outlived its turn) is its own: given back here.
    if (record.n !== undefined && k !== record.h) {
      const master = await this.store.record(this.store.shard(a.activityId, p, record.h), member);
      if ((master?.g ?? 0) !== (record.g ?? 0)) {
        const released = (await this.store.release(keys, member, record.a, productTopic(a.activityId, p.productId))).stock === 'RELEASED';
        if (released) this.metrics.safetyNetReleases.inc();
        return released;
      }
    }
    const at = record.n !== undefined ? record.h : k;
    const loc: ReservationLocation = { activityId: a.activityId, productId: p.productId, shard: at, home: record.h, requestId: '' };
    const released = (await this.reservations.settle(record.a, member, loc, 'close')) === 'RELEASED';
    if (released) this.metrics.safetyNetReleases.inc();
    return released;
  }

  /** An entry of the former safety-net queue: a reservation still RESERVED is released (its order closed first). */
  private async safetyNet(d: Delivery<SafetyNetPayload>): Promise<void> {
    const { accountId, ...fromPayload } = d.payload;
    const loc = (await this.store.locate(accountId, d.id)) ?? (await this.probe(d.id, fromPayload));
    if (!loc) return;
    const state = await this.reservations.settle(accountId, d.id, loc, 'close');
    if (state === 'RELEASED') this.metrics.safetyNetReleases.inc();
  }

  /** Where a reservation the buyer's index does not know is: the shard that holds its record, else its home. */
  private async probe(rsvId: string, loc: ReservationLocation): Promise<ReservationLocation | null> {
    const a = await this.catalog.get(loc.activityId);
    const p = a?.productsById.get(loc.productId);
    if (!a || !p) return null;
    for (let k = 0; k < p.shards; k++) {
      if (await this.store.record(this.store.shard(a.activityId, p, k), rsvId)) return { ...loc, shard: k };
    }
    return loc;
  }
}
