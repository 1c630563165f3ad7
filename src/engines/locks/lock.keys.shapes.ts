import type { KeyShape } from '../../platform/redis/key-shape';
import { LOCK_KEYS, lockKeys } from './lock.keys';
import { LOCK_NAME_RE } from './lock.service';

/** The locks' keys, for the key-space proof (src/platform/redis/key-space.spec.ts). */
export const KEY_SHAPES: KeyShape[] = (['hash', 'fence', 'channel'] as const).map((which, i): KeyShape => ({
  name: `lock ${which}`,
  space: LOCK_KEYS,
  kind: 'n',
  part: ['h', 'fence', 'released'][i],
  rules: [LOCK_NAME_RE],
  make: (b, [name]) => lockKeys(b, name)[which],
  carries: ([name]) => ({ id: name }),
}));
