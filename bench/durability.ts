/**
 * durability: what DURABILITY_REPLICAS=1 costs. Merchant order creation and pay through the built service against a
 * local master with one replica, settings 0 and 1 in alternating rounds (both see the same machine). Goal: 1 costs at
 * most 20% of the throughput of 0 at 50 in flight. That no acknowledged write is lost across a failover is a test
 * (test/e2e/durability-failover.e2e-spec.ts), named in the report.
 * On the scenario harness (bench/lib/scenario.ts); --quick: 1 round of 3 s, 3,000 plans.
 */
import Redis from 'ioredis';
import { startRedisServer } from '../test/harness/redis-server';
import { waitUntil } from '../test/harness/redis-process';
import { onCleanup } from './lib/cleanup';
import { http, json, MERCHANT_ORDERS_PATH as PATH, signedOrder, userToken } from './lib/full-stack';
import { type LoadSummary, runLoad } from './lib/load';
import { fmtInt, fmtNum, type GoalLine, markdownTable } from './lib/report';
import { defineBench, testedGoal } from './lib/scenario';

const CONNECTIONS = 50;
const USER = 'acc_bench';
const FAILOVER_TEST = '`test/e2e/durability-failover.e2e-spec.ts` ("a master lost while its replica is stalled")';

async function startPair(): Promise<string> {
  const master = await startRedisServer({ appendonly: false });
  onCleanup(
    `redis master :${master.port}`,
    () => master.destroy(),
    () => void master.kill(),
  );
  const replica = await startRedisServer({ appendonly: false, args: ['--replicaof', '127.0.0.1', String(master.port)] });
  onCleanup(
    `redis replica :${replica.port}`,
    () => replica.destroy(),
    () => void replica.kill(),
  );
  const c = new Redis(master.url);
  await waitUntil('the replica online', async () => /slave0:.*state=online/.test(await c.info('replication')) || 'not yet', 15_000);
  // The first WAIT after a full sync can take up to the replica's once-a-second ACK: have it behind us.
  await c.set('warm-up', '1');
  await c.wait(1, 5000);
  c.disconnect();
  return master.url;
}

/** `n` orders, each with a PENDING plan paid from the balance, for the pay load to take one by one. */
async function preparePlans(port: number, n: number): Promise<string[]> {
  const auth = { authorization: `Bearer ${userToken(USER)}`, 'content-type': 'application/json' };
  const plans: string[] = [];
  let started = 0;
  await Promise.all(
    Array.from({ length: 50 }, async () => {
      while (started++ < n) {
        const o = signedOrder();
        const created = await http(port, 'POST', PATH, o.headers, JSON.parse(o.body));
        if (created.status !== 201) throw new Error(`order: ${created.status} ${created.body}`);
        const plan = await http(port, 'POST', `/orders/${json<{ orderId: string }>(created).orderId}/payment-plans`, auth, {
          instructions: [{ method: 'balance', amount: 1200 }],
        });
        if (plan.status !== 201) throw new Error(`plan: ${plan.status} ${plan.body}`);
        plans.push(json<{ planId: string }>(plan).planId);
      }
    }),
  );
  return plans;
}

