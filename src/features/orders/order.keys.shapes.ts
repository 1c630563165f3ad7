import type { KeyShape } from '../../platform/redis/key-shape';
import { ORDER_ID_RE, PLAN_ID_RE } from '../../platform/core/ids';
import { channelLedgerKey, deadEventStreamKeys, noIndexKey, ORDER_KEYS, orderIndexKey, orderKeys, shardOf } from './order.keys';

const shardId = (orderId: string) => String(shardOf(orderId));
const orderOfPlan = (planId: string) => PLAN_ID_RE.exec(planId)![1];
const space = ORDER_KEYS;

/** The orders' keys, for the key-space proof (src/platform/redis/key-space.spec.ts). */
export const KEY_SHAPES: KeyShape[] = [
  {
    name: 'order',
    space,
    kind: 's',
    part: 'order',
    rules: [ORDER_ID_RE],
    make: (b, [o]) => orderKeys(b, o)[0],
    carries: ([o]) => ({ id: shardId(o), partId: o }),
  },
  {
    name: 'plan',
    space,
    kind: 's',
    part: 'plan',
    rules: [PLAN_ID_RE],
    make: (b, [p]) => orderKeys(b, orderOfPlan(p), p)[1],
    carries: ([p]) => ({ id: shardId(orderOfPlan(p)), partId: p }),
  },
  { name: 'no plan', space, kind: 's', part: 'no-plan', rules: [ORDER_ID_RE], make: (b, [o]) => orderKeys(b, o)[1], carries: ([o]) => ({ id: shardId(o) }) },
  {
    name: 'order number index',
    space,
    kind: 's',
    part: 'order-no',
    rules: [ORDER_ID_RE],
    make: (b, [n]) => orderIndexKey(b, n),
    carries: ([n]) => ({ id: shardId(n), partId: n }),
  },
  { name: 'no index', space, kind: 's', part: 'no-index', rules: [ORDER_ID_RE], make: (b, [o]) => noIndexKey(b, o), carries: ([o]) => ({ id: shardId(o) }) },
  {
    name: 'simulated channel ledger',
    space,
    kind: 'c',
    part: 'ledger',
    rules: [/^[a-z]{1,16}$/, /^[A-Za-z0-9_.:-]{1,120}$/],
    make: (b, [m, ref]) => channelLedgerKey(b, m, ref),
    carries: ([m, ref]) => ({ id: ref, partId: m }),
  },
  {
    name: 'order events',
    space,
    kind: 's',
    part: 'events',
    rules: [ORDER_ID_RE],
    make: (b, [o]) => orderKeys(b, o)[2],
    carries: ([o]) => ({ id: shardId(o) }),
  },
  {
    name: 'dead order events',
    space,
    kind: 's',
    part: 'dead-events',
    rules: [ORDER_ID_RE],
    make: (b, [o]) => deadEventStreamKeys(b)[shardOf(o)],
    carries: ([o]) => ({ id: shardId(o) }),
  },
];
