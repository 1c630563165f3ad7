/**
 * reserve-breakdown: where a reservation's Redis time goes, per piece. The built service (`--dist DIR`, default
 * ./dist) on a redis-server of its own; N reservations of one unit (each a new buyer), then a drain of the
 * background work they cause (consumer groups, the delay queue, close-reminder). An idle window of the same length
 * before is subtracted. Every top-level command is timed by SLOWLOG (threshold 0) and grouped by script (the keys
 * it names) or command; INFO commandstats gives calls per command (inside scripts included). SLOWLOG timing inflates
 * every script (its inner commands are logged too): read its rows as shares, and the PLAIN line (a window without
 * SLOWLOG: INFO cpu, idle subtracted) as the cost. Compare builds in runs interleaved back to back.
 *
 * npx tsx bench/reserve-breakdown.ts [--dist DIR] [--n 2000] [--c 20 in flight] [--slowlog 0] [--bound 1 [--batch 100]]
 *
 * --bound 1 adds the bound (see bound()): the reserve script alone, the order script per order, and orders made
 * in batches, on the same redis-server after the service's work has drained. LUA_DIR picks the scripts it runs.
 */
import { resolve } from 'node:path';
import Redis from 'ioredis';
import { benchWorkDir } from './lib/cleanup';
import { commandStats, statsDelta } from './lib/command-stats';
import { userToken } from './lib/full-stack';
import { forEachLimit } from './lib/limit';
import { startBenchRedis } from './lib/redis-server';
import { ADMIN_JSON as ADMIN, http, startService, UNDER_LOAD_ENV } from './lib/service-http';
import { connectScriptRedis } from './lib/bare-server';
import type { AppConfig } from '../src/platform/config/app-config';
import { KeyBuilder } from '../src/platform/redis/key-builder';
import { activityKeys, shardKeys } from '../src/features/seckill/seckill.keys';
import type { ActivityRecord } from '../src/features/seckill/seckill.types';
import { newOrderId, orderIndexKey, orderKeys, orderNumberKeyOf } from '../src/features/orders/order.keys';

/**
 * The bound: the cheapest Redis work that keeps, per reservation, an order record, its event and its expiry, each
 * way measured by INFO cpu and commandstats on the same redis-server once the service's work has drained: reserve-5.lua alone,
 * create-4.lua per order, and one script creating `batch` orders (the order hash with its TTL, the number index, the
 * order.created event; the expiry is the reservation's due entry, already written by reserve-5.lua).
 */
const BATCH_CREATE = `
local n = tonumber(ARGV[1])
local maxlen = ARGV[2]
local ttl = tonumber(ARGV[3])
local t = redis.call('TIME')
local now = string.format('%d', t[1] * 1000 + math.floor(t[2] / 1000))
for i = 0, n - 1 do
  local orderKey, indexKey, eventsKey = KEYS[3 * i + 1], KEYS[3 * i + 2], KEYS[3 * i + 3]
  if not redis.call('GET', indexKey) then
    local set = {'version', '1', 'updatedAt', now}
    for field, value in pairs(cjson.decode(ARGV[4 + i])) do set[#set + 1] = field; set[#set + 1] = value end
    redis.call('HSET', orderKey, unpack(set))
    redis.call('PEXPIRE', orderKey, ttl)
    redis.call('SET', indexKey, ARGV[4 + n + i], 'PX', ttl)
    redis.call('XADD', eventsKey, 'MAXLEN', '~', maxlen, '*', 'type', 'order.created', 'orderId', ARGV[4 + n + i], 'data', ARGV[4 + i])
  end
end
return n`;

/** The least per order: the record as one JSON string with its TTL and a two-field event; no number index (the id derived from the reservation's). */
const BATCH_MINIMAL = `
local n = tonumber(ARGV[1])
local maxlen = ARGV[2]
local ttl = tonumber(ARGV[3])
for i = 0, n - 1 do
  redis.call('SET', KEYS[2 * i + 1], ARGV[4 + i], 'PX', ttl)
  redis.call('XADD', KEYS[2 * i + 2], 'MAXLEN', '~', maxlen, '*', 'type', 'order.created', 'orderId', ARGV[4 + n + i])
end
return n`;

