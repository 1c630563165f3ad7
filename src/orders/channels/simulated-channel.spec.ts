import { SimulatedChannel } from './simulated-channel';

/** The simulator behaves like a real channel: every call idempotent on its ref, money moved at most once each way. */
describe(SimulatedChannel.name, () => {
  const channel = () => new SimulatedChannel('balance', { latencyMs: 0, pay: 'success', query: 'success', reverse: 'success' });

  it('pay twice with one ref charges once and answers the first outcome again', async () => {
    const c = channel();
    expect(await c.pay('p_1:0', 500)).toBe('success');
    c.configure({ pay: 'failure' });
    expect(await c.pay('p_1:0', 500)).toBe('success');
    expect(c.ledger('p_1:0')).toEqual({ ref: 'p_1:0', amount: 500, state: 'paid', payCalls: 2, refunds: 0 });
    expect(await c.pay('p_2:0', 500)).toBe('failure');
    c.configure({ pay: 'success' });
    expect(await c.pay('p_2:0', 500)).toBe('failure');
    expect(c.ledger('p_2:0')?.state).toBe('declined');
  });

  it('query: a ref never paid is a failure (no such payment); an unknown pay is settled by the first answering query', async () => {
    const c = channel();
    expect(await c.query('never:0')).toBe('failure');
    expect(c.ledger('never:0')).toBeUndefined();
    c.configure({ pay: 'unknown', query: 'unknown' });
    expect(await c.pay('u:0', 700)).toBe('unknown');
    expect(await c.query('u:0')).toBe('unknown');
    c.configure({ query: 'failure' });
    expect(await c.query('u:0')).toBe('failure');
    c.configure({ query: 'success' });
    expect(await c.query('u:0')).toBe('failure');
    expect(await c.pay('u:0', 700)).toBe('failure');
    expect(c.ledger('u:0')?.state).toBe('declined');
  });

  it('reverse gives money back once, and only for a paid ref', async () => {
    const c = channel();
    expect(await c.reverse('never:0', 100)).toBe('failure');
    c.configure({ pay: 'failure' });
    await c.pay('declined:0', 100);
    expect(await c.reverse('declined:0', 100)).toBe('failure');
    c.configure({ pay: 'success', reverse: 'unknown' });
    await c.pay('paid:0', 100);
    expect(await c.reverse('paid:0', 100)).toBe('unknown');
    expect(c.ledger('paid:0')?.refunds).toBe(0);
    c.configure({ reverse: 'success' });
    expect(await c.reverse('paid:0', 100)).toBe('success');
    c.configure({ reverse: 'failure' });
    expect(await c.reverse('paid:0', 100)).toBe('success');
    expect(c.ledger('paid:0')).toMatchObject({ state: 'paid', refunds: 1 });
  });
});
