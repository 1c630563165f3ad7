import { Injectable } from '@nestjs/common';
import { EMPTY, takeFromAny } from '../../engines/sharded-pool/fall-over';
import { homeOf } from '../../engines/sharded-pool/home';
import { SingleFlightCatalog } from '../../engines/sharded-pool/single-flight-catalog';
import { SoldOutMemory } from '../../engines/sharded-pool/sold-out-memory';
import { RedEnvelopeActivities } from './red-envelope-activities.service';
import { CreditingService } from './crediting.service';
import { RedEnvelopeNotFoundError } from './red-envelope.errors';
import { RedEnvelopeMetrics } from './red-envelope.metrics';
import { type GrabReply, RedEnvelopeStore } from './red-envelope.store';
import type { ActivityRecord, GrabResult } from './red-envelope.types';

export interface MyEnvelope {
  envelopeId: string;
  amount: number;
  /** PENDING until the wallet holds it, CREDITED after; DEAD when its crediting was given up (ops re-drive it). */
  crediting: 'PENDING' | 'CREDITED' | 'DEAD';
}

/**
 * Grabbing, for app users: one script on the user's home sub-pool (the window, the user's record, the pop, the
 * record and the credit-stream entry in one step); when it is empty, the sharded-pool engine's fall-over takes the
 * envelope from a sub-pool that still holds some, wherever it is. Once every sub-pool is empty, each instance answers
 * NONE_LEFT without calling Redis (the engine's sold-out memory: envelopes never come back).
 */
@Injectable()
export class GrabService {
  private readonly records = new SingleFlightCatalog<ActivityRecord>((id) => this.store.activity(id));
  private readonly emptied = new SoldOutMemory(Infinity);

  constructor(
    private readonly store: RedEnvelopeStore,
    private readonly activities: RedEnvelopeActivities,
    private readonly crediting: CreditingService,
    private readonly metrics: RedEnvelopeMetrics,
  ) {}

  async grab(accountId: string, activityId: string): Promise<GrabResult> {
    const a = await this.activity(activityId);
    if (this.emptied.isSoldOut(activityId)) return this.answer({ status: 'NONE_LEFT' }, 'NONE_LEFT_LOCAL');
    if (a.state === 'FUNDING' || a.state === 'LOADING') return this.answer({ status: 'NOT_STARTED' });
    if (a.state === 'READY' && !this.crediting.isRunning(a.activityId)) void this.crediting.start(a).catch(() => undefined);
    const home = homeOf(accountId, a.activityId, a.subPools);
    const homeKeys = this.store.pool(a, home);
    const r = await this.store.grab(homeKeys, accountId, a.subPools > 1);
    if (r.outcome === 'FALL_OVER' || r.outcome === 'CLAIMED') return this.fallOver(a, accountId, home, r.ordinal);
    if (r.outcome === 'NONE_LEFT') this.emptied.remember(a.activityId);
    return this.answer(resultOf(r));
  }

  /** The user's envelope(s) in this activity and their crediting state (404 when none). */
  async mine(accountId: string, activityId: string): Promise<MyEnvelope[]> {
    const a = await this.activity(activityId);
    const held = await this.store.grabsOf(this.store.pool(a, homeOf(accountId, a.activityId, a.subPools)), accountId);
    if (held.length === 0) throw new RedEnvelopeNotFoundError('envelope');
    return Promise.all(
      held.map(async (entry) => {
        const [envelopeId, amount, pool] = entry.split(':');
        const state = await this.store.envelopeState(this.store.pool(a, Number(pool)), envelopeId);
        return { envelopeId, amount: Number(amount), crediting: state === 'credited' ? 'CREDITED' : state === 'dead' ? 'DEAD' : 'PENDING' } as MyEnvelope;
      }),
    );
  }

  /** What the rain screen needs: the state, the times and how many envelopes are left (no amounts). */
  async screen(activityId: string) {
    const a = await this.activity(activityId);
    const stats = await this.activities.poolStats(a);
    return {
      activityId: a.activityId,
      title: a.title,
      state: this.activities.stateOf(a),
      startsAt: new Date(a.startsAt).toISOString(),
      endsAt: new Date(a.endsAt).toISOString(),
      count: a.count,
      left: stats.reduce((s, p) => s + p.leftCount, 0),
    };
  }

  /**
   * The home sub-pool is empty and holds the user's claim (so the per-user limit is counted there): the engine's
   * fall-over reads every other sub-pool at once (its envelopes left, and the user's envelope of this ordinal when a
   * copy of this tap took it there already) and takes one from the sub-pools that hold some; the claim is then
   * settled on the home sub-pool (confirm-2.lua). NONE_LEFT only when every sub-pool is empty.
   */
  private async fallOver(a: ActivityRecord, accountId: string, home: number, ordinal: number): Promise<GrabResult> {
    const homeKeys = this.store.pool(a, home);
    const t = await takeFromAny<{ k: number; r: GrabReply }>({
      home,
      shards: a.subPools,
      read: async (pools) => {
        const seen = await this.store.fallOverView(
          pools.map((k) => this.store.pool(a, k)),
          accountId,
        );
        return seen.map(({ left, held }, i) => {
          const entry = held.find((e) => e.split(':')[3] === String(ordinal));
          if (!entry) return { left };
          const [envelopeId, amount] = entry.split(':');
          return { left, mine: { k: pools[i], r: { outcome: 'EXISTING', envelopeId, amount: Number(amount) } } };
        });
      },
      visit: async (k) => {
        const r = await this.store.take(this.store.pool(a, k), accountId, home, ordinal);
        return r.outcome === 'EMPTY' ? EMPTY : { k, r };
      },
    });
    if (t === EMPTY) {
      await this.store.confirm(homeKeys, accountId, '');
      this.emptied.remember(a.activityId);
      return this.answer({ status: 'NONE_LEFT' });
    }
    const { k, r } = t;
    if (r.outcome === 'GRABBED' || r.outcome === 'EXISTING') {
      await this.store.confirm(homeKeys, accountId, `${r.envelopeId}:${r.amount}:${k}:${ordinal}`);
      if (r.outcome === 'GRABBED') this.metrics.fallOvers.inc();
      return this.answer({ status: r.outcome === 'GRABBED' ? 'GRABBED' : 'ALREADY_GRABBED', envelopeId: r.envelopeId, amount: r.amount });
    }
    await this.store.confirm(homeKeys, accountId, '');
    return this.answer(resultOf(r));
  }

  private answer(r: GrabResult, label: string = r.status): GrabResult {
    this.metrics.grabs.inc({ status: label });
    return r;
  }

  private async activity(activityId: string): Promise<ActivityRecord> {
    const a = await this.records.get(activityId);
    if (!a) throw new RedEnvelopeNotFoundError();
    return a;
  }
}

function resultOf(r: GrabReply): GrabResult {
  switch (r.outcome) {
    case 'GRABBED':
    case 'ALREADY_GRABBED':
    case 'EXISTING':
      return { status: r.outcome === 'EXISTING' ? 'ALREADY_GRABBED' : r.outcome, envelopeId: r.envelopeId, amount: r.amount };
    case 'NOT_STARTED':
    case 'NOT_LOADED':
      return { status: 'NOT_STARTED' };
    case 'ENDED':
      return { status: 'ENDED' };
    default:
      return { status: 'NONE_LEFT' };
  }
}
