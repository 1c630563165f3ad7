/**
 * close-reminder: the close-reminder module (src/features/close-reminder) end to end, in
 * the real service (`node dist/main.js` on loopback) against a redis-server of
 * its own (no RDB, no AOF), at two sizes: 10,000 and 100,000 reminders due in
 * the same second.
 *
 * How the one-second burst is made. An order's reminder is due at
 * expiresAt − lead, and expiresAt = creation time + expireMinutes, so orders
 * created over T seconds would fall due over T seconds. Instead the orders are
 * created in whole-second windows, and window i uses its own opted-in merchant
 * whose lead is L0 + i seconds (admin PUT, before anything is created): an
 * order created in window i (at t0 + i s + δ, 0 ≤ δ < the window's open part)
 * is due at t0 + i + δ + 60·expireMinutes − (L0 + i) = t0 + 60·expireMinutes −
 * L0 + δ, the same second for every window. New creations stop 200 ms before
 * each window ends, so a create that waits in a queue still lands inside it.
 * The dueAt of every record is read back and the report shows the spread.
 *
 * Per size, with one service process:
 *   1. admin PUT of the merchants' settings over HTTP; idle Redis PING and
 *      idle message pull (GET /messages with a user bearer token) measured;
 *   2. the orders are created in this process (OrdersService.createForBuyer of
 *      the build, in a Nest application context whose background workers are
 *      stopped, so every order event goes to the service's consumer group), each
 *      with its own payer; the service schedules the reminders from the order
 *      events as they come (order.created → close-reminder consumer group);
 *   3. half the orders (every even one) are paid in this process through the
 *      payment plans (create plan + pay), before anything is due; the service
 *      cancels those reminders from the order.paid events;
 *   4. the burst: from a little before the due second until the delay queue is
 *      empty, a PING loop (own connection, own process) and a pull loop through the
 *      service; CPU of the service and of redis-server, INFO commandstats and
 *      SLOWLOG (slowlog-log-slower-than 10 ms) around it;
 *   5. checks: every record (state, dueAt, sentAt, scheduledAt, cancelledAt),
 *      the order events' stream ids (write time), and every payer's inbox
 *      (exactly one CLOSE_REMINDER for an unpaid order, none for a paid one);
 *   6. side by side on the same redis-server: the cancels of the paid half
 *      against a queue holding all the reminders, one at a time with a PING
 *      loop on its own connection: the seed's Redisson-style list-scan queue
 *      (bench/lib/list-scan-queue.ts) and this service's delay queue
 *      (DelayQueueService.cancel, the call the module makes on order.paid).
 *
 * Options: --quick   1,000 and 10,000 reminders, shorter baseline budget
 *          --only a,b  sizes: 10k, 100k
 *          --dist DIR  the build to measure
 *          --pin     the service alone on one CPU, redis-server, this process and the
 *                    PING probe on the others (taskset); by default the scheduler places all
 * Environment: BENCH_SLOWLOG_US  SLOWLOG threshold (default 10,000 µs); when set, the
 *              slow entries of each burst are listed by command on stderr
 * Only the standard run writes bench/results/close-reminder.{md,json} and
 * docs/close-reminder-lateness.svg; runs with options write to $TMPDIR/redis-pay-bench/.
 */
import { NestFactory } from '@nestjs/core';
import Redis from 'ioredis';
import { Agent } from 'node:http';
import { httpOn } from './lib/service-http';
import { mkdirSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseSectionArgs } from './lib/args';
import { benchWorkDir, onCleanup } from './lib/cleanup';
import { CommandStat, parseCommandStats } from './lib/command-stats';
import { PingProbe } from './lib/ping-probe';
import { BENCH_ADMIN_KEY, fullEnv, requireFromBuild, ROOT, snapshotBuild, spawnFullStack, userToken } from './lib/full-stack';
import { forEachLimit } from './lib/limit';
import { ListScanQueue } from './lib/list-scan-queue';
import { dist as distribution, type Dist, ms as fmtMs } from './lib/measure';
import { freePort } from './lib/net';
import { cpuSeconds, cpuSplit, machineCpuSeconds, ManagedProcess, pinProcess, selfCpuSeconds, waitUntilServing } from './lib/proc';
import { BenchRedis, startBenchRedis } from './lib/redis-server';
import { environmentInfo, fmtInt, fmtNum, GoalLine, markdownTable, reportHead, RESULTS_DIR, writeResult } from './lib/report';
import { benchJson, jsonNum, writeJsonResult } from './lib/results-json';

const NAME = 'close-reminder';
const SVG_PATH = join(ROOT, 'docs', 'close-reminder-lateness.svg');
const PREFIX = 'rpcr';
const SIZES = ['10k', '100k'] as const;
type SizeId = (typeof SIZES)[number];
const SIZE_N: Record<SizeId, number> = { '10k': 10_000, '100k': 100_000 };
const QUICK_N: Record<SizeId, number> = { '10k': 1_000, '100k': 10_000 };

const GOALS = { latenessP99At10kMs: 1000, allSentAt100kS: 10, sentPerS: 10_000, pingP99Ms: 2, pullP99Ms: 100, eventsPerS: 10_000 };

/** Creations start in the first WINDOW_OPEN_MS of each second (see the header). */
const WINDOW_OPEN_MS = 800;
/** Most creation windows (one merchant each). */
const MAX_WINDOWS = 120;
/** Creates and pays in flight in this process. */
const CREATE_CONCURRENCY = 128;
const PAY_CONCURRENCY = 64;
/** Pull loop connections during idle and burst. */
const PULL_CONCURRENCY = 2;
/** Orders close at least this long after the burst, so nothing expires while the bench runs. */
const CLOSE_AFTER_BURST_S = 600;
const AMOUNT = 4999;
const SLOWLOG_US = Number(process.env.BENCH_SLOWLOG_US ?? 10_000);

const BASE_ENV: Record<string, string> = {
  RATE_LIMIT_ENABLED: 'false',
  LOG_LEVEL: 'warn',
  ORDERS_EVENTS_MAXLEN: '1000000',
};

type Load = <T>(path: string) => T;

// ---------------------------------------------------------------------------------------------
// Small helpers

const sleep = (ms: number) => new Promise((r) => setTimeout(r, Math.max(0, ms)));

/**
 * Calls `call` over and over (`parallel` at once), pausing `gapMs` after each call: a probe, paced so that
 * the measuring itself does not take the cores the service and Redis share with it.
 */
/** Pause after each probe call, ms: about 1,000 PINGs and 300 pulls a second. */
const PROBE_GAP_MS = { ping: 1, pull: 5 };

function loop(call: () => Promise<void>, parallel = 1, gapMs = PROBE_GAP_MS.ping): { stop(): Promise<number[]> } {
  let running = true;
  const lat: number[] = [];
  const workers = Array.from({ length: parallel }, async () => {
    while (running) {
      const t = performance.now();
      await call();
      lat.push(performance.now() - t);
      await sleep(gapMs);
    }
  });
  return {
    async stop() {
      running = false;
      await Promise.all(workers);
      return lat;
    },
  };
}

const keepAlive = new Agent({ keepAlive: true, maxSockets: 64 });

const http = (port: number, method: string, path: string, headers: Record<string, string>, body?: string) =>
  httpOn(keepAlive, port, method, path, headers, body);

/** INFO commandstats as command → {calls, usec}. */
const commandStats = async (r: Redis) => parseCommandStats(await r.info('commandstats'));

function statsDelta(a: Map<string, CommandStat>, b: Map<string, CommandStat>) {
  const rows: { command: string; calls: number; usec: number }[] = [];
  for (const [k, v] of b) {
    const before = a.get(k) ?? { calls: 0, usec: 0 };
    if (v.calls > before.calls) rows.push({ command: k, calls: v.calls - before.calls, usec: v.usec - before.usec });
  }
  return rows.sort((x, y) => y.calls - x.calls);
}

