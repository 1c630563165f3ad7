import { Injectable, Logger } from '@nestjs/common';
import { InvalidArgumentError } from '../../platform/core/domain.error';
import { PeriodicJob } from '../../engines/workers/worker-declarations';
import { CloseReminderConfig } from './close-reminder.config';
import { ReminderSettingsNotFoundError } from './close-reminder.errors';
import { CloseReminderStore, type ReminderSettings } from './close-reminder.store';
import type { ReminderSettingsViewDto, SettingsPageDto } from './dto/settings.dto';
import { DEFAULT_CONTENT, DEFAULT_TITLE } from './reminder-template';

/** Most merchants one instance caches; past it the cache starts again (merchants with and without settings alike). */
export const MAX_CACHED_MERCHANTS = 10_000;

/** The lead when settings name none: 20 minutes. */
export const DEFAULT_LEAD_SECONDS = 1200;

/** What ops set for a merchant; absent fields take their defaults. */
export interface SaveSettingsCommand {
  merchantId: string;
  enabled: boolean;
  leadSeconds?: number;
  title?: string;
  content?: string;
}

export const settingsView = (s: ReminderSettings): ReminderSettingsViewDto => ({
  merchantId: s.merchantId,
  enabled: s.enabled,
  leadSeconds: s.leadSeconds,
  title: s.title,
  content: s.content,
  updatedAt: new Date(s.updatedAt).toISOString(),
});

/** How often each instance checks the settings version while it caches any settings, ms. */
export const SETTINGS_POLL_MS = 500;

/**
 * Merchants' settings as the event and send paths read them: cached per
 * instance, and dropped as soon as the shared settings version moves (checked
 * every SETTINGS_POLL_MS while anything is cached), so every instance sees a
 * change within a second without reading Redis for every order.
 */
@Injectable()
export class MerchantSettings {
  private readonly logger = new Logger(MerchantSettings.name);
  private readonly cache = new Map<string, Promise<ReminderSettings | null>>();
  private version?: string;

  constructor(
    private readonly store: CloseReminderStore,
    private readonly config: CloseReminderConfig,
  ) {}

  /** The merchant's settings, or null when it has none. */
  get(merchantId: string): Promise<ReminderSettings | null> {
    let hit = this.cache.get(merchantId);
    if (!hit) {
      if (this.cache.size >= MAX_CACHED_MERCHANTS) this.cache.clear();
      hit = this.store.settings(merchantId);
      this.cache.set(merchantId, hit);
      hit.catch(() => this.cache.delete(merchantId));
    }
    return hit;
  }

  /**
   * Stores a merchant's settings (validated by the caller's DTO); this instance forgets its copy at once, the others
   * within a second. A lead shorter than the service's own settings can honour (`minLeadSeconds`) is a 400 naming
   * `leadSeconds`, and nothing is stored.
   */
  async save(cmd: SaveSettingsCommand): Promise<{ created: boolean; settings: ReminderSettings }> {
    const leadSeconds = cmd.leadSeconds ?? DEFAULT_LEAD_SECONDS;
    const min = this.config.minLeadSeconds;
    if (leadSeconds < min) {
      const message =
        `leadSeconds${cmd.leadSeconds === undefined ? ` (default ${DEFAULT_LEAD_SECONDS})` : ''} must be at least ${min}: ` +
        `CLOSE_REMINDER_MIN_LEFT_SECONDS (${this.config.minLeftMs / 1000}) + CLOSE_REMINDER_VISIBILITY_TIMEOUT_SECONDS ` +
        `(${this.config.visibilityTimeoutMs / 1000}), so that a late or redelivered reminder is still sent before the close`;
      throw new InvalidArgumentError(message, 'leadSeconds');
    }
    const s = {
      merchantId: cmd.merchantId,
      enabled: cmd.enabled,
      leadSeconds,
      title: cmd.title ?? DEFAULT_TITLE,
      content: cmd.content ?? DEFAULT_CONTENT,
    };
    const { created, updatedAt } = await this.store.putSettings(s);
    this.cache.delete(cmd.merchantId);
    return { created, settings: { ...s, updatedAt } };
  }

  /** False when the merchant had none. */
  async remove(merchantId: string): Promise<boolean> {
    const removed = await this.store.deleteSettings(merchantId);
    this.cache.delete(merchantId);
    return removed;
  }

  /** The merchant's settings as stored now (not cached); 404 when none. */
  async mustRead(merchantId: string): Promise<ReminderSettings> {
    const s = await this.store.settings(merchantId);
    if (!s) throw new ReminderSettingsNotFoundError();
    return s;
  }

  async page(after: string, limit: number): Promise<SettingsPageDto> {
    const { items, next } = await this.store.settingsPage(after, limit);
    return { items: items.map(settingsView), ...(next !== undefined ? { next } : {}) };
  }

  /** Drops the cache when the shared settings version moved (nothing cached: nothing to read). */
  @PeriodicJob({ name: 'close-reminder:settings-version', everyMs: SETTINGS_POLL_MS })
  async checkVersion(): Promise<void> {
    if (this.cache.size === 0) return;
    try {
      const version = await this.store.settingsVersion();
      if (version !== this.version) {
        this.version = version;
        this.cache.clear();
      }
    } catch (err) {
      // Redis unreachable: whatever is cached may be stale, so nothing is served from it.
      this.cache.clear();
      this.logger.debug({ err: (err as Error).message }, 'could not read the settings version');
    }
  }
}