async function bound(url: string, activityId: string, n: number, conc: number, batch: number): Promise<void> {
  const s = await connectScriptRedis(url, { maxRetriesPerRequest: 1 });
  const builder = new KeyBuilder({ redis: { keyPrefix: 'rpsk' } } as AppConfig);
  const a = JSON.parse((await s.redis.get(activityKeys(builder, activityId).config))!) as ActivityRecord;
  const k = shardKeys(
    builder,
    activityId,
    'hot',
    0,
    a.products.find((p) => p.productId === 'hot')!,
  );
  const fields = (i: number, orderId: string) =>
    JSON.stringify({
      orderId,
      merchantId: 'bench_merchant',
      merchantOrderNo: `sk_${i.toString(16).padStart(24, '0')}`,
      amount: '990',
      currency: 'CNY',
      subject: 'bench: Product hot',
      expireMinutes: '15',
      fingerprint: 'f'.repeat(64),
      status: 'CREATED',
      createdAt: String(Date.now()),
      expiresAt: String(Date.now() + 900_000),
      accountId: `acc-${i}`,
      payerAccountId: `acc-${i}`,
      activePlan: '',
      planSeq: '0',
    });
  let seq = 1e6;
  const measureOp = async (label: string, ops: number, calls: number, one: (i: number) => Promise<unknown>) => {
    const b = await commandStats([url]);
    const c0 = await redisCpuUs(s.redis);
    await forEachLimit(calls, conc, async () => void (await one(seq++)));
    const c1 = await redisCpuUs(s.redis);
    const d = statsDelta(b, await commandStats([url]));
    const cmds = Object.entries(d)
      .filter(([name]) => !['info', 'evalsha', 'eval'].includes(name))
      .reduce((t, [, v]) => t + v.calls, 0);
    const usec = Object.entries(d)
      .filter(([name]) => name === 'evalsha' || name === 'eval')
      .reduce((t, [, v]) => t + v.usec, 0);
    console.log(`BOUND | ${label} | ${((c1 - c0) / ops).toFixed(1)} | ${(usec / ops).toFixed(1)} | ${(cmds / ops).toFixed(2)} |`);
  };
  console.log('BOUND | work per reservation | Redis CPU µs (INFO cpu) | EVALSHA µs (commandstats) | commands inside scripts |');
  await measureOp('reserve-5.lua alone', n, n, (i) =>
    s.run('seckill/reserve', [k.stock, k.rsv, k.holds, k.claims, k.due], [`sk_${i.toString(16).padStart(24, '0')}`, `acc-${i}`, 1, 1, 900_000, 0]),
  );
  const order = (i: number) => {
    const no = `sk_${i.toString(16).padStart(24, '0')}`;
    const orderId = newOrderId('bench_merchant', no);
    const numberKey = orderNumberKeyOf('bench_merchant', no);
    return { orderId, numberKey, keys: orderKeys(builder, orderId), index: orderIndexKey(builder, numberKey), legacy: orderKeys(builder, numberKey)[0] };
  };
  await measureOp('create-4.lua, one order per call', n, n, (i) => {
    const o = order(i);
    return s.run('orders/create', [o.index, o.legacy, o.keys[0], o.keys[2]], [o.orderId, o.numberKey, fields(i, o.orderId), 1_000_000, 86_400_000, 0]);
  });
  const sha = (await s.redis.script('LOAD', BATCH_CREATE)) as string;
  await measureOp(`one script creating ${batch} orders (record, index, event)`, n, Math.ceil(n / batch), (j) => {
    const os = Array.from({ length: batch }, (_, i) => order(j * batch + i + 5e6));
    return s.redis.evalsha(
      sha,
      os.length * 3,
      ...os.flatMap((o) => [o.keys[0], o.index, o.keys[2]]),
      batch,
      1_000_000,
      86_400_000,
      ...os.map((o, i) => fields(j * batch + i, o.orderId)),
      ...os.map((o) => o.orderId),
    );
  });
  const minimal = (await s.redis.script('LOAD', BATCH_MINIMAL)) as string;
  await measureOp(`one script creating ${batch} orders (record as one string, a two-field event, no index)`, n, Math.ceil(n / batch), (j) => {
    const os = Array.from({ length: batch }, (_, i) => order(j * batch + i + 9e6));
    return s.redis.evalsha(
      minimal,
      os.length * 2,
      ...os.flatMap((o) => [o.keys[0], o.keys[2]]),
      batch,
      1_000_000,
      86_400_000,
      ...os.map((o, i) => fields(j * batch + i, o.orderId)),
      ...os.map((o) => o.orderId),
    );
  });
  s.redis.disconnect();
}

