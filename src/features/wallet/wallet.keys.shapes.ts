import type { KeyShape } from '../../platform/redis/key-shape';
import { OWNER_ID_RE, WALLET_KEYS, WALLET_PARTS, walletKeys } from './wallet.keys';

/** The wallets' keys, for the key-space proof (src/platform/redis/key-space.spec.ts). */
export const KEY_SHAPES: KeyShape[] = (['account', 'merchant'] as const).flatMap((kind) =>
  WALLET_PARTS.map((part): KeyShape => ({
    name: `${kind} wallet ${part}`,
    space: WALLET_KEYS,
    kind: kind === 'account' ? 'a' : 'm',
    part,
    rules: [OWNER_ID_RE],
    make: (b, [id]) => walletKeys(b, { kind, id })[part],
    carries: ([id]) => ({ id }),
  })),
);
