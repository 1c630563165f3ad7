import { homeOf } from '../../src/engines/sharded-pool/home';
import { expectInvariants } from '../support/invariants';
import { rainBody, rainId, rainKit, type RainKit } from '../support/red-envelopes';
import { activityBody, activityId, seckillKit, type SeckillKit } from '../support/seckill';
import { CREDS, useAppOnOwnRedis } from '../support/test-app';

/**
 * The sharded pools of seckill (product shards) and red-envelope (sub-pools) at 1, 3, 4 and 16 shards, over HTTP:
 * - every unit (envelope) is taken by a crowd of buyers tapping at once, exactly the stock, and the next answer is
 *   SOLD_OUT (NONE_LEFT);
 * - seckill: a quantity above one shard's share is served across shards;
 * - the last unit left on the shard a buyer's fall-over reaches last is still sold to that buyer (not SOLD_OUT while
 *   stock remains).
 * After each: the stock invariant (initial = available + reserved + sold), the rain's reconciliation, and every
 * module's law over the deployment (test/support/invariants.ts).
 */
const ctx = useAppOnOwnRedis({ RATE_LIMIT_ENABLED: 'false', BALANCE_CHANNEL: 'wallet' });
let sk: SeckillKit;
let rk: RainKit;
beforeAll(() => {
  sk = seckillKit(ctx.t);
  rk = rainKit(ctx.t);
});

const SHARD_COUNTS = [1, 3, 4, 16];
const count = <T>(xs: T[], pred: (x: T) => boolean) => xs.filter(pred).length;

/** `n` accounts named `<tag><i>` whose home (by `home`) is `k`. */
function homedIn(tag: string, k: number, n: number, home: (account: string) => number): string[] {
  const out: string[] = [];
  for (let i = 0; out.length < n; i++) if (home(`acc_${tag}${i}`) === k) out.push(`acc_${tag}${i}`);
  return out;
}

async function expectDeploymentLaws() {
  const port = (ctx.t.server.address() as { port: number }).port;
  await expectInvariants({ nodes: ctx.raw, prefix: ctx.t.config.redis.keyPrefix, base: `http://127.0.0.1:${port}` });
}

describe.each(SHARD_COUNTS)('seckill with %i shard(s)', (shards) => {
  it('quantity 1: a crowd takes every unit, exactly the stock; then SOLD_OUT; the invariant holds', async () => {
    const id = activityId(`sw${shards}`);
    const stock = 2 * shards;
    await sk.create(activityBody(id, [{ productId: 'p', stock, shards }]));
    const buyers = Array.from({ length: 3 * stock }, (_, i) => `acc_sw${shards}_${i}`);
    const answers = await Promise.all(buyers.map((b) => sk.reserve(b, id, 'p', 1)));
    const refused = answers.filter((r) => r.status !== 201);
    expect({ reserved: count(answers, (r) => r.status === 201), refused: [...new Set(refused.map((r) => `${r.status} ${r.body.error}`))] }).toEqual({
      reserved: stock,
      refused: ['409 SOLD_OUT'],
    });
    const after = await sk.reserve('acc_sw_late', id, 'p', 1);
    expect([after.status, after.body.error]).toEqual([409, 'SOLD_OUT']);
    expect((await sk.expectInvariant(id)).get('p')).toMatchObject({ stock, available: 0, reserved: stock, sold: 0 });
    await expectDeploymentLaws();
  }, 30_000);

  if (shards > 1) {
    it('a quantity above one shard’s share (2 units a shard, 5 asked) is served across shards; the rest in one request', async () => {
      const id = activityId(`mq${shards}`);
      const stock = 2 * shards;
      await sk.create(activityBody(id, [{ productId: 'p', stock, shards }], { perUserLimit: stock }));
      const five = await sk.reserve(`acc_mq${shards}_a`, id, 'p', 5);
      expect([five.status, five.body.quantity ?? five.body.error]).toEqual([201, 5]);
      expect((await sk.expectInvariant(id)).get('p')).toMatchObject({ available: stock - 5, reserved: 5 });
      const rest = await sk.reserve(`acc_mq${shards}_b`, id, 'p', stock - 5);
      expect([rest.status, rest.body.quantity ?? rest.body.error]).toEqual([201, stock - 5]);
      const more = await sk.reserve(`acc_mq${shards}_c`, id, 'p', 1);
      expect([more.status, more.body.error]).toEqual([409, 'SOLD_OUT']);
      expect((await sk.expectInvariant(id)).get('p')).toMatchObject({ available: 0, reserved: stock });
    }, 30_000);
  }

  it('the last unit, on the shard the buyer’s fall-over reaches last, is sold to that buyer', async () => {
    const id = activityId(`far${shards}`);
    await sk.create(activityBody(id, [{ productId: 'p', stock: shards, shards }]));
    const home = (account: string) => homeOf(account, 'p', shards);
    // The buyer's home is shard 0; the fall-over goes 1, 2, …, so the shard it reaches last is the one before it.
    const [buyer] = homedIn(`far${shards}x`, 0, 1, home);
    const far = (shards - 1) % shards;
    // Every other shard's unit is taken by a buyer whose home it is.
    for (let k = 0; k < shards; k++) {
      if (k === far) continue;
      const [other] = homedIn(`far${shards}h`, k, 1, home);
      expect((await sk.reserve(other, id, 'p', 1)).status).toBe(201);
    }
    expect((await sk.stock(id)).get('p')).toMatchObject({ available: 1 });
    const last = await sk.reserve(buyer, id, 'p', 1);
    expect([last.status, last.body.error]).toEqual([201, undefined]);
    expect((await sk.expectInvariant(id)).get('p')).toMatchObject({ available: 0, reserved: shards });
  }, 30_000);
});