const arg = (name: string, def: string) => {
  const i = process.argv.indexOf(`--${name}`);
  return i >= 0 ? process.argv[i + 1] : def;
};
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

type Entry = [number, number, number, string[]];

async function redisCpuUs(r: Redis): Promise<number> {
  const info = await r.info('cpu');
  const f = (k: string) => Number(new RegExp(`${k}:([0-9.]+)`).exec(info)?.[1] ?? 0);
  return (f('used_cpu_sys') + f('used_cpu_user')) * 1e6;
}

/** A top-level command as a row: a script by its sha's first characters and its first key's shape, else the command and its key's shape. */
function label(args: string[]): string {
  const cmd = args[0].toLowerCase();
  if (cmd === 'evalsha' || cmd === 'eval') {
    const name = args[1].slice(0, 6);
    const key = (args[3] ?? '').replace(/\{[^}]*\}/g, '{…}').replace(/[0-9a-f]{16,}/g, '…');
    return `script ${name} ${key}`.slice(0, 80);
  }
  const key = (args[1] ?? '')
    .replace(/\{[^}]*\}/g, '{…}')
    .replace(/[0-9a-f]{16,}/g, '…')
    .replace(/:\d+$/g, ':N');
  return `${cmd} ${key}`.slice(0, 70);
}

/**
 * --expire 1: the expiry of every reservation made so far, unpaid, and what it costs Redis per reservation: whatever
 * expires them (the order-expiry entries when the build arms them, else the reservations' due entries) is made due
 * now, and the window runs until nothing is reserved and the work it causes (events, consumer groups) has drained.
 */
async function expireAll(r: Redis, url: string, port: number, activityId: string, drainMs: number): Promise<void> {
  const reservedNow = async () => {
    const a = await http(port, 'GET', `/admin/seckill/activities/${activityId}`, ADMIN);
    return (JSON.parse(a.body) as { products: { reserved: number }[] }).products[0].reserved;
  };
  const count = await reservedNow();
  const slowlog = arg('slowlog', '1') !== '0';
  if (slowlog) {
    await r.config('SET', 'slowlog-log-slower-than', '0');
    await r.config('SET', 'slowlog-max-len', '2000000');
    await r.slowlog('RESET');
  }
  const b = await commandStats([url]);
  const c0 = await redisCpuUs(r);
  const t0 = Date.now();
  const expiry = (await r.keys('rpsk:delay-queue:*order-expiry*:pending'))[0];
  const entries = expiry ? await r.zcard(expiry) : 0;
  if (entries > 0) {
    const members = await r.zrange(expiry, '0', '-1');
    for (let i = 0; i < members.length; i += 1000) await r.zadd(expiry, 'XX', ...members.slice(i, i + 1000).flatMap((m) => ['0', m]));
  } else {
    for (const due of await r.keys('rpsk:seckill:*:due')) {
      const members = await r.zrange(due, '0', '-1');
      for (let i = 0; i < members.length; i += 1000) await r.zadd(due, 'XX', ...members.slice(i, i + 1000).flatMap((m) => ['0', m]));
    }
  }
  while ((await reservedNow()) > 0) {
    if (Date.now() - t0 > 180_000) throw new Error('the reservations did not expire within 3 minutes');
    await sleep(200);
  }
  const settled = Date.now() - t0;
  await sleep(drainMs);
  const cpu = (await redisCpuUs(r)) - c0;
  const d = statsDelta(b, await commandStats([url]));
  const cmds = Object.entries(d)
    .filter(([name]) => !['info', 'evalsha', 'eval', 'config', 'slowlog', 'scan'].includes(name))
    .reduce((t, [, v]) => t + v.calls, 0);
  if (slowlog) {
    const log = (await r.slowlog('GET', -1)) as Entry[];
    await r.config('SET', 'slowlog-log-slower-than', '-1');
    const by = new Map<string, number>();
    for (const [, , , args] of log) {
      const l = label(args.map(String));
      if (l.startsWith('script')) by.set(l, (by.get(l) ?? 0) + 1);
    }
    for (const [l, c] of [...by].sort((x, y) => y[1] - x[1])) console.log(`EXPIRE | ${l} | ${(c / count).toFixed(2)} per reservation |`);
  }
  const top = Object.entries(d)
    .sort((x, y) => y[1].usec - x[1].usec)
    .slice(0, 12)
    .map(([name, v]) => `${name} ${(v.calls / count).toFixed(2)} (${(v.usec / count).toFixed(1)} µs)`);
  console.log(`EXPIRE commandstats per reservation: ${top.join(', ')}`);
  console.log(
    `EXPIRE ${count} reservations (${entries > 0 ? 'order-expiry entries' : 'due entries'} made due), all released in ${settled} ms: Redis CPU ${(cpu / count).toFixed(1)} µs, EVALSHA ${((d.evalsha?.calls ?? 0) / count).toFixed(2)}, commands ${(cmds / count).toFixed(2)} per reservation (idle not subtracted)`,
  );
}

