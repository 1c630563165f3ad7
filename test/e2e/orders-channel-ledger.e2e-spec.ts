import { ChannelGateway } from '../../src/features/orders/channels/channel-gateway';
import { channelLedgerKey } from '../../src/features/orders/order.keys';
import { SimulatedChannel } from '../../src/features/orders/channels/simulated-channel';
import { useOrdersApp } from '../support/orders-app';
import { startTestApp, TestApp } from '../support/test-app';

/**
 * The simulated channels behave as a real provider: every call idempotent on its ref, money moved at most once
 * each way, and one ledger in Redis whichever instance asks.
 */
describe(SimulatedChannel.name, () => {
  const app = useOrdersApp({ CHANNEL_LATENCY_MS: '0' });
  let seq = 0;
  const ref = () => `ref-${process.pid}-${++seq}:0`;
  const channel = () => app.channels.channel('quickpay');

  it('pay twice with one ref charges once and answers the first outcome again', async () => {
    const c = channel();
    const [paid, declined] = [ref(), ref()];
    expect(await c.pay(paid, 500)).toBe('success');
    c.configure({ pay: 'failure' });
    expect(await c.pay(paid, 500)).toBe('success');
    expect(await c.ledger(paid)).toEqual({ ref: paid, amount: 500, state: 'paid', payCalls: 2, refunds: 0 });
    expect(await c.pay(declined, 500)).toBe('failure');
    c.configure({ pay: 'success' });
    expect(await c.pay(declined, 500)).toBe('failure');
    expect((await c.ledger(declined))?.state).toBe('declined');
  });

  it('query: a ref never paid is a failure (no such payment); an unknown pay is settled by the first answering query', async () => {
    const c = channel();
    const [never, u] = [ref(), ref()];
    expect(await c.query(never)).toBe('failure');
    expect(await c.ledger(never)).toBeUndefined();
    c.configure({ pay: 'unknown', query: 'unknown' });
    expect(await c.pay(u, 700)).toBe('unknown');
    expect(await c.query(u)).toBe('unknown');
    c.configure({ query: 'failure' });
    expect(await c.query(u)).toBe('failure');
    c.configure({ query: 'success' });
    expect(await c.query(u)).toBe('failure');
    expect(await c.pay(u, 700)).toBe('failure');
    expect((await c.ledger(u))?.state).toBe('declined');
  });

  it('reverse gives money back once, and only for a paid ref; the entry is kept for the retention time', async () => {
    const c = channel();
    const [never, declined, paid] = [ref(), ref(), ref()];
    expect(await c.reverse(never, 100)).toBe('failure');
    c.configure({ pay: 'failure' });
    await c.pay(declined, 100);
    expect(await c.reverse(declined, 100)).toBe('failure');
    c.configure({ pay: 'success', reverse: 'unknown' });
    await c.pay(paid, 100);
    expect(await c.reverse(paid, 100)).toBe('unknown');
    expect((await c.ledger(paid))?.refunds).toBe(0);
    c.configure({ reverse: 'success' });
    expect(await c.reverse(paid, 100)).toBe('success');
    c.configure({ reverse: 'failure' });
    expect(await c.reverse(paid, 100)).toBe('success');
    expect(await c.ledger(paid)).toMatchObject({ state: 'paid', refunds: 1 });
    expect(await app.raw.pttl(channelLedgerKey(app.keys, 'quickpay', paid))).toBeGreaterThan(0);
  });

  describe('with two instances on one Redis', () => {
    let other: TestApp;
    beforeAll(async () => {
      other = await startTestApp(app.redis.url, { CHANNEL_LATENCY_MS: '0', REDIS_KEY_PREFIX: app.t.config.redis.keyPrefix });
    });
    afterAll(() => other?.close());

    it('an unknown outcome paid on one instance and queried on the other resolves to success, every time', async () => {
      const here = channel();
      const there = other.app.get(ChannelGateway).channel('quickpay');
      here.configure({ pay: 'unknown' });
      there.configure({ query: 'success' });
      const refs = Array.from({ length: 20 }, ref);
      for (const r of refs) expect(await here.pay(r, 300)).toBe('unknown');
      expect(await Promise.all(refs.map((r) => there.query(r)))).toEqual(refs.map(() => 'success'));
      expect(await Promise.all(refs.map(async (r) => (await here.ledger(r))?.state))).toEqual(refs.map(() => 'paid'));
    });
  });
});