async function slowlog(
  r: Redis,
  name: (sha: string) => string | undefined = () => undefined,
): Promise<{ count: number; longestUs: number; longestCommand: string }> {
  const count = Number(await r.call('SLOWLOG', 'LEN'));
  const entries = (await r.call('SLOWLOG', 'GET', 128)) as [number, number, number, string[]][];
  let longestUs = 0;
  let longestCommand = '';
  // With a lower threshold (BENCH_SLOWLOG_US): which commands were slow, and how slow, on stderr.
  if (process.env.BENCH_SLOWLOG_US) {
    const by = new Map<string, number[]>();
    for (const e of entries) {
      const [cmd, sha] = e[3] ?? [];
      const k = String(cmd).toLowerCase() === 'evalsha' && sha ? (name(String(sha)) ?? 'sha') : String(cmd);
      by.set(k, [...(by.get(k) ?? []), e[2]]);
    }
    for (const [k, v] of by) console.error(`[bench] slowlog ${k}: ${v.length} entries, µs: ${v.sort((a, b) => a - b).join(' ')}`);
  }
  for (const e of entries) {
    if (e[2] > longestUs) {
      longestUs = e[2];
      const [cmd, sha] = e[3] ?? [];
      const script = String(cmd).toLowerCase() === 'evalsha' && sha ? name(String(sha)) : undefined;
      longestCommand = script ? `EVALSHA of ${script}` : (e[3] ?? []).slice(0, 3).join(' ');
    }
  }
  return { count, longestUs, longestCommand };
}

// ---------------------------------------------------------------------------------------------
// The in-process side: order creation and payment, reading back

interface Creator {
  createForBuyer(c: {
    merchantId: string;
    merchantOrderNo: string;
    amount: number;
    currency: string;
    subject: string;
    expireMinutes: number;
    payerAccountId: string;
  }): Promise<{
    order: { orderId: string; createdAt: number; expiresAt: number };
  }>;
  pay(accountId: string, orderId: string): Promise<string>;
  record(orderId: string): Promise<Record<string, string | number> | null>;
  reminders(accountId: string): Promise<{ outerBizId: string; msgId: string }[]>;
  queueBusy(): Promise<{ pending: number; ready: number; inFlight: number; dead: number }>;
  eventStreams(): string[];
  /** The script id (e.g. delay-queue/claim) of an EVALSHA digest. */
  scriptName(sha: string): string | undefined;
  /** This service's delay queue, for the side-by-side cancels. */
  dqSchedule(queue: string, id: string, dueAt: number): Promise<void>;
  dqCancel(queue: string, id: string): Promise<boolean>;
  close(): Promise<void>;
}

async function startCreator(dist: string, redisUrl: string): Promise<Creator> {
  const load: Load = <T>(path: string) => requireFromBuild<T>(dist, path);
  const { loadConfig } = load<typeof import('../src/platform/config/load-config')>('platform/config/load-config');
  const { AppModule } = load<typeof import('../src/app.module')>('app.module');
  const { BackgroundWorkers } = load<typeof import('../src/engines/workers/background-workers.service')>('engines/workers/background-workers.service');
  const { OrdersService } = load<typeof import('../src/features/orders/orders.service')>('features/orders/orders.service');
  const { PaymentPlansService } = load<typeof import('../src/features/orders/payment-plans.service')>('features/orders/payment-plans.service');
  const { PaymentRunner } = load<typeof import('../src/features/orders/payment-runner.service')>('features/orders/payment-runner.service');
  const { MessagesService } = load<typeof import('../src/features/messages/messages.service')>('features/messages/messages.service');
  const { DelayQueueService } = load<typeof import('../src/engines/delay-queue/delay-queue.service')>('engines/delay-queue/delay-queue.service');
  const { CloseReminderStore } = load<typeof import('../src/features/close-reminder/close-reminder.store')>('features/close-reminder/close-reminder.store');
  const { OrderEventsService } = load<typeof import('../src/features/orders/order-events.service')>('features/orders/order-events.service');
  const { ScriptRegistry } = load<typeof import('../src/platform/scripts/script-registry.service')>('platform/scripts/script-registry.service');
  const { REMINDER_QUEUE } = load<typeof import('../src/features/close-reminder/close-reminder.service')>('features/close-reminder/close-reminder.service');
  // NODE_ENV=test: development credentials are accepted (no HTTP here). No channel latency: paying is set-up, not measured.
  const config = loadConfig({
    NODE_ENV: 'test',
    LOG_LEVEL: 'silent',
    REDIS_URL: redisUrl,
    REDIS_KEY_PREFIX: PREFIX,
    CHANNEL_LATENCY_MS: '0',
    ORDERS_EVENTS_MAXLEN: BASE_ENV.ORDERS_EVENTS_MAXLEN,
  });
  const app = await NestFactory.createApplicationContext(AppModule.forRoot(config), { logger: ['error', 'warn'] });
  // Its consumers and queue processors stop at once: every order event and due reminder goes to the service.
  await app.get(BackgroundWorkers).stopAll();
  const orders = app.get(OrdersService);
  const plans = app.get(PaymentPlansService);
  const runner = app.get(PaymentRunner);
  const messages = app.get(MessagesService);
  const dq = app.get(DelayQueueService);
  const store = app.get(CloseReminderStore);
  const events = app.get(OrderEventsService);
  const scriptNames = new Map(
    app
      .get(ScriptRegistry)
      .list()
      .map((d) => [d.sha, d.id]),
  );
  return {
    scriptName: (sha) => scriptNames.get(sha),
    createForBuyer: (c) => orders.createForBuyer(c),
    async pay(accountId, orderId) {
      const { plan } = await plans.create({ accountId, orderId, instructions: [{ method: 'quickpay', amount: AMOUNT }] });
      const paid = await runner.pay({ accountId, planId: plan.planId });
      return paid.status;
    },
    record: async (orderId) => (await store.record(orderId)) as unknown as Record<string, string | number> | null,
    async reminders(accountId) {
      const r = await messages.pull(accountId, undefined, 50);
      return r.messages.filter((m) => m.bizType === 'CLOSE_REMINDER').map((m) => ({ outerBizId: m.outerBizId, msgId: m.msgId }));
    },
    queueBusy: () => dq.stats(REMINDER_QUEUE),
    eventStreams: () => events.streams(),
    async dqSchedule(queue, id, dueAt) {
      await dq.schedule(queue, id, { dueAt }, { orderId: id }, { ifExists: 'keep' });
    },
    dqCancel: async (queue, id) => (await dq.cancel(queue, id)).state === 'pending',
    close: () => app.close(),
  };
}

// ---------------------------------------------------------------------------------------------
// One size

interface CancelSide {
  /** Cancels made (one at a time) within the budget, of `wanted`. */
  done: number;
  wanted: number;
  cancel: Dist;
  ping: Dist;
  wallS: number;
  /** Time all `wanted` cancels would take one at a time, at the measured mean. */
  projectedAllS: number;
  redisCpuShare?: number;
}