export const { main } = defineBench({
  name: 'durability',
  prefix: 'rpdu',
  serviceEnv: { DURABILITY_TIMEOUT_MS: '500', RATE_LIMIT_MERCHANT: '10000000', BALANCE_CHANNEL: 'simulated' }, // payers unfunded: the balance leg is simulated
  async run(ctx) {
    const [rounds, durationS, payS, payPlans] = ctx.quick ? [1, 3, 2, 3000] : [2, 10, 3, 15_000];
    Object.assign(ctx.env, { connections: CONNECTIONS, durationS, rounds });
    const masterUrl = await startPair();
    const admin = new Redis(masterUrl);
    const waitCalls = async () => Number(/^cmdstat_wait:calls=(\d+)/m.exec(await admin.info('commandstats'))?.[1] ?? 0);
    const runs: { replicas: string; create: LoadSummary; pay: LoadSummary; waits: number }[] = [];
    for (let round = 0; round < rounds; round++)
      for (const replicas of ['0', '1']) {
        const svc = await ctx.service(`durability-${replicas}-${round}`, { DURABILITY_REPLICAS: replicas }, { REDIS_URL: masterUrl });
        try {
          const url = `${svc.url}${PATH}`;
          await runLoad({ url, connections: CONNECTIONS, durationS: 2, requests: () => signedOrder() });
          const w0 = await waitCalls();
          const create = await runLoad({ url, connections: CONNECTIONS, durationS, requests: () => signedOrder() });
          const waits = (await waitCalls()) - w0;
          const plans = await preparePlans(svc.port, payPlans);
          let i = 0;
          const headers = { authorization: `Bearer ${userToken(USER)}` };
          // Past the end of the plans it pays the last again (409: counted non-2xx).
          const pay = await runLoad({
            url: `${svc.url}/`,
            connections: CONNECTIONS,
            durationS: payS,
            requests: () => ({ method: 'POST', path: `/payment-plans/${plans[Math.min(i++, plans.length - 1)]}/pay`, headers }),
          });
          runs.push({ replicas, create, pay, waits });
          console.log(
            `[bench] round ${round + 1} DURABILITY_REPLICAS=${replicas}: create ${fmtInt(create.okPerSecond)} ok/s, pay ${fmtInt(pay.okPerSecond)} ok/s`,
          );
        } finally {
          await svc.stop();
        }
      }
    admin.disconnect();
    return { runs, payPlans };
  },
  goals({ runs }): GoalLine[] {
    return [
      ...(['create', 'pay'] as const).map((k) => ({
        goal: `Throughput cost of DURABILITY_REPLICAS=1 (${k === 'create' ? 'order creation' : 'pay'}, ${CONNECTIONS} in flight)`,
        target: '≤ 20%',
        measured: `${fmtNum(cost(runs, k) * 100, 1)}%`,
        met: cost(runs, k) <= 0.2,
      })),
      testedGoal(
        'Acknowledged money-moving writes lost across a master kill with a stalled replica (DURABILITY_REPLICAS=1)',
        '0',
        `${FAILOVER_TEST}, with DURABILITY_REPLICAS=1`,
      ),
      testedGoal(
        'The same with DURABILITY_REPLICAS=0 (the loss the setting prevents)',
        '—',
        `${FAILOVER_TEST}, with DURABILITY_REPLICAS=0: writes acknowledged during the stall are lost`,
      ),
    ];
  },
  report({ runs, payPlans }) {
    const row = (k: 'create' | 'pay', r: (typeof runs)[number]) => [fmtInt(r[k].okPerSecond), fmtNum(r[k].p50, 1), fmtNum(r[k].p99, 1), fmtInt(r[k].non2xx)];
    return [
      '## Order creation (POST /merchant/orders) and pay (POST /payment-plans/{planId}/pay), master + one local replica',
      '',
      `The cost compares the best round of each setting. Pay: one balance leg, each request pays a plan made beforehand (${fmtInt(payPlans)} per round; non-2xx > 0 means the round ran out). ` +
        `One WAIT answers for every durable reply that arrives while it is out: ${runs.map((r) => `${r.replicas}: ${fmtInt(r.waits)}`).join(', ')} WAITs in the creation runs.`,
      '',
      markdownTable(
        ['Round', 'DURABILITY_REPLICAS', 'create ok req/s', 'p50 ms', 'p99 ms', 'non-2xx', 'pay ok req/s', 'p50 ms', 'p99 ms', 'non-2xx'],
        runs.map((r, i) => [String(Math.floor(i / 2) + 1), r.replicas, ...row('create', r), ...row('pay', r)]),
        ['left', 'left', 'right', 'right', 'right', 'right', 'right', 'right', 'right', 'right'],
      ),
      '',
    ];
  },
});

type Run = { replicas: string; create: LoadSummary; pay: LoadSummary };
const best = (runs: Run[], r: string, k: 'create' | 'pay') =>
  runs.filter((x) => x.replicas === r).reduce((a, b) => (b[k].okPerSecond > a[k].okPerSecond ? b : a))[k].okPerSecond;
const cost = (runs: Run[], k: 'create' | 'pay') => 1 - best(runs, '1', k) / best(runs, '0', k);
