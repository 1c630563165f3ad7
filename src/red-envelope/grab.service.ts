import { Injectable } from '@nestjs/common';
import { LRUCache } from 'lru-cache';
import { RedEnvelopeActivities } from './activities.service';
import { CreditingService } from './crediting.service';
import { homePool } from './red-envelope-keys';
import { RedEnvelopeConfig } from './red-envelope.config';
import { RedEnvelopeNotFoundError } from './red-envelope.errors';
import { RedEnvelopeMetrics } from './red-envelope.metrics';
import { type GrabReply, RedEnvelopeStore } from './red-envelope.store';
import type { ActivityRecord, GrabResult } from './red-envelope.types';

/** How long an instance uses an activity record it read, ms. */
const RECORD_TTL_MS = 1000;

export interface MyEnvelope {
  envelopeId: string;
  amount: number;
  /** PENDING until the wallet holds it, CREDITED after; DEAD when its crediting was given up (ops re-drive it). */
  crediting: 'PENDING' | 'CREDITED' | 'DEAD';
}

/**
 * Grabbing, for app users: one script on the user's home sub-pool (the window, the user's record, the pop, the
 * record and the credit-stream entry in one step), with bounded fall-over to the other sub-pools. Once every
 * sub-pool is empty, each instance answers NONE_LEFT without calling Redis (envelopes never come back).
 */
@Injectable()
export class GrabService {
  private readonly records = new LRUCache<string, { at: number; value: Promise<ActivityRecord | null> }>({ max: 10_000 });
  private readonly emptied = new Set<string>();

  constructor(
    private readonly store: RedEnvelopeStore,
    private readonly activities: RedEnvelopeActivities,
    private readonly crediting: CreditingService,
    private readonly metrics: RedEnvelopeMetrics,
    private readonly config: RedEnvelopeConfig,
  ) {}

  async grab(accountId: string, activityId: string): Promise<GrabResult> {
    const a = await this.activity(activityId);
    if (this.emptied.has(activityId)) return this.answer({ status: 'NONE_LEFT' }, 'NONE_LEFT_LOCAL');
    if (a.state === 'FUNDING' || a.state === 'LOADING') return this.answer({ status: 'NOT_STARTED' });
    if (a.state === 'READY' && !this.crediting.isRunning(a.activityId)) void this.crediting.start(a).catch(() => undefined);
    const home = homePool(accountId, a.activityId, a.subPools);
    const homeKeys = this.store.pool(a, home);
    const r = await this.store.grab(homeKeys, accountId, a.subPools > 1);
    if (r.outcome === 'FALL_OVER' || r.outcome === 'CLAIMED') return this.fallOver(a, accountId, home, r.ordinal, r.outcome === 'FALL_OVER');
    if (r.outcome === 'NONE_LEFT') this.emptied.add(a.activityId);
    return this.answer(resultOf(r));
  }

  /** The user's envelope(s) in this activity and their crediting state (404 when none). */
  async mine(accountId: string, activityId: string): Promise<MyEnvelope[]> {
    const a = await this.activity(activityId);
    const held = await this.store.grabsOf(this.store.pool(a, homePool(accountId, a.activityId, a.subPools)), accountId);
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
   * The home sub-pool is empty and holds the user's claim (so the per-user limit is counted there): the user's
   * envelope may already be on another sub-pool (a retried tap), else one is taken from the next sub-pools, at most
   * RED_ENVELOPE_FALLOVER_TRIES; the claim is then settled on the home sub-pool (confirm-2.lua).
   */
  private async fallOver(a: ActivityRecord, accountId: string, home: number, ordinal: number, fresh: boolean): Promise<GrabResult> {
    const homeKeys = this.store.pool(a, home);
    const others = Array.from({ length: a.subPools - 1 }, (_, i) => (home + 1 + i) % a.subPools);
    if (!fresh) {
      // A fall-over for this envelope began before: it may have taken it already (an entry with its ordinal).
      for (const k of others) {
        const entry = (await this.store.grabsOf(this.store.pool(a, k), accountId)).find((e) => e.split(':')[3] === String(ordinal));
        if (entry) {
          await this.store.confirm(homeKeys, accountId, entry);
          const [envelopeId, amount] = entry.split(':');
          return this.answer({ status: 'ALREADY_GRABBED', envelopeId, amount: Number(amount) });
        }
      }
    }
    let emptySeen = 0;
    for (const k of others.slice(0, this.config.fallOverTries)) {
      const t = await this.store.take(this.store.pool(a, k), accountId, home, ordinal);
      if (t.outcome === 'GRABBED' || t.outcome === 'EXISTING') {
        await this.store.confirm(homeKeys, accountId, `${t.envelopeId}:${t.amount}:${k}:${ordinal}`);
        if (t.outcome === 'GRABBED') this.metrics.fallOvers.inc();
        return this.answer({ status: t.outcome === 'GRABBED' ? 'GRABBED' : 'ALREADY_GRABBED', envelopeId: t.envelopeId, amount: t.amount });
      }
      if (t.outcome === 'EMPTY') emptySeen++;
      else {
        await this.store.confirm(homeKeys, accountId, '');
        return this.answer(resultOf(t));
      }
    }
    await this.store.confirm(homeKeys, accountId, '');
    if (emptySeen === others.length) this.emptied.add(a.activityId);
    return this.answer({ status: 'NONE_LEFT' });
  }

  private answer(r: GrabResult, label: string = r.status): GrabResult {
    this.metrics.grabs.inc({ status: label });
    return r;
  }

  private async activity(activityId: string): Promise<ActivityRecord> {
    const now = Date.now();
    let e = this.records.get(activityId);
    if (!e || now - e.at >= RECORD_TTL_MS) {
      const value = this.store.activity(activityId);
      e = { at: now, value };
      this.records.set(activityId, e);
      value.catch(() => this.records.get(activityId)?.value === value && this.records.delete(activityId));
    }
    const a = await e.value;
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
