/**
 * `npm run bench -- durability [--duration S] [--connections N] [--rounds N] [--pay-duration S] [--pay-plans N]`:
 * merchant order creation and pay through the real service (`node dist/main.js`) against a local master with
 * one replica, with DURABILITY_REPLICAS 0 and 1 in the same run (alternating rounds, so both see the same
 * machine): req/s and p50/p99. Goal: durability 1 costs at most 20% of the throughput of 0 at 50 in flight.
 * Then a failover under load (bench/lib/durability-failover.ts) for each setting: acknowledged orders lost when the
 * master is killed while its replica is stalled. Goal: 0 lost with 1. `--only throughput` or `--only failover`
 * runs one part; `--failover-rate N` (writes/s, default 400) and `--failover-in-flight N` (default 20).
 */
import { execFileSync } from 'node:child_process';
import { join } from 'node:path';
import Redis from 'ioredis';
import { startRedisServer, RedisServerHandle, randomPrefix } from '../test/harness/redis-server';
import { waitUntil } from '../test/harness/redis-process';
import { benchWorkDir, onCleanup } from './lib/cleanup';
import { assertBuilt, fullEnv, ROOT, snapshotBuild, spawnFullStack, userToken } from './lib/full-stack';
import { LoadSummary, runLoad } from './lib/load';
import { MERCHANT_ORDERS_PATH as PATH, signedOrder as createOrder } from './lib/merchant-orders';
import { freePort } from '../test/harness/free-port';
import { waitUntilServing } from './lib/proc';
import { FailoverResult, runFailover } from './lib/durability-failover';
import { environmentInfo, fmtInt, fmtNum, GoalLine, markdownTable, reportHead, writeResult } from './lib/report';

const NAME = 'durability';

function option(args: string[], name: string, fallback: number): number {
  const i = args.indexOf(`--${name}`);
  return i >= 0 ? Number(args[i + 1]) : fallback;
}

const USER = 'acc_bench';

/** `n` orders, each with a PENDING plan paid from the balance, for `pay` to take one by one. */
async function preparePlans(base: string, n: number): Promise<string[]> {
  const auth = { authorization: `Bearer ${userToken(USER)}`, 'content-type': 'application/json' };
  const plans: string[] = [];
  let next = 0;
  const worker = async () => {
    while (next < n) {
      next++;
      const order = createOrder();
      const created = await fetch(`${base}${PATH}`, { method: 'POST', headers: order.headers, body: order.body });
      if (created.status !== 201) throw new Error(`order creation answered ${created.status}: ${await created.text()}`);
      const { orderId } = (await created.json()) as { orderId: string };
      const plan = await fetch(`${base}/orders/${orderId}/payment-plans`, {
        method: 'POST',
        headers: auth,
        body: JSON.stringify({ instructions: [{ method: 'balance', amount: 1200 }] }),
      });
      if (plan.status !== 201) throw new Error(`plan creation answered ${plan.status}: ${await plan.text()}`);
      plans.push(((await plan.json()) as { planId: string }).planId);
    }
  };
  await Promise.all(Array.from({ length: 50 }, worker));
  return plans;
}

/** Pays each plan once, in order; past the end of `plans` it pays the last again (answered 409: counted non-2xx). */
function payEach(plans: string[]): () => { method: string; path: string; headers: Record<string, string> } {
  const headers = { authorization: `Bearer ${userToken(USER)}` };
  let i = 0;
  return () => ({ method: 'POST', path: `/payment-plans/${plans[Math.min(i++, plans.length - 1)]}/pay`, headers });
}

async function startPair(): Promise<{ master: RedisServerHandle; replica: RedisServerHandle }> {
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
  try {
    await waitUntil('the replica to be online', async () => /slave0:.*state=online/.test(await c.info('replication')) || 'not yet', 15_000);
    // The first WAIT after a full sync can take up to the replica's once-a-second ACK: have it behind us.
    await c.set('warm-up', '1');
    await c.wait(1, 5000);
  } finally {
    c.disconnect();
  }
  return { master, replica };
}

interface Part {
  goals: GoalLine[];
  lines: string[];
}

