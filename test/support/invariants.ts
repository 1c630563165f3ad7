import type Redis from 'ioredis';
import { KeyBuilder } from '../../src/platform/redis/key-builder';
import { ORDER_KEYS } from '../../src/features/orders/order.keys';
import { activityIndexKey as rainIndexKey } from '../../src/features/red-envelope/red-envelope.keys';
import { activityIndexKey as saleIndexKey } from '../../src/features/seckill/seckill.keys';
import { WALLET_KEYS } from '../../src/features/wallet/wallet.keys';
import type { WalletEntry } from '../../src/features/wallet/wallet.types';
import { CREDS } from './test-app';

/**
 * The conservation laws of every module, read from outside after a fault test: the wallets' ledgers and the orders
 * from Redis (SCAN under the deployment's prefix, every node of a cluster), the rains and the sales from the ops
 * endpoints of any live instance. Each law is an equation between two independent records, so a step lost between
 * them shows:
 * - money, per currency: top-ups − payments (net of reversals) − balances = what the rains hold by their own pools'
 *   count (left before the refund, grabbed but not yet credited, dead-lettered, still loading); and every wallet's
 *   balance is the sum of its ledger, entry by entry, never below zero;
 * - stock, per product: initial = available + reserved + sold, none negative, and the sale's own check clean;
 * - orders: every order past its expiry (and `graceMs`, the time its close may take) is CLOSED or PAID.
 */
export interface Deployment {
  /** Every node to SCAN (each master of a cluster). */
  nodes: Redis | Redis[];
  /** REDIS_KEY_PREFIX of the instances. */
  prefix: string;
  /** Base URL of a live instance, for the ops endpoints. */
  base: string;
}

export interface SweepOptions {
  /** How long after its expiry an order may still be closing, ms (its expiry job's run and retries). Default 0. */
  graceMs?: number;
  /** Now, epoch ms (default the Redis clock of the first node). */
  now?: number;
}

export interface SweepReport {
  /** Each law broken, in words; empty when every law holds. */
  violations: string[];
  /** What was counted, for a test to assert more (money by currency and kind, orders by status, products). */
  money: Map<string, Record<string, bigint>>;
  orders: Record<string, number>;
  products: number;
  rains: number;
}

const ADMIN = { 'x-admin-key': CREDS.adminKey };

async function scanAll(nodes: Redis[], pattern: string): Promise<Array<{ node: Redis; key: string }>> {
  const out: Array<{ node: Redis; key: string }> = [];
  for (const node of nodes) {
    let cursor = '0';
    do {
      const [next, found] = await node.scan(cursor, 'MATCH', pattern, 'COUNT', 1000);
      cursor = next;
      for (const key of found) out.push({ node, key });
    } while (cursor !== '0');
  }
  return out;
}

async function adminJson<T>(base: string, path: string): Promise<T> {
  const res = await fetch(`${base}${path}`, { headers: ADMIN, signal: AbortSignal.timeout(10_000) });
  if (res.status !== 200) throw new Error(`GET ${path}: ${res.status} ${await res.text()}`);
  return (await res.json()) as T;
}