interface SizeResult {
  size: SizeId;
  n: number;
  paid: number;
  unpaid: number;
  burst: { method: string; windows: number; expireMinutes: number; leads: string; dueSpreadMs: number; dueFrom: number; createRate: number; createS: number };
  events: {
    backlog: boolean;
    createdPerS: number;
    createdSpanS: number;
    paidPerS: number;
    paidSpanS: number;
    kept: boolean;
    scheduleLag: Dist;
    settleLag: Dist;
  };
  lateness: Dist;
  latenessValues: number[];
  burstS: number;
  sentPerS: number;
  idle: { ping: Dist; pull: Dist };
  during: { ping: Dist; pull: Dist; pullErrors: number };
  payPhasePing: Dist;
  cpu: { serviceS: number; redisS: number; wallS: number };
  /** From the start of the due second until the queue was empty. */
  drainCpu: { serviceS: number; redisS: number; benchS: number; otherS: number; wallS: number };
  /** INFO commandstats over the burst window; idleCalls: what the same window costs idle (PING and pull loops, pollers). */
  commands: { command: string; calls: number; usec: number; idleCalls: number }[];
  commandsPerReminder: number;
  slowlog: { count: number; longestUs: number; longestCommand: string };
  checks: {
    states: Record<string, number>;
    unpaidWithOne: number;
    unpaidWithNone: number;
    duplicates: number;
    paidWithReminder: number;
    paidRecordsNotCancelled: number;
  };
  listScan: CancelSide & { slowlog: { count: number; longestUs: number; longestCommand: string } };
  ours: CancelSide & { slowlog: { count: number; longestUs: number; longestCommand: string } };
}