/** Order creation and pay throughput with each setting, against a local master + replica. */
async function throughput(args: string[], build: string, workDir: string): Promise<Part & { version: string; params: Record<string, number> }> {
  const durationS = option(args, 'duration', 10);
  const connections = option(args, 'connections', 50);
  const rounds = option(args, 'rounds', 2);
  const { master } = await startPair();
  const probe = new Redis(master.url);
  const version = /redis_version:(\S+)/.exec(await probe.info('server'))?.[1] ?? 'unknown';
  probe.disconnect();

  const results: Record<string, LoadSummary[]> = { '0': [], '1': [] };
  const pays: Record<string, LoadSummary[]> = { '0': [], '1': [] };
  const payS = option(args, 'pay-duration', 3);
  const payPool = option(args, 'pay-plans', 15_000);
  /** WAITs the master served during the measured runs of each setting (proof that 1 waits and 0 does not). */
  const waits: Record<string, number> = { '0': 0, '1': 0 };
  const waitCalls = async () => {
    const c = new Redis(master.url);
    try {
      return Number(/^cmdstat_wait:calls=(\d+)/m.exec(await c.info('commandstats'))?.[1] ?? 0);
    } finally {
      c.disconnect();
    }
  };
  for (let round = 0; round < rounds; round++) {
    for (const replicas of ['0', '1']) {
      const port = await freePort();
      const env = fullEnv(port, master.url, randomPrefix(), {
        DURABILITY_REPLICAS: replicas,
        DURABILITY_TIMEOUT_MS: '500',
        LOG_LEVEL: 'warn',
        RATE_LIMIT_MERCHANT: '10000000',
        // The payers are not funded: the balance leg is the simulated channel, as in the committed results.
        BALANCE_CHANNEL: 'simulated',
      });
      const proc = spawnFullStack({ id: `durability-${replicas}`, port, dist: build, env, workDir });
      try {
        await waitUntilServing(proc, port, `http://127.0.0.1:${port}/health/ready`, 60_000);
        // A short warm-up (JIT, connections), then the measured run.
        await runLoad({ url: `http://127.0.0.1:${port}${PATH}`, connections, durationS: 2, requests: () => createOrder() });
        const before = await waitCalls();
        const r = await runLoad({
          url: `http://127.0.0.1:${port}${PATH}`,
          connections,
          durationS,
          requests: () => createOrder(),
          title: `replicas ${replicas}`,
        });
        results[replicas].push(r);
        waits[replicas] += (await waitCalls()) - before;
        const plans = await preparePlans(`http://127.0.0.1:${port}`, payPool);
        const p = await runLoad({ url: `http://127.0.0.1:${port}/`, connections, durationS: payS, requests: payEach(plans), title: `pay ${replicas}` });
        pays[replicas].push(p);
        console.log(
          `[bench] round ${round + 1} DURABILITY_REPLICAS=${replicas} pay: ${fmtInt(p.okPerSecond)} ok/s, p50 ${p.p50} ms, p99 ${p.p99} ms, non-2xx ${p.non2xx}`,
        );
        console.log(
          `[bench] round ${round + 1} DURABILITY_REPLICAS=${replicas}: ${fmtInt(r.okPerSecond)} ok/s, p50 ${r.p50} ms, p99 ${r.p99} ms, non-2xx ${r.non2xx}`,
        );
      } finally {
        await proc.stop();
      }
    }
  }

  const best = (rs: LoadSummary[]) => rs.reduce((a, b) => (b.okPerSecond > a.okPerSecond ? b : a));
  const zero = best(results['0']);
  const one = best(results['1']);
  const cost = 1 - one.okPerSecond / zero.okPerSecond;
  const payZero = best(pays['0']);
  const payOne = best(pays['1']);
  const payCost = 1 - payOne.okPerSecond / payZero.okPerSecond;
  const goals: GoalLine[] = [
    {
      goal: `Throughput cost of DURABILITY_REPLICAS=1 (order creation, ${connections} in flight)`,
      target: '≤ 20%',
      measured: `${fmtNum(cost * 100, 1)}%`,
      met: cost <= 0.2,
    },
    {
      goal: `Throughput cost of DURABILITY_REPLICAS=1 (pay, ${connections} in flight)`,
      target: '≤ 20%',
      measured: `${fmtNum(payCost * 100, 1)}%`,
      met: payCost <= 0.2,
    },
  ];
  const lines = [
    '',
    '## Order creation (POST /merchant/orders), master + one local replica',
    '',
    'Best round of each setting; every round is listed below it. One WAIT answers for every durable reply that arrives while it is out, so there are fewer WAITs than writes.',
    '',
    markdownTable(
      ['DURABILITY_REPLICAS', 'ok req/s', 'p50 ms', 'p99 ms', 'non-2xx', 'WAITs (all rounds)'],
      [zero, one].map((r, i) => [String(i), fmtInt(r.okPerSecond), fmtNum(r.p50, 1), fmtNum(r.p99, 1), fmtInt(r.non2xx), fmtInt(waits[String(i)])]),
      ['left', 'right', 'right', 'right', 'right', 'right'],
    ),
    '',
    markdownTable(
      ['Round', 'DURABILITY_REPLICAS', 'ok req/s', 'p50 ms', 'p99 ms'],
      (['0', '1'] as const).flatMap((k) => results[k].map((r, i) => [String(i + 1), k, fmtInt(r.okPerSecond), fmtNum(r.p50, 1), fmtNum(r.p99, 1)])),
      ['left', 'left', 'right', 'right', 'right'],
    ),
    '',
    `## Pay (POST /payment-plans/{planId}/pay), one balance leg, channel latency 0`,
    '',
    `Each request pays a plan made beforehand (${fmtInt(payPool)} per round); non-2xx > 0 means the round ran out of plans.`,
    '',
    markdownTable(
      ['Round', 'DURABILITY_REPLICAS', 'ok req/s', 'p50 ms', 'p99 ms', 'non-2xx'],
      (['0', '1'] as const).flatMap((k) =>
        pays[k].map((r, i) => [String(i + 1), k, fmtInt(r.okPerSecond), fmtNum(r.p50, 1), fmtNum(r.p99, 1), fmtInt(r.non2xx)]),
      ),
      ['left', 'left', 'right', 'right', 'right', 'right'],
    ),
  ];
  return { goals, lines, version, params: { connections, durationS, rounds } };
}