/** Reads every law; never throws for a broken one (see `violations`). */
export async function sweepInvariants(d: Deployment, opts: SweepOptions = {}): Promise<SweepReport> {
  const nodes = Array.isArray(d.nodes) ? d.nodes : [d.nodes];
  const keys = new KeyBuilder({ redis: { keyPrefix: d.prefix } } as ConstructorParameters<typeof KeyBuilder>[0]);
  const violations: string[] = [];
  const now = opts.now ?? Number((await nodes[0].time())[0]) * 1000;

  // ---- money: every wallet's ledger against its balances, and the sums by kind
  const money = new Map<string, Record<string, bigint>>();
  const add = (currency: string, kind: string, v: bigint) => {
    const m = money.get(currency) ?? {};
    m[kind] = (m[kind] ?? 0n) + v;
    money.set(currency, m);
  };
  for (const { node, key } of await scanAll(nodes, `${d.prefix}:${WALLET_KEYS.feature}:*:ledger`)) {
    const parsed = keys.parse(key);
    if (parsed?.feature !== WALLET_KEYS.feature || parsed.part !== 'ledger') continue;
    const wallet = `${parsed.kind}:${parsed.id}`;
    const entries = (await node.lrange(key, 0, -1)).map((r) => JSON.parse(r) as WalletEntry);
    const running = new Map<string, bigint>();
    entries.forEach((e, i) => {
      if (e.entryId !== String(i + 1)) violations.push(`wallet ${wallet}: entry ${i + 1} is numbered ${e.entryId}`);
      const after = (running.get(e.currency) ?? 0n) + BigInt(e.amount);
      running.set(e.currency, after);
      if (after !== BigInt(e.balanceAfter))
        violations.push(`wallet ${wallet}: entry ${e.entryId} says balance ${e.balanceAfter}, the ledger adds up to ${after}`);
      if (after < 0n) violations.push(`wallet ${wallet}: balance below zero after entry ${e.entryId}`);
      add(e.currency, e.kind, BigInt(e.amount));
    });
    const balances = await node.hgetall(key.replace(/:ledger$/, ':balances'));
    for (const currency of new Set([...Object.keys(balances), ...running.keys()])) {
      const held = BigInt(balances[currency] ?? '0');
      const summed = running.get(currency) ?? 0n;
      if (held !== summed) violations.push(`wallet ${wallet} ${currency}: balance ${held}, ledger sum ${summed}`);
      add(currency, 'balance', held);
    }
  }

  // ---- what the rains hold, by their own pools
  const rainIds = (await Promise.all(nodes.map((n) => n.zrange(rainIndexKey(keys), '0', '-1').catch(() => [] as string[])))).flat();
  let rains = 0;
  for (const id of new Set(rainIds)) {
    let r: { balanced: boolean; left: { amount: number }; pending: { amount: number }; dead: { amount: number }; loading: { amount: number } };
    let a: { currency: string; state: string };
    try {
      a = await adminJson(d.base, `/admin/red-envelopes/activities/${id}`);
      r = await adminJson(d.base, `/admin/red-envelopes/activities/${id}/reconciliation`);
    } catch (err) {
      if (String(err).includes(': 404')) continue; // retention over, or a create refused
      throw err;
    }
    rains++;
    if (!r.balanced) violations.push(`rain ${id}: its reconciliation is not balanced (${JSON.stringify(r)})`);
    add(a.currency, 'held-by-rains', BigInt(r.left.amount + r.pending.amount + r.dead.amount + r.loading.amount));
  }
  const KINDS = new Set(['top-up', 'payment', 'reversal', 'funding', 'refund', 'red-envelope', 'balance', 'held-by-rains']);
  for (const [currency, m] of money) {
    for (const kind of Object.keys(m)) if (!KINDS.has(kind)) violations.push(`money ${currency}: entries of an unknown kind ${kind}`);
    // Top-ups bring money in and payments (net of reversals) take it out; what moved between wallets and rains
    // (funding out, refunds and envelopes credited back in) is what the rains hold, by the ledgers. The rains' own
    // pools must say the same: a credit or a refund that moved no money shows here.
    const rainsHoldByLedger = -((m['funding'] ?? 0n) + (m['refund'] ?? 0n) + (m['red-envelope'] ?? 0n));
    if (rainsHoldByLedger !== (m['held-by-rains'] ?? 0n))
      violations.push(`money ${currency}: the ledgers say rains hold ${rainsHoldByLedger}, the rains' pools say ${m['held-by-rains'] ?? 0n}`);
  }

  // ---- stock
  const saleIds = (await Promise.all(nodes.map((n) => n.zrange(saleIndexKey(keys), '0', '-1').catch(() => [] as string[])))).flat();
  let products = 0;
  for (const id of new Set(saleIds)) {
    let sale: { products: Array<{ productId: string; stock: number; available: number; reserved: number; sold: number }> };
    try {
      sale = await adminJson(d.base, `/admin/seckill/activities/${id}`);
    } catch (err) {
      if (String(err).includes(': 404')) continue;
      throw err;
    }
    for (const p of sale.products) {
      products++;
      if (p.available + p.reserved + p.sold !== p.stock)
        violations.push(`stock ${id}/${p.productId}: initial ${p.stock} != available ${p.available} + reserved ${p.reserved} + sold ${p.sold}`);
      if (Math.min(p.available, p.reserved, p.sold) < 0) violations.push(`stock ${id}/${p.productId}: a count below zero`);
    }
    const check = await adminJson<{ problems: string[] }>(d.base, `/admin/seckill/activities/${id}/check`);
    for (const x of check.problems.filter((s) => s.includes('!='))) violations.push(`stock ${id}: ${x}`);
  }

  // ---- orders
  const orders: Record<string, number> = {};
  const graceMs = opts.graceMs ?? 0;
  for (const { node, key } of await scanAll(nodes, `${d.prefix}:${ORDER_KEYS.feature}:*:order:*`)) {
    const parsed = keys.parse(key);
    if (parsed?.feature !== ORDER_KEYS.feature || parsed.part !== 'order') continue;
    const [status, expiresAt] = await node.hmget(key, 'status', 'expiresAt');
    if (!status) continue;
    orders[status] = (orders[status] ?? 0) + 1;
    if (status !== 'PAID' && status !== 'CLOSED' && Number(expiresAt) + graceMs < now)
      violations.push(`order ${parsed.partId}: ${status} ${now - Number(expiresAt)} ms past its expiry`);
  }
  return { violations, money, orders, products, rains };
}

/** Fails the test with every law broken. */
export async function expectInvariants(d: Deployment, opts: SweepOptions = {}): Promise<SweepReport> {
  const report = await sweepInvariants(d, opts);
  expect(report.violations).toEqual([]);
  return report;
}