async function measureSize(
  size: SizeId,
  n: number,
  o: { dist: string; quick: boolean; backlog: boolean; cpus?: string },
  redis: BenchRedis,
  workDir: string,
): Promise<SizeResult> {
  const admin = new Redis(redis.url);
  // PING from a process of its own: in this one it would also wait for this process's event loop.
  const pinger = await PingProbe.start(redis.url, PROBE_GAP_MS.ping);
  onCleanup(
    `redis clients (${size})`,
    () => {
      admin.disconnect();
      pinger.close();
    },
    () => undefined,
  );
  await admin.flushall();
  await admin.config('SET', 'slowlog-log-slower-than', String(SLOWLOG_US));
  await admin.config('SET', 'slowlog-max-len', '1024');

  // The service.
  const port = await freePort();
  const env = fullEnv(port, redis.url, PREFIX, BASE_ENV);
  let service: ManagedProcess = spawnFullStack({ id: `close-reminder ${size}`, port, dist: o.dist, env, workDir, cpus: o.cpus });
  await waitUntilServing(service, port, `http://127.0.0.1:${port}/health/ready`, 60_000);
  const creator = await startCreator(o.dist, redis.url);
  try {
    // Creation speed decides how far ahead the burst must be: probe it on a few orders of a merchant without settings.
    const probeN = Math.min(2000, n);
    const p0 = performance.now();
    await forEachLimit(probeN, CREATE_CONCURRENCY, async (i) => {
      await creator.createForBuyer({
        merchantId: 'crb_probe',
        merchantOrderNo: `probe-${i}`,
        amount: AMOUNT,
        currency: 'CNY',
        subject: 'Probe',
        expireMinutes: 30,
        payerAccountId: `crb-probe-${i % 100}`,
      });
    });
    const probeRate = probeN / ((performance.now() - p0) / 1000);
    // Creating in 80% of each second, paying half as fast (two calls), then a margin.
    const createS = n / (probeRate * (WINDOW_OPEN_MS / 1000));
    // Paying (plan + pay, more scripts and locks) runs at about a quarter of the creation rate; a backlog drains at ≥ 5,000/s.
    const payS = n / 2 / (probeRate / 4);
    const drainS = o.backlog ? 5 + n / 5000 : 2;
    const windows = Math.ceil(createS * 1.5) + 2;
    if (windows > MAX_WINDOWS) throw new Error(`creation too slow: ${fmtInt(probeRate)} orders/s needs ${windows} windows (max ${MAX_WINDOWS})`);
    const dueOffsetS = Math.ceil(createS * 1.5 + drainS + payS * 1.3 + 15);
    const expireMinutes = Math.ceil((dueOffsetS + CLOSE_AFTER_BURST_S) / 60);
    const lead0 = expireMinutes * 60 - dueOffsetS;
    console.error(
      `[bench] ${size}: probe ${fmtInt(probeRate)} orders/s; ${windows} windows, burst ${dueOffsetS} s after the first, expireMinutes ${expireMinutes}, leads ${lead0}..${lead0 + windows - 1} s`,
    );

    // 1. Opt the merchants in (admin PUT over HTTP), one per window.
    const adminHeaders = { 'x-admin-key': BENCH_ADMIN_KEY, 'content-type': 'application/json' };
    const merchant = (w: number) => `crb_m${String(w).padStart(3, '0')}`;
    for (let w = 0; w < windows; w++) {
      const r = await http(
        port,
        'PUT',
        `/admin/close-reminder/merchants/${merchant(w)}`,
        adminHeaders,
        JSON.stringify({
          enabled: true,
          leadSeconds: lead0 + w,
          title: '[Payment reminder] {subject}',
          content: 'Your order for {subject} ({amount}) closes in {minutes} minutes',
        }),
      );
      if (r.status !== 200 && r.status !== 201) throw new Error(`PUT settings ${merchant(w)}: ${r.status} ${r.body}`);
    }

    // Idle figures, before anything of this size exists.
    const payer = (i: number) => `crb-p${i}`;
    const pullTokens = Array.from({ length: 64 }, (_, k) => `Bearer ${userToken(payer(2 * k + 1))}`);
    let pullN = 0;
    let pullErrors = 0;
    const pullOnce = async () => {
      const r = await http(port, 'GET', '/messages?limit=50', { authorization: pullTokens[pullN++ % pullTokens.length] });
      if (r.status !== 200) pullErrors++;
    };
    // Both loops together, as during the burst; the Redis commands they cost are subtracted from the burst's.
    const idleStats0 = await commandStats(admin);
    const idleT0 = performance.now();
    const idlePingLoop = pinger.window();
    const idlePullLoop = loop(pullOnce, PULL_CONCURRENCY, PROBE_GAP_MS.pull);
    await sleep(3000);
    const idlePing = distribution(await idlePingLoop.stop());
    const idlePull = distribution(await idlePullLoop.stop());
    const idleWallS = (performance.now() - idleT0) / 1000;
    const idleCommands = statsDelta(idleStats0, await commandStats(admin));
    if (pullErrors) throw new Error(`${pullErrors} idle pulls failed`);
    console.error(`[bench] ${size}: idle PING p99 ${fmtMs(idlePing.p99)} ms, pull p99 ${fmtMs(idlePull.p99)} ms`);

    // In backlog mode the service is stopped while the orders are created and started again afterwards,
    // so its consumer group finds every order.created waiting: its drain rate is its capacity.
    if (o.backlog) await service.stop();

    // 2. Create in whole-second windows.
    const t0 = Math.ceil(Date.now() / 1000) * 1000 + 1000;
    await sleep(t0 - Date.now());
    const ids: string[] = new Array<string>(n);
    let next = 0;
    let lastWindow = 0;
    const c0 = performance.now();
    await Promise.all(
      Array.from({ length: CREATE_CONCURRENCY }, async () => {
        for (;;) {
          let now = Date.now();
          let into = (now - t0) % 1000;
          if (into >= WINDOW_OPEN_MS) {
            await sleep(1000 - into);
            now = Date.now();
            into = (now - t0) % 1000;
          }
          const w = Math.floor((now - t0) / 1000);
          if (into >= WINDOW_OPEN_MS) continue;
          const i = next++;
          if (i >= n) return;
          if (w >= windows) throw new Error(`creation ran past ${windows} windows`);
          lastWindow = Math.max(lastWindow, w);
          const { order } = await creator.createForBuyer({
            merchantId: merchant(w),
            merchantOrderNo: `o-${i}`,
            amount: AMOUNT,
            currency: 'CNY',
            subject: 'Coffee beans',
            expireMinutes,
            payerAccountId: payer(i),
          });
          ids[i] = order.orderId;
        }
      }),
    );
    const createdS = (performance.now() - c0) / 1000;
    const burstAt = t0 + dueOffsetS * 1000;
    console.error(
      `[bench] ${size}: ${fmtInt(n)} orders created in ${fmtNum(createdS, 1)} s (${lastWindow + 1} windows); burst at +${fmtNum((burstAt - Date.now()) / 1000, 1)} s`,
    );
    if (o.backlog) {
      service = spawnFullStack({ id: `close-reminder ${size} (restarted)`, port, dist: o.dist, env, workDir, cpus: o.cpus });
      await waitUntilServing(service, port, `http://127.0.0.1:${port}/health/ready`, 60_000);
    }
    // Every reminder on the queue before anyone pays (the cancels then find a queue holding all of them).
    const untilPending = async (want: number, what: string) => {
      for (let waited = 0; (await creator.queueBusy()).pending !== want; waited += 50) {
        if (waited > 120_000) throw new Error(`${what}: ${(await creator.queueBusy()).pending} pending after 120 s, expected ${want}`);
        await sleep(50);
      }
    };
    await untilPending(n, 'scheduling');

    // 3. Pay every even order, before anything is due.
    const paidIdx = Array.from({ length: Math.ceil(n / 2) }, (_, k) => 2 * k);
    const payPing = pinger.window();
    const pay0 = performance.now();
    await forEachLimit(paidIdx.length, PAY_CONCURRENCY, async (k) => {
      const i = paidIdx[k];
      const status = await creator.pay(payer(i), ids[i]);
      if (status !== 'PAID') throw new Error(`order ${ids[i]}: plan ${status}`);
    });
    const payPhasePing = distribution(await payPing.stop());
    const paidS = (performance.now() - pay0) / 1000;
    await untilPending(n - paidIdx.length, 'cancelling');
    if (Date.now() > burstAt - 3000) throw new Error(`paying ended ${fmtNum((Date.now() - burstAt) / 1000, 1)} s from the burst: too late to measure it`);
    console.error(`[bench] ${size}: ${fmtInt(paidIdx.length)} orders paid in ${fmtNum(paidS, 1)} s; burst at +${fmtNum((burstAt - Date.now()) / 1000, 1)} s`);

    // 4. The burst.
    await sleep(burstAt - 1500 - Date.now());
    await admin.call('SLOWLOG', 'RESET');
    const stats0 = await commandStats(admin);
    const cpuS0 = cpuSeconds(service.pid) ?? 0;
    const cpuR0 = cpuSeconds(redis.process.pid) ?? 0;
    const w0 = performance.now();
    const pingLoop = pinger.window();
    const pullLoop = loop(pullOnce, PULL_CONCURRENCY, PROBE_GAP_MS.pull);
    await sleep(burstAt - Date.now());
    const dueCpuS = cpuSeconds(service.pid) ?? 0;
    const dueCpuR = cpuSeconds(redis.process.pid) ?? 0;
    const dueT = performance.now();
    const dueSelf = selfCpuSeconds();
    const dueMachine = machineCpuSeconds();
    await sleep(200);
    for (let waited = 0; ; waited += 50) {
      const s = await creator.queueBusy();
      if (s.pending + s.ready + s.inFlight === 0) break;
      if (waited > 120_000) throw new Error(`the burst did not drain in 120 s: ${JSON.stringify(s)}`);
      await sleep(50);
    }
    await sleep(300);
    const drainCpu = {
      serviceS: (cpuSeconds(service.pid) ?? 0) - dueCpuS,
      redisS: (cpuSeconds(redis.process.pid) ?? 0) - dueCpuR,
      benchS: selfCpuSeconds() - dueSelf,
      otherS: NaN,
      wallS: (performance.now() - dueT) / 1000,
    };
    const endMachine = machineCpuSeconds();
    if (dueMachine && endMachine) drainCpu.otherS = Math.max(0, endMachine.busy - dueMachine.busy - drainCpu.serviceS - drainCpu.redisS - drainCpu.benchS);
    const duringPing = distribution(await pingLoop.stop());
    const duringPull = distribution(await pullLoop.stop());
    const wallS = (performance.now() - w0) / 1000;
    const cpu = { serviceS: (cpuSeconds(service.pid) ?? 0) - cpuS0, redisS: (cpuSeconds(redis.process.pid) ?? 0) - cpuR0, wallS };
    const idleRate = new Map(idleCommands.map((c) => [c.command, c.calls / idleWallS]));
    const commands = statsDelta(stats0, await commandStats(admin)).map((c) => ({ ...c, idleCalls: Math.round((idleRate.get(c.command) ?? 0) * wallS) }));
    const slow = await slowlog(admin, (sha) => creator.scriptName(sha));
    const burstPullErrors = pullErrors;
    console.error(`[bench] ${size}: burst drained; PING p99 ${fmtMs(duringPing.p99)} ms, pull p99 ${fmtMs(duringPull.p99)} ms, slowlog ${slow.count}`);

    // 5. Read back: records, event ids, inboxes.
    const records: (Record<string, string | number> | null)[] = new Array(n);
    await forEachLimit(n, 200, async (i) => {
      records[i] = await creator.record(ids[i]);
    });
    const createdAtId = new Map<string, number>();
    const paidAtId = new Map<string, number>();
    for (const key of creator.eventStreams()) {
      let from = '-';
      for (;;) {
        const page = await admin.xrange(key, from, '+', 'COUNT', 5000);
        if (page.length === 0) break;
        for (const [id, fields] of page) {
          const f: Record<string, string> = {};
          for (let k = 0; k + 1 < fields.length; k += 2) f[fields[k]] = fields[k + 1];
          const ms = Number(id.split('-')[0]);
          if (f.type === 'order.created') createdAtId.set(f.orderId, ms);
          if (f.type === 'order.paid') paidAtId.set(f.orderId, ms);
        }
        from = `(${page[page.length - 1][0]}`;
      }
    }
    const inbox: { outerBizId: string; msgId: string }[][] = new Array(n);
    await forEachLimit(n, 200, async (i) => {
      inbox[i] = await creator.reminders(payer(i));
    });

    const states: Record<string, number> = {};
    const lateness: number[] = [];
    const schedLag: number[] = [];
    const settleLag: number[] = [];
    const dues: number[] = [];
    const scheduledAts: number[] = [];
    const cancelledAts: number[] = [];
    let sentMax = 0;
    let unpaidWithOne = 0;
    let unpaidWithNone = 0;
    let duplicates = 0;
    let paidWithReminder = 0;
    let paidRecordsNotCancelled = 0;
    for (let i = 0; i < n; i++) {
      const r = records[i];
      const st = String(r?.state ?? 'none');
      states[st] = (states[st] ?? 0) + 1;
      const mine = inbox[i].filter((m) => m.outerBizId === ids[i]);
      if (mine.length > 1) duplicates += mine.length - 1;
      if (r?.dueAt) dues.push(Number(r.dueAt));
      if (r?.scheduledAt) {
        scheduledAts.push(Number(r.scheduledAt));
        const at = createdAtId.get(ids[i]);
        if (at !== undefined) schedLag.push(Number(r.scheduledAt) - at);
      }
      if (i % 2 === 0) {
        if (mine.length > 0) paidWithReminder++;
        if (st !== 'cancelled') paidRecordsNotCancelled++;
        if (r?.cancelledAt) {
          cancelledAts.push(Number(r.cancelledAt));
          const at = paidAtId.get(ids[i]);
          if (at !== undefined) settleLag.push(Number(r.cancelledAt) - at);
        }
      } else {
        if (mine.length === 1) unpaidWithOne++;
        if (mine.length === 0) unpaidWithNone++;
        if (r?.sentAt && r.dueAt) {
          lateness.push(Number(r.sentAt) - Number(r.dueAt));
          sentMax = Math.max(sentMax, Number(r.sentAt));
        }
      }
    }
    const span = (v: number[]) => (v.length ? (Math.max(...v) - Math.min(...v)) / 1000 : 0);
    const dueFrom = dues.length ? Math.min(...dues) : 0;
    const burstS = (sentMax - dueFrom) / 1000;
    const createdSpan = span(scheduledAts);
    const paidSpan = span(cancelledAts);
    const sched = distribution(schedLag);

    // 6. Side by side: the paid half's cancels against a queue holding all n reminders, one at a time.
    const budgetMs = o.quick ? 5_000 : 20_000;
    const wantedIds = paidIdx.map((i) => ids[i]);
    const sideBySide = async (offer: () => Promise<void>, cancel: (id: string) => Promise<boolean>, label: string) => {
      await offer();
      await admin.call('SLOWLOG', 'RESET');
      const r0 = cpuSeconds(redis.process.pid) ?? 0;
      const lat: number[] = [];
      const pl = pinger.window();
      const s0 = performance.now();
      let missing = 0;
      for (const id of wantedIds) {
        const a = performance.now();
        if (!(await cancel(id))) missing++;
        lat.push(performance.now() - a);
        if (performance.now() - s0 > budgetMs) break;
      }
      const wall = (performance.now() - s0) / 1000;
      const ping = distribution(await pl.stop());
      const d = distribution(lat);
      // A list-scan cancel costs more the further its item sits in the list, and the items paid later sit further:
      // fit latency = a + b·k over the measured cancels and sum it over all of them (b ≈ 0 for a queue that does not scan).
      const k = lat.length;
      const mk = (k - 1) / 2;
      const ml = lat.reduce((x, y) => x + y, 0) / Math.max(1, k);
      let sxy = 0;
      let sxx = 0;
      lat.forEach((l, j) => {
        sxy += (j - mk) * (l - ml);
        sxx += (j - mk) ** 2;
      });
      const slope = sxx > 0 ? Math.max(0, sxy / sxx) : 0;
      const w = wantedIds.length;
      const projectedMs = k >= w ? lat.reduce((x, y) => x + y, 0) : w * (ml - slope * mk) + (slope * w * (w - 1)) / 2;
      const side = {
        done: lat.length,
        wanted: wantedIds.length,
        cancel: d,
        ping,
        wallS: wall,
        projectedAllS: projectedMs / 1000,
        redisCpuShare: ((cpuSeconds(redis.process.pid) ?? 0) - r0) / wall,
        slowlog: await slowlog(admin),
      };
      if (missing) throw new Error(`${label}: ${missing} cancels found nothing`);
      console.error(
        `[bench] ${size} ${label}: ${fmtInt(side.done)}/${fmtInt(side.wanted)} cancels, p50 ${fmtMs(d.p50)} ms, p99 ${fmtMs(d.p99)} ms; PING p99 ${fmtMs(ping.p99)} ms; slowlog ${side.slowlog.count}`,
      );
      return side;
    };
    const dueFar = Date.now() + 86_400_000;
    const lsq = new ListScanQueue(admin, 'crb-list-scan');
    const value = (id: string) => JSON.stringify({ orderId: id });
    const listScan = await sideBySide(
      async () => {
        for (let a = 0; a < n; a += 1000) await lsq.offerMany(ids.slice(a, a + 1000).map((id) => ({ value: value(id), dueAt: dueFar })));
      },
      (id) => lsq.remove(value(id)),
      'list-scan',
    );
    const ours = await sideBySide(
      () => forEachLimit(n, 256, (i) => creator.dqSchedule('crb-cancel', ids[i], dueFar)),
      (id) => creator.dqCancel('crb-cancel', id),
      'this delay queue',
    );

    const sent = states.sent ?? 0;
    const totalCalls = commands.reduce((a, c) => a + Math.max(0, c.calls - c.idleCalls), 0);
    return {
      size,
      n,
      paid: paidIdx.length,
      unpaid: n - paidIdx.length,
      burst: {
        method: 'whole-second creation windows, one merchant per window with lead = L0 + window',
        windows: lastWindow + 1,
        expireMinutes,
        leads: `${lead0}..${lead0 + lastWindow} s`,
        dueSpreadMs: dues.length ? Math.max(...dues) - dueFrom : NaN,
        dueFrom,
        createRate: n / createdS,
        createS: createdS,
      },
      events: {
        backlog: o.backlog,
        createdPerS: createdSpan > 0 ? scheduledAts.length / createdSpan : NaN,
        createdSpanS: createdSpan,
        paidPerS: paidSpan > 0 ? cancelledAts.length / paidSpan : NaN,
        paidSpanS: paidSpan,
        kept: !o.backlog && sched.p99 < 1000,
        scheduleLag: sched,
        settleLag: distribution(settleLag),
      },
      lateness: distribution(lateness),
      latenessValues: lateness,
      burstS,
      sentPerS: burstS > 0 ? sent / burstS : NaN,
      idle: { ping: idlePing, pull: idlePull },
      during: { ping: duringPing, pull: duringPull, pullErrors: burstPullErrors },
      payPhasePing,
      cpu,
      drainCpu,
      commands,
      commandsPerReminder: sent > 0 ? totalCalls / sent : NaN,
      slowlog: slow,
      checks: { states, unpaidWithOne, unpaidWithNone, duplicates, paidWithReminder, paidRecordsNotCancelled },
      listScan,
      ours,
    };
  } finally {
    await creator.close();
    await service.stop();
  }
}