/** A master kill with a stalled replica under steady order creation, with each setting. */
async function failover(args: string[], build: string, workDir: string): Promise<Part & { params: Record<string, number> }> {
  const rate = option(args, 'failover-rate', 400);
  const inFlight = option(args, 'failover-in-flight', 20);
  const results: FailoverResult[] = [];
  for (const replicas of ['0', '1']) {
    const r = await runFailover({ replicas, dist: build, workDir, order: createOrder, inFlight, rate });
    console.log(`[bench] failover DURABILITY_REPLICAS=${replicas}: ${JSON.stringify(r)}`);
    results.push(r);
  }
  const [zero, one] = results;
  const measured = (r: FailoverResult) => `${fmtInt(r.lost)} of ${fmtInt(r.acknowledged)}${r.unknown ? ` (${fmtInt(r.unknown)} not found out)` : ''}`;
  const goals: GoalLine[] = [
    {
      goal: 'Acknowledged money-moving writes lost across a master kill with a stalled replica (DURABILITY_REPLICAS=1)',
      target: '0',
      measured: measured(one),
      met: one.lost === 0 && one.unknown === 0 && one.acknowledged > 0,
    },
    {
      goal: 'The same with DURABILITY_REPLICAS=0 (the loss the setting prevents)',
      target: '—',
      measured: measured(zero),
      info: true,
    },
  ];
  const lines = [
    '',
    '## Failover: master killed while its replica is stalled (POST /merchant/orders)',
    '',
    `Sentinel (master + one replica, down-after 1 s) and the real service; signed order creation at ${fmtInt(rate)}/s with ${fmtInt(inFlight)} in flight, ` +
      'DURABILITY_TIMEOUT_MS 300. After 1.5 s the replica is stopped (SIGSTOP) and its link broken (`CLIENT KILL TYPE replica`), ' +
      '1 s later the master gets `kill -9`, the replica continues and Sentinel promotes it, the old master comes back as its replica, ' +
      'and the writes go on until one is acknowledged again (plus 1 s). Then each acknowledged (2xx) order is retried with its ' +
      'merchantOrderNo: 200 means the new master has it, 201 means it was lost (and is made again). ' +
      'With DURABILITY_REPLICAS=1 no write is acknowledged until the new master has a replica again (the old master, ' +
      'restarted, reconfigured by Sentinel and synced), so its outage is longer; the 503s meanwhile are counted by their error.',
    '',
    markdownTable(
      [
        'DURABILITY_REPLICAS',
        'acknowledged',
        'of which before the stall',
        'of which during the stall',
        'lost',
        'WRITE_UNCONFIRMED answers',
        'other answers (status × count)',
        'promotion s',
        'outage s (kill → first 2xx)',
      ],
      results.map((r) => [
        r.replicas,
        fmtInt(r.acknowledged),
        fmtInt(r.acknowledgedBefore),
        fmtInt(r.acknowledgedDuringStall),
        fmtInt(r.lost),
        fmtInt(r.writeUnconfirmed),
        Object.entries(r.otherFailures)
          .map(([what, n]) => `${fmtInt(n)} × ${what}`)
          .join(', ') || '0',
        fmtNum(r.promotionS, 1),
        fmtNum(r.outageS, 1),
      ]),
      ['left', 'right', 'right', 'right', 'right', 'right', 'right', 'right', 'right'],
    ),
  ];
  return { goals, lines, params: { failoverRate: rate, failoverInFlight: inFlight } };
}

export async function main(args: string[]): Promise<void> {
  const onlyAt = args.indexOf('--only');
  const only = onlyAt >= 0 ? args[onlyAt + 1] : undefined;
  if (only !== undefined && only !== 'throughput' && only !== 'failover') throw new Error('--only takes throughput or failover');
  const dist = join(ROOT, 'dist');
  assertBuilt([dist]);
  const workDir = benchWorkDir('rp-bench-durability-');
  const build = snapshotBuild(dist, join(workDir, 'build'));
  const parts: Part[] = [];
  let version = 'unknown';
  let params: Record<string, number> = {};
  if (only !== 'failover') {
    const t = await throughput(args, build, workDir);
    version = t.version;
    params = { ...params, ...t.params };
    parts.push(t);
  }
  if (only !== 'throughput') {
    const f = await failover(args, build, workDir);
    params = { ...params, ...f.params };
    parts.push(f);
  }
  if (version === 'unknown') version = /v=(\S+)/.exec(execFileSync('redis-server', ['--version'], { encoding: 'utf8' }))?.[1] ?? 'unknown';
  const md = reportHead(
    NAME,
    args,
    environmentInfo(version, params),
    parts.flatMap((p) => p.goals),
  );
  md.push(...parts.flatMap((p) => p.lines));
  writeResult(NAME, md.join('\n'));
}
