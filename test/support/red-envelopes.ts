import type Redis from 'ioredis';
import { KeyBuilder } from '../../src/platform/redis/key-builder';
import { type Reconciliation, RedEnvelopeActivities } from '../../src/features/red-envelope/red-envelope-activities.service';
import { RedEnvelopeStore } from '../../src/features/red-envelope/red-envelope.store';
import { waitUntil } from '../harness/redis-process';
import { CREDS, type TestApp } from './test-app';
import { asAdmin, asUser } from './http-roles';
import { sumOfWalletBalances } from './wallet';

let seq = 0;
/** A fresh activity id (at most 32 characters). */
export const rainId = (tag = 'r') => `${tag}-${process.pid.toString(36)}-${Date.now().toString(36)}-${(++seq).toString(36)}`.slice(0, 32);

export function rainBody(id: string, over: Partial<Record<string, unknown>> = {}) {
  return {
    activityId: id,
    sponsorMerchantId: CREDS.merchantId,
    title: 'Quiz rain',
    currency: 'CNY',
    totalAmount: 10_000,
    count: 100,
    startsAt: new Date(Date.now() - 1000).toISOString(),
    endsAt: new Date(Date.now() + 3600_000).toISOString(),
    ...over,
  };
}

/** The Redis server's clock, ms (a rain's window is checked on it). */
export async function redisNowMs(raw: Redis): Promise<number> {
  const [s, us] = await raw.time();
  return Number(s) * 1000 + Math.floor(Number(us) / 1000);
}

/** The red-envelope module and the wallet in one running app, with the steps its suites repeat (over HTTP unless named). */
export function rainKit(t: TestApp) {
  const get = t.app.get.bind(t.app);
  const kit = {
    t,
    activities: get(RedEnvelopeActivities),
    store: get(RedEnvelopeStore),
    /** What came into the wallets (top-ups), went out (payments) and came back (reversals), in CNY, for the conservation sum. */
    money: { toppedUp: 0, spent: 0, reversed: 0 },
    /** Every activity this kit funded (their money is in the pools, pending or refunded). */
    rains: new Set<string>(),
    admin: () => asAdmin(t),
    user: (account: string) => asUser(t, account),
    /** Tops up a merchant's wallet (ops), once per reference. */
    async fund(merchantId: string, amount: number, reference = `fund-${++seq}`, currency = 'CNY') {
      const res = await kit.admin().post(`/admin/wallets/merchant:${merchantId}/top-ups`, { amount, currency, reference });
      if (res.status !== 201 && res.status !== 200) throw new Error(`top-up: ${res.status} ${JSON.stringify(res.body)}`);
      if (res.status === 201 && currency === 'CNY') kit.money.toppedUp += amount;
    },
    /** The merchant wallet's CNY balance (ops). */
    async merchantBalance(merchantId: string): Promise<number> {
      const w = await kit.admin().get(`/admin/wallets/merchant:${merchantId}`);
      return (w.body.balances as { currency: string; balance: number }[]).find((b) => b.currency === 'CNY')?.balance ?? 0;
    },
    /** The wallet's ledger entries, newest first (ops). */
    async entries(ownerId: string): Promise<{ kind: string; amount: number; reference: string }[]> {
      return (await kit.admin().get(`/admin/wallets/${ownerId}?limit=200`)).body.entries;
    },
    /** The state as ops see it (or the HTTP status when there is none). */
    async state(id: string): Promise<string> {
      const a = await kit.admin().get(`/admin/red-envelopes/activities/${id}`);
      return a.status === 200 ? (a.body.state as string) : String(a.status);
    },
    /**
     * Money conservation: every wallet's balance plus what every funded rain still holds (not yet credited nor
     * refunded: left in its pools, pending or dead) is what came in, less what was spent, plus what came back.
     */
    async expectConservation(raw: Redis): Promise<void> {
      let inRains = 0;
      for (const id of kit.rains) {
        const res = await kit.admin().get(`/admin/red-envelopes/activities/${id}/reconciliation`);
        if (res.status === 404) continue; // never created: it holds nothing
        const r = res.body as Reconciliation;
        // What the sponsor's ledger shows funded, less what reached the grabbers and came back (as their entries show).
        inRains += r.sponsor.funded - r.credited.amount - r.sponsor.refunded;
      }
      const balances = (await sumOfWalletBalances(raw, get(KeyBuilder))).get('CNY') ?? 0n;
      expect({ walletsPlusRains: Number(balances) + inRains }).toEqual({ walletsPlusRains: kit.money.toppedUp - kit.money.spent + kit.money.reversed });
    },
    /** Creates a rain (202, or 200 when the same body was sent before) and waits until it is loaded (READY or OPEN). */
    async create(body: ReturnType<typeof rainBody>) {
      const res = await kit.admin().post('/admin/red-envelopes/activities', body);
      if (res.status !== 202 && res.status !== 200) throw new Error(`create: ${res.status} ${JSON.stringify(res.body)}`);
      kit.rains.add(body.activityId);
      await waitUntil(
        'the rain to be loaded',
        async () => {
          const a = await kit.admin().get(`/admin/red-envelopes/activities/${body.activityId}`);
          return ['READY', 'OPEN'].includes(a.body.state as string) || `${a.status} ${a.body.state}`;
        },
        20_000,
        50,
      );
    },
    grab: (account: string, id: string) => kit.user(account).post(`/red-envelopes/activities/${id}/grab`),
    reconciliation: async (id: string) => (await kit.admin().get(`/admin/red-envelopes/activities/${id}/reconciliation`)).body as Reconciliation,
    /** The reconciliation balances (checked after every test that grabs). */
    async expectBalanced(id: string): Promise<Reconciliation> {
      const r = await kit.reconciliation(id);
      expect({ id, balanced: r.balanced }).toEqual({ id, balanced: true });
      return r;
    },
    /** Waits until every grab is credited; returns the reconciliation. */
    async credited(id: string, timeoutMs = 20_000) {
      let last = {} as Reconciliation;
      await waitUntil(
        'every grab to be credited',
        async () => {
          last = await kit.reconciliation(id);
          return (last.pending.count === 0 && last.dead.count === 0) || JSON.stringify(last);
        },
        timeoutMs,
        50,
      );
      return last;
    },
    /** The account's wallet balance in a currency (over HTTP, as the app sees it). */
    async balance(account: string, currency = 'CNY'): Promise<number> {
      // A 503 (a Redis command timed out on a loaded machine) is retried; any other non-200 fails here, not as a 0.
      let res = await kit.user(account).get('/wallet');
      for (let i = 0; i < 3 && res.status === 503; i++) res = await kit.user(account).get('/wallet');
      if (res.status !== 200) throw new Error(`GET /wallet of ${account}: ${res.status} ${JSON.stringify(res.body)}`);
      const balances = res.body.balances as Record<string, number> | { currency: string; balance: number }[];
      if (Array.isArray(balances)) return balances.find((b) => b.currency === currency)?.balance ?? 0;
      return balances?.[currency] ?? 0;
    },
  };
  return kit;
}

export type RainKit = ReturnType<typeof rainKit>;
