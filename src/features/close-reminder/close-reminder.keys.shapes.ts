import type { KeyShape } from '../../platform/redis/key-shape';
import { ORDER_ID_RE } from '../../platform/core/ids';
import { CLOSE_REMINDER_KEYS, reminderKey, SETTINGS_PARTS, settingsKeys } from './close-reminder.keys';

/** The close reminders' keys, for the key-space proof (src/platform/redis/key-space.spec.ts). */
export const KEY_SHAPES: KeyShape[] = [
  {
    name: 'reminder record',
    space: CLOSE_REMINDER_KEYS,
    kind: 'o',
    part: 'reminder',
    rules: [ORDER_ID_RE],
    make: (b, [orderId]) => reminderKey(b, orderId),
    carries: ([orderId]) => ({ id: orderId }),
  },
  ...SETTINGS_PARTS.map((part, i): KeyShape => ({
    name: `merchant ${part}`,
    space: CLOSE_REMINDER_KEYS,
    kind: 'm',
    part,
    rules: [],
    make: (b) => settingsKeys(b)[i],
    carries: () => ({}),
  })),
];
