/**
 * seckill: the flash-sale module in the built service (`node dist/main.js`) against a bare Fastify + ioredis floor
 * (bench/seckill-floor-server.ts) on the same redis-server: reserve, listing with cache hits, the sold-out storm
 * (the service with and without its sold-out memory) and a 60% listing / 40% reserve mix. What the sale must hold
 * (no oversell, no undersell, the per-user limit, expired units back and sold again) is asserted by the tests the
 * Goals table names.
 */
import { ADMIN_JSON as ADMIN, bearerTokens, http } from './lib/full-stack';
import type { LoadRequest } from './lib/load';
import { fmtInt, fmtNum } from './lib/report';
import { defineBench, jsonRatio, ratioGoal, rowsTable, testedGoal, topCommands } from './lib/scenario';

const GOALS = { floorRatio: 0.7, mixRps: 10_000 };
const SAME_WORK = 'floor, same work (reserve + buyer index)';
const LISTED = Array.from({ length: 8 }, (_, i) => `l${i + 1}`);
const MIX = '60% listing / 40% reserve';
const STORM = 'sold-out storm';
const LISTING = 'listing (cache hits)';

/** A seckill activity of `products` through the admin API (started a second ago, ends in 3 hours). */
export async function createActivity(
  port: number,
  activityId: string,
  products: { productId: string; stock: number; shards?: number }[],
  over: { perUserLimit?: number; payWindowMinutes?: number } = {},
): Promise<void> {
  const a = await http(port, 'POST', '/admin/seckill/activities', ADMIN, {
    activityId,
    merchantId: 'bench_merchant',
    title: `bench ${activityId}`,
    startsAt: new Date(Date.now() - 1000).toISOString(),
    endsAt: new Date(Date.now() + 3 * 3600_000).toISOString(),
    payWindowMinutes: over.payWindowMinutes ?? 15,
    perUserLimit: over.perUserLimit ?? 1,
    products: products.map((p) => ({ title: `Product ${p.productId}`, price: 990, currency: 'CNY', ...p })),
  });
  if (a.status !== 201) throw new Error(`create activity ${activityId}: ${a.status} ${a.body}`);
}

/** Reservations of one unit, each from the next of `tokens` with a new requestId. */
export function reserveRequests(activityId: string, tokens: string[], tag: string) {
  let n = 0;
  return (product: string) => (): LoadRequest => {
    const i = n++;
    return {
      method: 'POST',
      path: `/seckill/activities/${activityId}/products/${product}/reservations`,
      headers: { 'content-type': 'application/json', authorization: tokens[i % tokens.length] },
      body: JSON.stringify({ quantity: 1, requestId: `${tag}${i}` }),
    };
  };
}

const goal = (g: string) => `${g[0].toUpperCase()}${g.slice(1)}: service / floor req/s`;
const RESERVATIONS_SPEC = '`test/e2e/seckill-reservations.e2e-spec.ts`';