// ---------------------------------------------------------------------------------------------
// Report

function goals(rs: SizeResult[]): GoalLine[] {
  const s10 = rs.find((r) => r.size === '10k');
  const s100 = rs.find((r) => r.size === '100k');
  const all = rs;
  const worst = (f: (r: SizeResult) => number) => Math.max(...all.map(f));
  const lines: GoalLine[] = [];
  if (s10)
    lines.push({
      goal: `${fmtInt(s10.n)} reminders due in one second: lateness p99`,
      target: `≤ ${GOALS.latenessP99At10kMs} ms`,
      measured: `${fmtMs(s10.lateness.p99)} ms (max ${fmtMs(s10.lateness.max)} ms)`,
      met: s10.lateness.p99 <= GOALS.latenessP99At10kMs,
    });
  if (s100)
    lines.push({
      goal: `${fmtInt(s100.n)} reminders due in one second: all due reminders sent`,
      target: `≤ ${GOALS.allSentAt100kS} s (≥ ${fmtInt(s100.unpaid / GOALS.allSentAt100kS)} sent/s)`,
      measured: `${fmtNum(s100.burstS, 2)} s for ${fmtInt(s100.checks.states.sent ?? 0)} sent (${fmtInt(s100.sentPerS)}/s; the other half was paid and cancelled)`,
      met: s100.burstS <= GOALS.allSentAt100kS,
    });
  if (s100)
    lines.push({
      goal: `${fmtInt(s100.n)} reminders due in one second: send rate`,
      target: `≥ ${fmtInt(GOALS.sentPerS)} reminders/s`,
      measured: `${fmtInt(s100.sentPerS)}/s`,
      met: s100.sentPerS >= GOALS.sentPerS,
    });
  if (all.length) {
    lines.push({
      goal: 'Redis PING p99 during the burst (own connection)',
      target: `≤ ${GOALS.pingP99Ms} ms`,
      measured: all.map((r) => `${r.size}: ${fmtMs(r.during.ping.p99)} ms (idle ${fmtMs(r.idle.ping.p99)})`).join('; '),
      met: worst((r) => r.during.ping.p99) <= GOALS.pingP99Ms,
    });
    lines.push({
      goal: 'Message pull p99 through the service during the burst (GET /messages, bearer token)',
      target: `≤ ${GOALS.pullP99Ms} ms`,
      measured: all.map((r) => `${r.size}: ${fmtMs(r.during.pull.p99)} ms (idle ${fmtMs(r.idle.pull.p99)})`).join('; '),
      met: worst((r) => r.during.pull.p99) <= GOALS.pullP99Ms && all.every((r) => r.during.pullErrors === 0),
    });
    lines.push({
      goal: 'Order events handled per second by the close-reminder group (order.created → scheduled)',
      target: `≥ ${fmtInt(GOALS.eventsPerS)}/s`,
      measured: all
        .map((r) =>
          r.events.backlog
            ? `${r.size}: ${fmtInt(r.events.createdPerS)}/s draining a backlog of ${fmtInt(r.n)} (capacity)`
            : `${r.size}: ${fmtInt(r.events.createdPerS)}/s live (${r.events.kept ? `kept up with creation at ${fmtInt(r.burst.createRate)}/s: a lower bound` : `behind creation at ${fmtInt(r.burst.createRate)}/s`})`,
        )
        .join('; '),
      // A consumer that kept up with creation only shows the creation rate: the backlog figures decide when there are any.
      met: (() => {
        const decisive = all.filter((r) => r.events.backlog || !r.events.kept);
        return decisive.length ? Math.min(...decisive.map((r) => r.events.createdPerS)) >= GOALS.eventsPerS : undefined;
      })(),
    });
    lines.push({
      goal: 'Duplicates, and reminders of orders paid before their due time',
      target: '0 and 0 (exactly one for each unpaid order)',
      measured: all
        .map(
          (r) =>
            `${r.size}: ${r.checks.duplicates} duplicates, ${r.checks.paidWithReminder} for paid orders, ${fmtInt(r.checks.unpaidWithOne)}/${fmtInt(r.unpaid)} unpaid with exactly one`,
        )
        .join('; '),
      met: all.every((r) => r.checks.duplicates === 0 && r.checks.paidWithReminder === 0 && r.checks.unpaidWithOne === r.unpaid),
    });
    lines.push({
      goal: 'SLOWLOG during the burst (entries slower than 10 ms)',
      target: '0',
      measured: all.map((r) => `${r.size}: ${r.slowlog.count}${r.slowlog.count ? ` (longest ${fmtInt(r.slowlog.longestUs)} µs)` : ''}`).join('; '),
      met: all.every((r) => r.slowlog.count === 0),
    });
  }
  return lines;
}

