import { Injectable } from '@nestjs/common';
import { KeyBuilder } from '../../platform/redis/key-builder';
import { RedisService } from '../../platform/redis/redis.service';
import { ScriptRegistry } from '../../platform/scripts/script-registry.service';
import { reminderKey, settingsKeys } from './close-reminder.keys';
import { CloseReminderConfig } from './close-reminder.config';

/** A merchant's close-reminder settings as stored. */
export interface ReminderSettings {
  merchantId: string;
  enabled: boolean;
  leadSeconds: number;
  title: string;
  content: string;
  /** When they were last saved, epoch ms (Redis clock). */
  updatedAt: number;
}

/** Where an order's reminder is. `withdrawing`: sent, its order settled since, the withdraw under way. */
export type ReminderState = 'scheduled' | 'sent' | 'cancelled' | 'withdrawing' | 'withdrawn' | 'skipped';

/** One order's reminder record, as stored (times epoch ms, Redis clock). */
export interface ReminderRecord {
  state: ReminderState;
  merchantId?: string;
  dueAt?: number;
  expiresAt?: number;
  leadMs?: number;
  scheduledAt?: number;
  payer?: string;
  msgId?: string;
  sentAt?: number;
  cause?: string;
  cancelledAt?: number;
  withdrawnAt?: number;
  reason?: string;
  skippedAt?: number;
  orderVersion?: number;
}

/** What the schedule script decided: see lua/features/close-reminder/schedule-1.lua. */
export interface ScheduleDecision {
  case: 'scheduled' | 'already-scheduled' | 'too-late' | 'decided';
  dueAt: number;
  now: number;
  state: string;
}

/** What a transition did: see lua/features/close-reminder/transition-1.lua. */
export interface Transition {
  moved: boolean;
  /** The Redis clock at the transition, epoch ms. */
  now: number;
  /** The state it moved from, or the current one when refused ('' for none). */
  state: string;
}

/** What the settle script did: see lua/features/close-reminder/settle-1.lua. */
export interface Settlement {
  case: 'cancelled' | 'withdraw' | 'final' | 'none';
  previous: string;
  payer: string;
}

const SCHEDULE_CASES = ['scheduled', 'already-scheduled', 'too-late', 'decided'] as const;
const SETTLE_CASES = ['cancelled', 'withdraw', 'final', 'none'] as const;
const NUMERIC = new Set(['dueAt', 'expiresAt', 'leadMs', 'scheduledAt', 'sentAt', 'cancelledAt', 'withdrawnAt', 'skippedAt', 'orderVersion']);

/** The one typed wrapper of the lua/features/close-reminder scripts and keys. */
@Injectable()
export class CloseReminderStore {
  constructor(
    private readonly scripts: ScriptRegistry,
    private readonly redis: RedisService,
    private readonly keys: KeyBuilder,
    private readonly config: CloseReminderConfig,
  ) {}

  async putSettings(s: Omit<ReminderSettings, 'updatedAt'>): Promise<{ created: boolean; updatedAt: number }> {
    const [created, updatedAt] = await this.scripts.run<[number, number]>('close-reminder/settings-put', settingsKeys(this.keys), [
      s.merchantId,
      JSON.stringify({ merchantId: s.merchantId, enabled: s.enabled, leadSeconds: s.leadSeconds, title: s.title, content: s.content }),
    ]);
    return { created: created === 1, updatedAt };
  }

  async deleteSettings(merchantId: string): Promise<boolean> {
    const [removed] = await this.scripts.run<[number]>('close-reminder/settings-delete', settingsKeys(this.keys), [merchantId]);
    return removed === 1;
  }

  async settings(merchantId: string): Promise<ReminderSettings | null> {
    const [hash] = settingsKeys(this.keys);
    const raw = await this.redis.command((c) => c.hget(hash, merchantId));
    return raw ? (JSON.parse(raw) as ReminderSettings) : null;
  }

  /** The settings version: it changes whenever any merchant's settings do. */
  async settingsVersion(): Promise<string> {
    const [, , version] = settingsKeys(this.keys);
    return (await this.redis.command((c) => c.get(version))) ?? '0';
  }

  /**
   * Up to `limit` merchants' settings after `after`, by id, and where the next page starts (absent on the last
   * page, also when the last page is full: the index is read one id beyond the page to know). `next` comes from
   * the index read, not from the settings found: a merchant removed between the two reads leaves its page short,
   * and the listing must go on past it.
   */
  async settingsPage(after: string, limit: number): Promise<{ items: ReminderSettings[]; next?: string }> {
    const [hash, index] = settingsKeys(this.keys);
    const read = await this.redis.command((c) => c.zrangebylex(index, after ? `(${after}` : '-', '+', 'LIMIT', 0, limit + 1));
    const ids = read.slice(0, limit);
    if (ids.length === 0) return { items: [] };
    const raws = await this.redis.command((c) => c.hmget(hash, ...ids));
    const items = raws.filter((r): r is string => r !== null).map((r) => JSON.parse(r) as ReminderSettings);
    return read.length > limit ? { items, next: ids[ids.length - 1] } : { items };
  }

  async schedule(orderId: string, merchantId: string, expiresAt: number, leadMs: number, orderVersion: number): Promise<ScheduleDecision> {
    const [c, dueAt, now, state] = await this.scripts.run<[number, number, number, string]>(
      'close-reminder/schedule',
      [reminderKey(this.keys, orderId)],
      [merchantId, expiresAt, leadMs, this.config.minLeftMs, orderVersion, this.config.recordRetentionMs],
    );
    return { case: SCHEDULE_CASES[c], dueAt, now, state };
  }

  /** Moves the record from one of `from` to `to`, stamping `stamp` with the Redis clock and setting `fields`. */
  async transition(orderId: string, from: ReminderState[], to: ReminderState, stamp: string, fields: Record<string, string> = {}): Promise<Transition> {
    const [c, now, state] = await this.scripts.run<[number, number, string]>(
      'close-reminder/transition',
      [reminderKey(this.keys, orderId)],
      [from.join(' '), to, stamp, JSON.stringify(fields)],
    );
    return { moved: c === 0, now, state };
  }

  async settle(
    orderId: string,
    event: { cause: 'paid' | 'closed'; orderVersion: number; merchantId: string; expiresAt: number; payer: string },
    leaveRecord: boolean,
  ): Promise<Settlement> {
    const [c, previous, payer] = await this.scripts.run<[number, string, string, number]>(
      'close-reminder/settle',
      [reminderKey(this.keys, orderId)],
      [event.cause, event.orderVersion, leaveRecord ? 1 : 0, event.merchantId, event.expiresAt, this.config.recordRetentionMs, event.payer],
    );
    return { case: SETTLE_CASES[c], previous, payer };
  }

  async record(orderId: string): Promise<ReminderRecord | null> {
    const raw = await this.redis.command((c) => c.hgetall(reminderKey(this.keys, orderId)));
    if (!raw.state) return null;
    const out: Record<string, string | number> = {};
    for (const [k, v] of Object.entries(raw)) out[k] = NUMERIC.has(k) ? Number(v) : v;
    return out as unknown as ReminderRecord;
  }
}
