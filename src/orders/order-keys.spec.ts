import { KeyBuilder } from '../redis/key-builder';
import type { AppConfig } from '../config/app-config';
import { ORDER_ID_RE, ORDER_SHARDS, orderIdFor, orderIdOfPlan, orderKeys, planIdFor, shardOf } from './order-keys';

describe('order ids and keys', () => {
  const keys = new KeyBuilder({ redis: { keyPrefix: 'rp' } } as AppConfig);

  it('derives one opaque order id per (merchant, merchantOrderNo)', () => {
    const id = orderIdFor('m_demo', 'A-1');
    expect(id).toMatch(ORDER_ID_RE);
    expect(orderIdFor('m_demo', 'A-1')).toBe(id);
    expect(new Set([id, orderIdFor('m_other', 'A-1'), orderIdFor('m_demo', 'A-2'), orderIdFor('m_demo\nA', '1')]).size).toBe(4);
  });

  it("puts an order, its plans and its shard's events stream under one hash tag", () => {
    const orderId = orderIdFor('m_demo', 'A-1');
    const planId = planIdFor(orderId, 3);
    expect(orderIdOfPlan(planId)).toBe(orderId);
    expect(orderIdOfPlan(`${orderId}_p0`)).toBeUndefined();
    const tags = orderKeys(keys, orderId, planId).map((k) => /\{([^}]+)\}/.exec(k)![1]);
    expect(new Set(tags)).toEqual(new Set([`s:${shardOf(orderId)}`]));
  });

  it('spreads orders over every shard', () => {
    const shards = new Set(Array.from({ length: 400 }, (_, i) => shardOf(orderIdFor('m_demo', `n-${i}`))));
    expect(shards.size).toBe(ORDER_SHARDS);
  });
});
