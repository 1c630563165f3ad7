import type { KeyShape } from '../../platform/redis/key-shape';
import { DELAY_QUEUE_KEYS, QUEUE_NAME_RE, queueKeys, registryKey } from './delay-queue.keys';

const space = DELAY_QUEUE_KEYS;

/** The delay queues' keys, for the key-space proof (src/platform/redis/key-space.spec.ts). */
export const KEY_SHAPES: KeyShape[] = [
  ...['pending', 'ready', 'inflight', 'dead', 'payload', 'attempts', 'errors', 'lease', 'seq'].map((part, i): KeyShape => ({
    name: `queue ${part}`,
    space,
    kind: 'q',
    part,
    rules: [QUEUE_NAME_RE],
    make: (b, [q]) => queueKeys(b, q).keys[i],
    carries: ([q]) => ({ id: q }),
  })),
  { name: 'queue channel', space, kind: 'q', part: 'events', rules: [QUEUE_NAME_RE], make: (b, [q]) => queueKeys(b, q).channel, carries: ([q]) => ({ id: q }) },
  { name: 'queue registry', space, kind: 'reg', part: 'queues', rules: [], make: (b) => registryKey(b), carries: () => ({}) },
];