function latenessSvg(rs: SizeResult[]): string {
  const W = 720;
  const H = 420;
  const m = { l: 70, r: 180, t: 46, b: 56 };
  const pw = W - m.l - m.r;
  const ph = H - m.t - m.b;
  const colour = ['#4575b4', '#d73027'];
  const maxMs = Math.max(1000, ...rs.map((r) => r.lateness.max));
  const step = maxMs <= 2000 ? 250 : maxMs <= 5000 ? 500 : maxMs <= 10_000 ? 1000 : 2000;
  const x1 = Math.ceil(maxMs / step) * step;
  const X = (v: number) => m.l + (v / x1) * pw;
  const Y = (share: number) => m.t + ph - share * ph;
  const f = (v: number) => v.toFixed(1);
  const out: string[] = [];
  out.push(
    `<svg xmlns="http://www.w3.org/2000/svg" width="${W}" height="${H}" viewBox="0 0 ${W} ${H}" font-family="Helvetica, Arial, sans-serif" font-size="12">`,
  );
  out.push(`<rect width="${W}" height="${H}" fill="#fff"/>`);
  out.push(`<text x="${m.l}" y="24" font-size="15" font-weight="bold">Close reminders due in one second: lateness (sentAt − dueAt), cumulative</text>`);
  for (let s = 0; s <= 1.0001; s += 0.25) {
    out.push(`<line x1="${m.l}" x2="${m.l + pw}" y1="${f(Y(s))}" y2="${f(Y(s))}" stroke="#e5e5e5"/>`);
    out.push(`<text x="${m.l - 8}" y="${f(Y(s) + 4)}" text-anchor="end">${Math.round(s * 100)}%</text>`);
  }
  for (let v = 0; v <= x1; v += step) {
    out.push(`<line x1="${f(X(v))}" x2="${f(X(v))}" y1="${m.t}" y2="${m.t + ph}" stroke="#e5e5e5"/>`);
    out.push(`<text x="${f(X(v))}" y="${m.t + ph + 18}" text-anchor="middle">${v >= 1000 ? `${v / 1000} s` : `${v} ms`}</text>`);
  }
  out.push(`<rect x="${m.l}" y="${m.t}" width="${pw}" height="${ph}" fill="none" stroke="#888"/>`);
  out.push(`<text x="${m.l + pw / 2}" y="${H - 14}" text-anchor="middle">lateness of a reminder (its record's sentAt − dueAt, Redis clock)</text>`);
  out.push(`<text transform="translate(18 ${m.t + ph / 2}) rotate(-90)" text-anchor="middle">share of the burst's reminders sent</text>`);
  const gx = f(X(GOALS.latenessP99At10kMs));
  out.push(`<line x1="${gx}" x2="${gx}" y1="${m.t}" y2="${m.t + ph}" stroke="#555" stroke-dasharray="2 3"/>`);
  out.push(`<text x="${Number(gx) + 4}" y="${m.t + 14}" fill="#555">goal: p99 ≤ 1 s at 10k</text>`);
  rs.forEach((r, k) => {
    const s = [...r.latenessValues].sort((a, b) => a - b);
    const pts: string[] = [];
    const stepN = Math.max(1, Math.floor(s.length / 400));
    for (let i = 0; i < s.length; i += stepN) pts.push(`${f(X(s[i]))},${f(Y((i + 1) / s.length))}`);
    if (s.length) pts.push(`${f(X(s[s.length - 1]))},${f(Y(1))}`);
    out.push(`<polyline points="${pts.join(' ')}" fill="none" stroke="${colour[k % colour.length]}" stroke-width="2"/>`);
    const ly = m.t + 14 + k * 22;
    const lx = m.l + pw + 16;
    out.push(`<line x1="${lx}" x2="${lx + 26}" y1="${ly}" y2="${ly}" stroke="${colour[k % colour.length]}" stroke-width="2"/>`);
    out.push(`<text x="${lx + 32}" y="${ly + 4}">${r.size} due: ${fmtInt(r.unpaid)} sent</text>`);
  });
  out.push('</svg>');
  return out.join('\n') + '\n';
}