async function main() {
  const dist = resolve(arg('dist', 'dist'));
  const n = Number(arg('n', '2000'));
  const conc = Number(arg('c', '20'));
  const redis = await startBenchRedis();
  const r = new Redis(redis.url);
  const workDir = benchWorkDir('reserve-breakdown');
  const svc = await startService(dist, workDir, 'svc', 'rpsk', { ...UNDER_LOAD_ENV, ORDERS_EVENTS_MAXLEN: '1000000' }, { REDIS_URL: redis.url });
  try {
    const activityId = `b${Date.now().toString(36)}`;
    const a = await http(svc.port, 'POST', '/admin/seckill/activities', ADMIN, {
      activityId,
      merchantId: 'bench_merchant',
      title: 'bench',
      startsAt: new Date(Date.now() - 1000).toISOString(),
      endsAt: new Date(Date.now() + 3 * 3600_000).toISOString(),
      payWindowMinutes: 15,
      perUserLimit: 1000,
      products: [{ productId: 'hot', title: 'Hot', price: 990, currency: 'CNY', stock: 10_000_000 }],
    });
    if (a.status !== 201) throw new Error(`activity: ${a.status} ${a.body}`);
    let k = 0;
    const reserve = async (tag: string, count: number) => {
      const base = k;
      k += count;
      await forEachLimit(count, conc, async (j) => {
        const i = base + j;
        const res = await http(
          svc.port,
          'POST',
          `/seckill/activities/${activityId}/products/hot/reservations`,
          { authorization: `Bearer ${userToken(`bk-${tag}-${i}`)}`, 'content-type': 'application/json' },
          { quantity: 1, requestId: `r${i}` },
        );
        if (res.status !== 201) throw new Error(`reserve: ${res.status} ${res.body}`);
      });
    };
    await reserve('w', 300);
    await sleep(3000);
    const window = async (work: () => Promise<unknown>, drainMs: number, slowlog: boolean) => {
      await r.config('SET', 'slowlog-log-slower-than', slowlog ? '0' : '-1');
      await r.config('SET', 'slowlog-max-len', '2000000');
      await r.slowlog('RESET');
      const before = await commandStats([redis.url]);
      const cpu0 = await redisCpuUs(r);
      const t0 = Date.now();
      await work();
      await sleep(drainMs);
      const wall = Date.now() - t0;
      const cpu = (await redisCpuUs(r)) - cpu0;
      const after = await commandStats([redis.url]);
      const log = (await r.slowlog('GET', -1)) as Entry[];
      await r.config('SET', 'slowlog-log-slower-than', '-1');
      const by = new Map<string, { calls: number; usec: number }>();
      for (const [, , us, args] of log) {
        if (['slowlog', 'config', 'info'].includes(String(args[0]).toLowerCase())) continue;
        const l = label(args.map(String));
        const o = by.get(l) ?? { calls: 0, usec: 0 };
        o.calls++;
        o.usec += us;
        by.set(l, o);
      }
      return { by, stats: statsDelta(before, after), wall, cpu };
    };
    const drain = Number(arg('drain', '4000'));
    const idleP = await window(() => sleep(0), drain, false);
    const plain = await window(() => reserve('p', n), drain, false);
    const cpuPer = (plain.cpu - (idleP.cpu * plain.wall) / idleP.wall) / n;
    const ev = (x: typeof plain) => x.stats.evalsha ?? { calls: 0, usec: 0 };
    console.log(
      `PLAIN ${dist}: Redis CPU (INFO cpu, idle subtracted) ${cpuPer.toFixed(1)} µs/reservation; EVALSHA ${(ev(plain).calls / n).toFixed(2)} calls ${(ev(plain).usec / n).toFixed(1)} µs; xreadgroup ${((plain.stats.xreadgroup?.usec ?? 0) / n).toFixed(1)} µs`,
    );
    if (arg('expire', '0') !== '0') await expireAll(r, redis.url, svc.port, activityId, drain);
    if (arg('bound', '0') !== '0') {
      await sleep(drain);
      await bound(redis.url, activityId, n, conc, Number(arg('batch', '100')));
    }
    if (arg('slowlog', '1') === '0') return;
    const idle = await window(() => sleep(0), drain, true);
    const idleWall = idle.wall;
    const busy = await window(() => reserve('m', n), drain, true);
    const scale = busy.wall / idleWall;
    const rows: [string, number, number][] = [];
    const names = new Set([...busy.by.keys(), ...idle.by.keys()]);
    for (const l of names) {
      const b = busy.by.get(l) ?? { calls: 0, usec: 0 };
      const i = idle.by.get(l) ?? { calls: 0, usec: 0 };
      rows.push([l, (b.calls - i.calls * scale) / n, (b.usec - i.usec * scale) / n]);
    }
    rows.sort((x, y) => y[2] - x[2]);
    let tu = 0;
    let tc = 0;
    console.log(`\n${n} reservations; per reservation (idle window subtracted):\n| piece (top-level) | calls | µs |\n|---|---:|---:|`);
    for (const [l, c, u] of rows) {
      if (Math.abs(c) < 0.005 && Math.abs(u) < 0.05) continue;
      tu += u;
      tc += c;
      console.log(`| ${l} | ${c.toFixed(2)} | ${u.toFixed(2)} |`);
    }
    console.log(`| total (slowlog) | ${tc.toFixed(2)} | ${tu.toFixed(2)} |`);
    let cc = 0;
    const cmds: string[] = [];
    for (const [name, v] of Object.entries(busy.stats)) {
      const i = idle.stats[name] ?? { calls: 0, usec: 0 };
      const c = (v.calls - i.calls * scale) / n;
      const u = (v.usec - i.usec * scale) / n;
      if (['slowlog', 'config', 'info'].includes(name)) continue;
      if (name !== 'evalsha' && name !== 'eval') {
        cc += c;
      }
      if (Math.abs(c) >= 0.005) cmds.push(`${name} ${c.toFixed(2)} (${u.toFixed(1)} µs)`);
    }
    console.log(`commandstats per reservation: ${cmds.join(', ')}`);
    const evalsha = busy.stats.evalsha ?? { calls: 0, usec: 0 };
    const ie = idle.stats.evalsha ?? { calls: 0, usec: 0 };
    console.log(
      `commands per reservation (inside scripts included, EVALSHA excluded): ${cc.toFixed(2)}; EVALSHA ${((evalsha.calls - ie.calls * scale) / n).toFixed(2)}`,
    );
  } finally {
    r.disconnect();
    await svc.proc.stop();
    await redis.stop();
  }
}

main().then(
  () => process.exit(0),
  (err) => {
    console.error(err);
    process.exit(1);
  },
);
