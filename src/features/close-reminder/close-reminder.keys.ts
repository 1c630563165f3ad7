import { defineKeySpace, KeyBuilder } from '../../platform/redis/key-builder';

/** The close reminders' keys: one order's reminder record (`{o:<orderId>}`); the merchants' settings (`{m}`). */
export const CLOSE_REMINDER_KEYS = defineKeySpace('close-reminder', { o: 'id', m: 'fixed' });

/** The parts of the settings tag, in the settings scripts' KEYS order. */
export const SETTINGS_PARTS = ['settings', 'merchants', 'version'] as const;

/** One order's reminder record (a hash), under the order's own tag. */
export function reminderKey(builder: KeyBuilder, orderId: string): string {
  return builder.tagged(CLOSE_REMINDER_KEYS, 'o', orderId).key('reminder');
}

/** The settings hash, the merchant index and the settings version: one slot for all merchants. */
export function settingsKeys(builder: KeyBuilder): string[] {
  const t = builder.tagged(CLOSE_REMINDER_KEYS, 'm');
  return SETTINGS_PARTS.map((p) => t.key(p));
}