describe.each(SHARD_COUNTS)('red envelopes with %i sub-pool(s)', (subPools) => {
  it('a crowd grabs every envelope, exactly the count; then NONE_LEFT; balanced and credited once', async () => {
    const id = rainId(`sw${subPools}`);
    const envelopes = 2 * subPools;
    await rk.fund(CREDS.merchantId, envelopes * 100);
    await rk.create(rainBody(id, { totalAmount: envelopes * 100, count: envelopes, subPools }));
    const users = Array.from({ length: 3 * envelopes }, (_, i) => `acc_rw${subPools}_${i}`);
    const answers = await Promise.all(users.map((u) => rk.grab(u, id)));
    expect(answers.every((r) => r.status === 200)).toBe(true);
    expect({ grabbed: count(answers, (r) => r.body.status === 'GRABBED'), others: [...new Set(answers.map((r) => r.body.status))].sort() }).toEqual({
      grabbed: envelopes,
      others: ['GRABBED', 'NONE_LEFT'],
    });
    expect((await rk.grab('acc_rw_late', id)).body.status).toBe('NONE_LEFT');
    const r = await rk.credited(id);
    expect(r).toMatchObject({ grabbed: { count: envelopes, amount: envelopes * 100 }, left: { count: 0 }, balanced: true });
    await expectDeploymentLaws();
  }, 30_000);

  it('the last envelope, on the sub-pool the user’s fall-over reaches last, is grabbed by that user', async () => {
    const id = rainId(`far${subPools}`);
    await rk.fund(CREDS.merchantId, subPools * 100);
    // One envelope per sub-pool (envelope i goes to sub-pool i mod subPools).
    await rk.create(rainBody(id, { totalAmount: subPools * 100, count: subPools, subPools }));
    const home = (account: string) => homeOf(account, id, subPools);
    const [user] = homedIn(`rf${subPools}x`, 0, 1, home);
    const far = (subPools - 1) % subPools;
    for (let k = 0; k < subPools; k++) {
      if (k === far) continue;
      const [other] = homedIn(`rf${subPools}h`, k, 1, home);
      expect((await rk.grab(other, id)).body.status).toBe('GRABBED');
    }
    expect((await rk.reconciliation(id)).left.count).toBe(1);
    expect((await rk.grab(user, id)).body.status).toBe('GRABBED');
    expect(await rk.credited(id)).toMatchObject({ grabbed: { count: subPools }, left: { count: 0 }, balanced: true });
  }, 30_000);
});
