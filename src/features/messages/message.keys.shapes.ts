import type { KeyShape } from '../../platform/redis/key-shape';
import { ACCOUNT_ID_RE } from '../../platform/core/ids';
import { broadcastKeys, INBOX_PARTS, inboxKeys, MESSAGE_KEYS } from './message.keys';

/** The message center's keys, for the key-space proof (src/platform/redis/key-space.spec.ts). */
export const KEY_SHAPES: KeyShape[] = [
  ...INBOX_PARTS.map((part, i): KeyShape => ({
    name: `inbox ${part}`,
    space: MESSAGE_KEYS,
    kind: 'a',
    part,
    rules: [ACCOUNT_ID_RE],
    make: (b, [acc]) => inboxKeys(b, acc)[i],
    carries: ([acc]) => ({ id: acc }),
  })),
  ...['stream', 'bodies', 'meta'].map((part, i): KeyShape => ({
    name: `broadcast ${part}`,
    space: MESSAGE_KEYS,
    kind: 'bc',
    part,
    rules: [],
    make: (b) => broadcastKeys(b)[i],
    carries: () => ({}),
  })),
];