function sizeTable(rs: SizeResult[]): string {
  const row = (label: string, f: (r: SizeResult) => string) => [label, ...rs.map(f)];
  return markdownTable(
    ['', ...rs.map((r) => `${fmtInt(r.n)} due (${fmtInt(r.unpaid)} unpaid)`)],
    [
      row('Orders created (in process), per second', (r) => `${fmtInt(r.burst.createRate)}/s over ${fmtNum(r.burst.createS, 1)} s`),
      row('Creation windows (merchants), leads', (r) => `${r.burst.windows}, ${r.burst.leads} (expireMinutes ${r.burst.expireMinutes})`),
      row('Spread of the dueAt of all records', (r) => `${fmtInt(r.burst.dueSpreadMs)} ms`),
      row('order.created handled per second (scheduledAt span)', (r) => `${fmtInt(r.events.createdPerS)}/s over ${fmtNum(r.events.createdSpanS, 1)} s`),
      row(
        'Scheduling lag p50 / p99 / max (event id → scheduledAt)',
        (r) => `${fmtMs(r.events.scheduleLag.p50)} / ${fmtMs(r.events.scheduleLag.p99)} / ${fmtMs(r.events.scheduleLag.max)} ms`,
      ),
      row('order.paid handled per second (cancelledAt span)', (r) => `${fmtInt(r.events.paidPerS)}/s over ${fmtNum(r.events.paidSpanS, 1)} s`),
      row('Cancel lag p50 / p99 (order.paid id → cancelledAt)', (r) => `${fmtMs(r.events.settleLag.p50)} / ${fmtMs(r.events.settleLag.p99)} ms`),
      row(
        'Lateness p50 / p90 / p99 / max',
        (r) => `${fmtMs(r.lateness.p50)} / ${fmtMs(r.lateness.p90)} / ${fmtMs(r.lateness.p99)} / ${fmtMs(r.lateness.max)} ms`,
      ),
      row('Whole burst out (last sentAt − first dueAt)', (r) => `${fmtNum(r.burstS, 2)} s (${fmtInt(r.sentPerS)} sent/s)`),
      row(
        'PING p50 / p99 / max: idle → burst',
        (r) =>
          `${fmtMs(r.idle.ping.p50)} / ${fmtMs(r.idle.ping.p99)} / ${fmtMs(r.idle.ping.max)} → ${fmtMs(r.during.ping.p50)} / ${fmtMs(r.during.ping.p99)} / ${fmtMs(r.during.ping.max)} ms`,
      ),
      row(
        'Pull p50 / p99: idle → burst',
        (r) =>
          `${fmtMs(r.idle.pull.p50)} / ${fmtMs(r.idle.pull.p99)} → ${fmtMs(r.during.pull.p50)} / ${fmtMs(r.during.pull.p99)} ms (${r.during.pull.n} pulls, ${r.during.pullErrors} errors)`,
      ),
      row(
        'CPU over the burst window: service / redis-server',
        (r) =>
          `${fmtNum(r.cpu.serviceS, 2)} s / ${fmtNum(r.cpu.redisS, 2)} s in ${fmtNum(r.cpu.wallS, 2)} s (${fmtNum((100 * r.cpu.serviceS) / r.cpu.wallS, 0)}% / ${fmtNum((100 * r.cpu.redisS) / r.cpu.wallS, 0)}% of a core)`,
      ),
      row(
        'CPU from the due second until the queue was empty: service / redis-server / this process (PING, pulls, polls) / everything else (other processes, CPU charged to none)',
        (r) =>
          `${[r.drainCpu.serviceS, r.drainCpu.redisS, r.drainCpu.benchS, r.drainCpu.otherS].map((c) => fmtNum((100 * c) / r.drainCpu.wallS, 0)).join('% / ')}% of a core over ${fmtNum(r.drainCpu.wallS, 2)} s; ${fmtInt((1e6 * r.drainCpu.serviceS) / Math.max(1, r.checks.states.sent ?? 0))} / ${fmtInt((1e6 * r.drainCpu.redisS) / Math.max(1, r.checks.states.sent ?? 0))} µs per sent reminder`,
      ),
      row('Redis commands per sent reminder (burst window minus the same window idle)', (r) => fmtNum(r.commandsPerReminder, 1)),
      row('order.created handling', (r) => (r.events.backlog ? 'backlog: service stopped while creating, restarted after' : 'live, while creating')),
      row(
        'SLOWLOG entries ≥ 10 ms (burst)',
        (r) => `${r.slowlog.count}${r.slowlog.count ? `, longest ${fmtInt(r.slowlog.longestUs)} µs (${r.slowlog.longestCommand})` : ''}`,
      ),
      row('Record states', (r) =>
        Object.entries(r.checks.states)
          .map(([k, v]) => `${k} ${fmtInt(v)}`)
          .join(', '),
      ),
      row('Unpaid orders with exactly one reminder / none', (r) => `${fmtInt(r.checks.unpaidWithOne)} / ${fmtInt(r.checks.unpaidWithNone)}`),
      row(
        'Duplicates; paid orders with a reminder; paid records not cancelled',
        (r) => `${r.checks.duplicates}; ${r.checks.paidWithReminder}; ${r.checks.paidRecordsNotCancelled}`,
      ),
    ],
    ['left', ...rs.map(() => 'right' as const)],
  );
}

function cancelTable(rs: SizeResult[]): string {
  const rows: string[][] = [];
  for (const r of rs) {
    for (const [label, s] of [
      ['list-scan (Redisson-style)', r.listScan],
      ['this delay queue', r.ours],
    ] as const) {
      rows.push([
        `${fmtInt(r.n)} pending`,
        label,
        `${fmtInt(s.done)} of ${fmtInt(s.wanted)}`,
        `${fmtMs(s.cancel.p50)} / ${fmtMs(s.cancel.p99)} / ${fmtMs(s.cancel.max)}`,
        `${fmtMs(s.ping.p50)} / ${fmtMs(s.ping.p99)}`,
        `${fmtNum(s.projectedAllS, 1)} s`,
        `${fmtNum(100 * (s.redisCpuShare ?? NaN), 0)}%`,
        `${s.slowlog.count}${s.slowlog.count ? ` (longest ${fmtInt(s.slowlog.longestUs)} µs)` : ''}`,
      ]);
    }
    rows.push([
      `${fmtInt(r.n)} pending`,
      'ratio list-scan / ours',
      '',
      `${fmtNum(r.listScan.cancel.p50 / r.ours.cancel.p50, 0)}× / ${fmtNum(r.listScan.cancel.p99 / r.ours.cancel.p99, 0)}×`,
      `${fmtNum(r.listScan.ping.p99 / r.ours.ping.p99, 1)}× (p99)`,
      `${fmtNum(r.listScan.projectedAllS / r.ours.projectedAllS, 0)}×`,
      '',
      '',
    ]);
  }
  return markdownTable(
    [
      'Queue',
      'Design',
      'Cancels measured',
      'Cancel p50 / p99 / max (ms)',
      'PING p50 / p99 (ms)',
      'All paid cancels, one at a time',
      'redis-server CPU',
      'SLOWLOG ≥ 10 ms',
    ],
    rows,
    ['left', 'left', 'right', 'right', 'right', 'right', 'right', 'left'],
  );
}

function commandsTable(r: SizeResult): string {
  const sent = r.checks.states.sent ?? 0;
  return markdownTable(
    ['Command', 'Calls', 'Same window idle', 'Per sent reminder (minus idle)', 'µs per call', 'Share of Redis time'],
    r.commands.slice(0, 14).map((c) => {
      const totalUs = r.commands.reduce((a, x) => a + x.usec, 0);
      return [
        c.command,
        fmtInt(c.calls),
        fmtInt(c.idleCalls),
        fmtNum(Math.max(0, c.calls - c.idleCalls) / Math.max(1, sent), 2),
        fmtNum(c.usec / c.calls, 1),
        `${fmtNum((100 * c.usec) / totalUs, 0)}%`,
      ];
    }),
    ['left', 'right', 'right', 'right', 'right', 'right'],
  );
}

