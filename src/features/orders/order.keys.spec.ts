import { KeyBuilder } from '../../platform/redis/key-builder';
import type { AppConfig } from '../../platform/config/app-config';
import { ORDER_ID_RE } from '../../platform/core/ids';
import { newOrderId, ORDER_SHARDS, orderIdOfPlan, orderIndexKey, orderKeys, orderNumberKeyOf, planIdFor, shardOf } from './order.keys';

describe('order ids and keys', () => {
  const keys = new KeyBuilder({ redis: { keyPrefix: 'rp' } } as AppConfig);

  it('derives one number key per (merchant, merchantOrderNo)', () => {
    const key = orderNumberKeyOf('m_demo', 'A-1');
    expect(key).toMatch(ORDER_ID_RE);
    expect(orderNumberKeyOf('m_demo', 'A-1')).toBe(key);
    expect(new Set([key, orderNumberKeyOf('m_other', 'A-1'), orderNumberKeyOf('m_demo', 'A-2'), orderNumberKeyOf('m_demo\nA', '1')]).size).toBe(4);
  });

  it('draws a new order id every time, which the number does not give away, in the shard of its number index entry', () => {
    const ids = Array.from({ length: 50 }, () => newOrderId('m_demo', 'A-1'));
    expect(new Set(ids).size).toBe(50);
    for (const id of ids) {
      expect(id).toMatch(ORDER_ID_RE);
      expect(id).not.toBe(orderNumberKeyOf('m_demo', 'A-1'));
      expect(/\{([^}]+)\}/.exec(orderKeys(keys, id)[0])![1]).toBe(/\{([^}]+)\}/.exec(orderIndexKey(keys, orderNumberKeyOf('m_demo', 'A-1')))![1]);
    }
  });

  it('never hands out the same random part twice, across refills of its random pool', () => {
    const ids = Array.from({ length: 3000 }, () => newOrderId('m_demo', 'A-1'));
    expect(new Set(ids.map((id) => id.slice(12))).size).toBe(3000);
    for (const id of ids) expect(id).toMatch(ORDER_ID_RE);
  });

  it("puts an order, its plans and its shard's events stream under one hash tag", () => {
    const orderId = newOrderId('m_demo', 'A-1');
    const planId = planIdFor(orderId, 3);
    expect(orderIdOfPlan(planId)).toBe(orderId);
    expect(orderIdOfPlan(`${orderId}_p0`)).toBeUndefined();
    const tags = orderKeys(keys, orderId, planId).map((k) => /\{([^}]+)\}/.exec(k)![1]);
    expect(new Set(tags)).toEqual(new Set([`s:${shardOf(orderId)}`]));
  });

  it('spreads orders over every shard', () => {
    const shards = new Set(Array.from({ length: 400 }, (_, i) => shardOf(newOrderId('m_demo', `n-${i}`))));
    expect(shards.size).toBe(ORDER_SHARDS);
  });
});