export const { main } = defineBench({
  name: 'seckill',
  prefix: 'rpsk',
  serviceEnv: { SECKILL_SAFETY_NET_GRACE_SECONDS: '5', ORDERS_EVENTS_MAXLEN: '1000000' },
  async run(ctx) {
    const svc = await ctx.service('service');
    const activityId = `t${Date.now().toString(36)}`;
    const products = [{ productId: 'hot', stock: 10_000_000 }, { productId: 'gone', stock: 1 }, ...LISTED.map((productId) => ({ productId, stock: 1000 }))];
    await createActivity(svc.port, activityId, products, { perUserLimit: 1000 });
    const [seller] = bearerTokens(['tp-seller']);
    const first = await http(
      svc.port,
      'POST',
      `/seckill/activities/${activityId}/products/gone/reservations`,
      { authorization: seller, 'content-type': 'application/json' },
      { quantity: 1, requestId: 'x' },
    );
    if (first.status !== 201) throw new Error(`could not sell out: ${first.status} ${first.body}`);

    const accounts = Array.from({ length: 5000 }, (_, i) => `tp-${i}`);
    const tokens = bearerTokens(accounts);
    const svcReserve = reserveRequests(activityId, tokens, 'q');
    let n = 0;
    const floorReserve = (route: string) => (product: string) => (): LoadRequest => {
      const i = n++;
      const body = JSON.stringify({ account: accounts[i % accounts.length], quantity: 1, requestId: `q${i}` });
      return { method: 'POST', path: `/${route}/${activityId}/${product}`, headers: { 'content-type': 'application/json' }, body };
    };
    const svcList = (i: number): LoadRequest => ({
      method: 'GET',
      path: `/seckill/activities/${activityId}/products?page=1&size=8`,
      headers: { authorization: tokens[i % 100] },
    });
    const floorList = (i: number): LoadRequest => ({ method: 'GET', path: `/products/${activityId}?account=${accounts[i % 100]}&page=1&size=8`, headers: {} });
    const mix = (list: (i: number) => LoadRequest, reserve: () => LoadRequest) => {
      let k = 0;
      return (): LoadRequest => (k++ % 5 < 3 ? list(k) : reserve());
    };
    const lists = (f: (i: number) => LoadRequest) => Array.from({ length: 100 }, (_, i) => f(i));

    const floor = await ctx.floor('floor', 'seckill-floor-server.ts', {
      PRODUCTS: products.map((p) => p.productId).join(','),
      ORDERS_EVENTS_MAXLEN: '1000000',
    });
    const sameWork = { ...floor, id: SAME_WORK };
    const warm = { durationS: ctx.seconds(2, 1), warmup: true };
    await ctx.measure('warm-up', svc, mix(svcList, svcReserve('hot')), warm);
    await ctx.measure('warm-up', floor, mix(floorList, floorReserve('reserve')('hot')), warm);
    await ctx.measure('reserve', svc, svcReserve('hot'));
    await ctx.measure('reserve', floor, floorReserve('reserve')('hot'));
    await ctx.measure('warm-up', sameWork, floorReserve('reserve-order')('hot'), { durationS: 1, warmup: true });
    await ctx.measure('reserve', sameWork, floorReserve('reserve-order')('hot'));
    await ctx.measure(LISTING, svc, lists(svcList));
    await ctx.measure(LISTING, floor, lists(floorList));
    await ctx.measure(STORM, { ...svc, id: 'service, sold-out memory on' }, svcReserve('gone'));
    // The second instance runs only for its own row: it would share the order events' background work otherwise.
    const noMemory = await ctx.service('no-memory', { SECKILL_SOLD_OUT_MEMORY_MS: '0' });
    await ctx.measure('warm-up', noMemory, svcReserve('gone'), warm);
    await ctx.measure(STORM, { ...noMemory, id: 'service, sold-out memory off' }, svcReserve('gone'));
    await noMemory.stop();
    await ctx.measure(STORM, floor, floorReserve('reserve')('gone'));
    await ctx.measure(MIX, svc, mix(svcList, svcReserve('hot')));
    await ctx.measure(MIX, floor, mix(floorList, floorReserve('reserve')('hot')));
    await floor.stop();
    await svc.stop();
  },
  goals(_r, ctx) {
    const row = ctx.row;
    const mixS = row(MIX, 'service');
    const [on, off, sf] = ['service, sold-out memory on', 'service, sold-out memory off', 'floor'].map((t) => row(STORM, t));
    return [
      testedGoal(
        'Wave 1 over HTTP: exactly the stock reserved (admin GET and answers), 0 oversold, 0 undersold, no buyer over the limit',
        'stock reserved; 0; 0; 0',
        `${RESERVATIONS_SPEC} › no oversell; › the per-user limit under concurrency`,
      ),
      testedGoal(
        'Half paid, half expired: the stock returned is exactly what expired',
        'paid sold, expired returned and available',
        '`test/e2e/seckill-outcomes.e2e-spec.ts` › paid → SOLD; merchant close → RELEASED; expiry → RELEASED; each once',
      ),
      testedGoal(
        'The returned stock sells again (wave 2): all of it, 0 oversold, 0 undersold; invariant at the end',
        'returned reserved; 0; 0; initial = available + reserved + sold',
        `\`test/e2e/seckill-outcomes.e2e-spec.ts\` (same test, then new buyers race for what came back); ${RESERVATIONS_SPEC} › cancel → RELEASED and the unit sells again`,
      ),
      testedGoal(
        'The reserve script alone under the same load (no HTTP): 0 oversold, 0 undersold, no buyer over the limit',
        '0; 0; 0',
        '`test/e2e/seckill-scripts.e2e-spec.ts` › reserve-5.lua under a flash-sale load',
      ),
      ...ratioGoal(goal('reserve'), row('reserve', 'service'), row('reserve', 'floor'), GOALS.floorRatio),
      ...ratioGoal(goal(LISTING), row(LISTING, 'service'), row(LISTING, 'floor'), GOALS.floorRatio),
      ...ratioGoal(
        'Reserve: service / a floor doing the same work (the reserve script, the buyer index)',
        row('reserve', 'service'),
        row('reserve', SAME_WORK),
      ),
      ...(mixS
        ? [
            {
              goal: `${MIX} through the service, 2 cores`,
              target: `≥ ${fmtInt(GOALS.mixRps)} req/s`,
              measured: `${fmtInt(mixS.rps)} req/s`,
              met: mixS.rps >= GOALS.mixRps,
            },
          ]
        : []),
      ...(on && off && sf
        ? [
            {
              goal: 'Sold-out storm: memory on / memory off / floor (script on Redis)',
              target: 'information',
              measured: [on, off, sf].map((r) => fmtInt(r.rps)).join(' / ') + ' req/s',
              info: true,
            },
          ]
        : []),
    ];
  },
  report: (_r, ctx) => [
    '## Throughput against the floor',
    '',
    `autocannon in this process, 100 connections, ${ctx.seconds(8, 3)} s per row after a warm-up, one run each, on one redis-server. The service runs with the rate limit on (raised far above the load), logging at warn; reserve: 5,000 accounts with their own JWT, a new requestId each, perUserLimit 1,000; listing: one account per connection, so almost every page is a cache hit; storm: a product sold out beforehand.`,
    'The floor (bench/seckill-floor-server.ts: bare Fastify 5 + one ioredis connection, no auth, validation, logging, metrics or rate limit) runs the same reserve-5.lua (same SHA) on the same keys, one call (`/reserve`); the same-work row adds the buyer index writes the service makes (`/reserve-order`); listing is a GET of the same 16-hex page key; the mix is 3 listings then 2 reservations, over and over.',
    '',
    rowsTable(ctx.rows),
    '',
    'Redis commands per request (INFO commandstats over the run: every client, commands inside scripts and background work included; EVALSHA = scripts sent):',
    '',
    ...topCommands(ctx.rows),
    '',
    `The machine is shared: read the ratios, not the absolute req/s (other jobs' CPU is in the last column). Reserve: the service also authenticates, rate-limits, validates, indexes the buyer, logs and counts; server CPU ${fmtNum(ctx.row('reserve', 'service')?.serverUs, 0)} µs per request against ${fmtNum(ctx.row('reserve', 'floor')?.serverUs, 0)} µs for the floor.`,
    '',
  ],
  ratios: (_r, ctx) => ({
    reserveOverFloor: jsonRatio(ctx.row('reserve', 'service'), ctx.row('reserve', 'floor')),
    reserveOverSameWorkFloor: jsonRatio(ctx.row('reserve', 'service'), ctx.row('reserve', SAME_WORK)),
    listingOverFloor: jsonRatio(ctx.row(LISTING, 'service'), ctx.row(LISTING, 'floor')),
    mixOverFloor: jsonRatio(ctx.row(MIX, 'service'), ctx.row(MIX, 'floor')),
  }),
});