function missedNotes(rs: SizeResult[], gl: GoalLine[]): string[] {
  const out: string[] = [];
  for (const g of gl) if (g.met === false) out.push(`- **${g.goal}**: target ${g.target}, measured ${g.measured}.`);
  if (out.length === 0) return [];
  const why: string[] = [];
  for (const r of rs) {
    const sent = Math.max(1, r.checks.states.sent ?? 0);
    const c = r.drainCpu;
    const per = (x: number) => (1e6 * x) / sent;
    const totalUs = per(c.serviceS) + per(c.redisS) + per(c.benchS) + per(Number.isFinite(c.otherS) ? c.otherS : 0);
    why.push(
      `- ${r.size}: from the due second until the queue was empty (${fmtNum(c.wallS, 2)} s) the service used ${fmtNum((100 * c.serviceS) / c.wallS, 0)}% of a core, ` +
        `redis-server ${fmtNum((100 * c.redisS) / c.wallS, 0)}%, this process (PING and pull loops, polls) ${fmtNum((100 * c.benchS) / c.wallS, 0)}% and everything else on the machine ` +
        `${fmtNum((100 * c.otherS) / c.wallS, 0)}%: ${fmtInt(per(c.serviceS))} µs of service CPU and ${fmtInt(per(c.redisS))} µs of Redis CPU per sent reminder, ` +
        `${fmtInt(totalUs)} µs of machine CPU in all, so two cores top out near ${fmtInt(2e6 / totalUs)} reminders/s at this cost. ` +
        `${fmtNum(r.commandsPerReminder, 1)} Redis commands per sent reminder, script internals included (burst window minus the same window idle).`,
    );
    if (r.slowlog.count) why.push(`- ${r.size}: the slowest SLOWLOG entry (${fmtInt(r.slowlog.longestUs)} µs) is ${r.slowlog.longestCommand}.`);
  }
  const s100 = rs.find((r) => r.size === '100k');
  if (s100 && s100.sentPerS < GOALS.sentPerS)
    why.push(`- The send rate is ${fmtNum(100 * (1 - s100.sentPerS / GOALS.sentPerS), 0)}% short of ${fmtInt(GOALS.sentPerS)}/s.`);
  const pingWorst = Math.max(...rs.map((r) => r.during.ping.p99));
  if (pingWorst > GOALS.pingP99Ms)
    why.push(
      `- PING p99 is ${fmtNum(100 * (pingWorst / GOALS.pingP99Ms - 1), 0)}% over ${GOALS.pingP99Ms} ms: a PING waits behind the commands the service already sent (up to CLOSE_REMINDER_SEND_CONCURRENCY sends in flight, each with a script on the wire; Redis runs what it read from one connection before it reads the next) and for a core, which redis-server shares with the service, this process and other jobs. Fewer sends in flight trade send rate for PING latency: see docs/benchmarks.md.`,
    );
  return ['## Goals missed', '', ...out, '', 'Where the time went:', '', ...why, ''];
}

// ---------------------------------------------------------------------------------------------

export async function main(args: string[]): Promise<void> {
  const pin = args.includes('--pin');
  const o = parseSectionArgs(
    args.filter((a) => a !== '--pin'),
    SIZES,
  );
  const standard = args.length === 0;
  const workDir = benchWorkDir('redis-pay-cr-');
  const dist = snapshotBuild(o.dist, join(workDir, 'build'));
  // --pin: the service alone on the last CPU; this process, the PING probe and redis-server (started next) on the others.
  const split = pin ? cpuSplit() : undefined;
  if (pin && !split) console.error('[bench] cannot pin CPUs (fewer than 2 CPUs or no taskset); the scheduler places everything');
  if (split) pinProcess(split.rest);
  const redis = await startBenchRedis();
  const results: SizeResult[] = [];
  for (const size of SIZES) {
    if (!o.sections.has(size)) continue;
    const n = o.quick ? QUICK_N[size] : SIZE_N[size];
    results.push(await measureSize(size, n, { dist, quick: o.quick, backlog: size === '100k', cpus: split?.server }, redis, workDir));
  }

  const knobs = Object.entries(process.env)
    .filter(([k]) => k.startsWith('CLOSE_REMINDER_'))
    .map(([k, v]) => `${k}=${v}`)
    .join(' ');
  const env = environmentInfo(redis.version, { 'Service knobs (environment)': knobs || 'defaults' });
  const gl = goals(results);
  const outDir = standard ? RESULTS_DIR : join(tmpdir(), 'redis-pay-bench');
  const svgPath = standard ? SVG_PATH : join(outDir, 'close-reminder-lateness.svg');
  const svgRef = standard ? '../../docs/close-reminder-lateness.svg' : svgPath;
  mkdirSync(join(svgPath, '..'), { recursive: true });
  writeFileSync(svgPath, latenessSvg(results));
  console.log(`[bench] written ${svgPath}`);

  const md: string[] = [...reportHead(NAME, args, env, gl)];
  md.push(...missedNotes(results, gl));
  md.push(
    '## How the burst was made',
    '',
    "A reminder is due at the order's expiresAt − the merchant's lead, and expiresAt is the creation time + expireMinutes, so orders created over T seconds would fall due over T seconds.",
    'The bench therefore creates the orders in whole-second windows and gives window i its own opted-in merchant (admin `PUT /admin/close-reminder/merchants/{id}`, before anything is created) whose lead is L0 + i seconds:',
    'an order created δ into window i (t0 + i s + δ) is due at t0 + 60·expireMinutes − L0 + δ, the same second for every window.',
    `New creations start only in the first ${WINDOW_OPEN_MS} ms of a second, so a create still queued at the window's end lands inside it; the dueAt of every record is read back and its spread is in the table below.`,
    `Orders are created in this process by the build's \`OrdersService.createForBuyer\` (a Nest application context on the same Redis whose background workers are stopped at once), ${CREATE_CONCURRENCY} in flight, each for its own payer; every even one is then paid in the same way through the payment plans (create plan + pay, ${PAY_CONCURRENCY} in flight), before anything is due.`,
    'The reminders are scheduled and cancelled by the service alone, from the order events (the `close-reminder` consumer group), and sent by its delay-queue processor. expireMinutes is chosen so that the orders close at least 10 minutes after the burst.',
    '',
    '## End to end',
    '',
    sizeTable(results),
    '',
    `Lateness plot: [${svgRef}](${svgRef}).`,
    '',
    "The scheduling lag is measured from the order.created stream id (the time the event was written, ms) to the record's scheduledAt (Redis time of the schedule script); at 10k the events are handled while the orders are being created (a lag that grows would mean the consumer fell behind the creation); at 100k the service is stopped while the orders are created and started again afterwards, so the lag there is mostly the wait in that backlog and the rate is the consumer group's capacity.",
    'The cancel lag is the same for order.paid → cancelledAt. PING is a sequential loop on its own connection in a process of its own (bench/lib/ping-probe.ts; in this process it would also wait for the event loop of this process, 1–2 ms at p99 with Redis idle), ' +
      `pausing ${PROBE_GAP_MS.ping} ms after each reply; pulls are \`GET /messages?limit=50\` with a bearer token of a payer whose reminder is in the burst, ` +
      `${PULL_CONCURRENCY} loops on keep-alive connections, each pausing ${PROBE_GAP_MS.pull} ms after each reply (probes paced so that they do not take the cores they measure). Idle figures are taken just before the orders are created.`,
    '',
  );
  for (const r of results) md.push(`### Redis commands during the ${r.size} burst (INFO commandstats delta, every client)`, '', commandsTable(r), '');
  md.push(
    '## Cancels on payment: list-scan baseline vs this delay queue',
    '',
    'The same run, the same redis-server, after the burst: a queue holding one pending reminder per order (value `{"orderId": …}`, offered in creation order), then the paid half cancelled in the order they were paid, one awaited call at a time,',
    `for at most ${o.quick ? 5 : 20} s per design, with a PING loop on its own connection meanwhile. list-scan is the seed's Redisson-style delay queue (bench/lib/list-scan-queue.ts: offer = timeout zset + list, remove = one Lua script scanning the list);`,
    '"this delay queue" is `DelayQueueService.cancel` of the build, the call the module makes on order.paid. "All paid cancels" is the measured total when every cancel ran, else a projection: a straight line fitted to latency against the cancel\'s rank, summed over all of them (a list-scan cancel scans past the unpaid reminders offered before its own, so later ones cost more).',
    '',
    cancelTable(results),
    '',
  );
  writeResult(NAME, md.join('\n'), outDir);
  writeJsonResult(
    NAME,
    benchJson(
      {
        bench: NAME,
        args,
        environment: env,
        goals: gl,
        dist: o.dist,
        ratios: Object.fromEntries(
          results.flatMap((r) => [
            [`listScanOverOursCancelP99_${r.size}`, jsonNum(r.listScan.cancel.p99 / r.ours.cancel.p99)],
            [`sentPerS_${r.size}`, jsonNum(r.sentPerS, 0)],
          ]),
        ),
      },
      {
        sizes: results.map(({ latenessValues, ...rest }) => ({ ...rest, latenessSampleCount: latenessValues.length })),
      },
    ),
    outDir,
  );
  await redis.stop();
}
