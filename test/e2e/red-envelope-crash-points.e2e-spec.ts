import { rawConnection, waitUntil } from '../harness/redis-process';
import { randomPrefix } from '../harness/redis-server';
import { expectInvariants } from '../support/invariants';
import { rainBody, rainId } from '../support/red-envelopes';
import { diedAtCrashPoint, type ServiceProcess, useServicesOnOwnRedis } from '../support/service-process';
import { CREDS, userToken } from '../support/test-app';

/**
 * A rain's multi-step writes (docs/modules/red-envelope.md, "Multi-step writes"): the built service (dist/main.js,
 * `npx nest build` first) dies by SIGKILL at each step boundary of funding → load → end → refund and grab → credit;
 * a fresh instance is started, and the rain must converge exactly once within the stated bound: SETTLED, the sponsor
 * debited once (kind funding) and refunded once (kind refund), each grab credited once, the reconciliation balanced,
 * and money conserved: sponsor top-up = the sponsor's and the grabbers' balances (nothing is held by a settled rain).
 */
const ADMIN = { 'x-admin-key': CREDS.adminKey, 'content-type': 'application/json' };
const ENV = {
  BALANCE_CHANNEL: 'wallet',
  RED_ENVELOPE_RESUME_AFTER_MS: '1000',
  RED_ENVELOPE_JOB_VISIBILITY_MS: '3000',
  RED_ENVELOPE_CREDIT_RETRY_MS: '500',
  RED_ENVELOPE_CREDIT_RETRY_MAX_MS: '1000',
};
/** The load's lock lease (30 s) a dead loader leaves, the job's backoff (10 s), the resume (1 s) and the window. */
const LEASE_BOUND_MS = 55_000;

interface Entry {
  kind: string;
  amount: number;
  reference: string;
}

describe('red-envelope rain: killed at every step boundary, a fresh instance converges exactly once', () => {
  const services = useServicesOnOwnRedis();

  const json = async (svc: ServiceProcess, path: string, init: RequestInit = {}) => {
    const res = await svc.call(path, { headers: ADMIN, ...init });
    return { status: res.status, body: (await res.json().catch(() => ({}))) as Record<string, unknown> };
  };
  const grab = (svc: ServiceProcess, account: string, id: string) =>
    json(svc, `/red-envelopes/activities/${id}/grab`, { method: 'POST', headers: { authorization: `Bearer ${userToken(account)}` } });
  const entries = async (svc: ServiceProcess, ownerId: string) => (await json(svc, `/admin/wallets/${ownerId}?limit=200`)).body.entries as Entry[];
  const balance = async (svc: ServiceProcess, ownerId: string) =>
    ((await json(svc, `/admin/wallets/${ownerId}`)).body.balances as { currency: string; balance: number }[]).find((b) => b.currency === 'CNY')?.balance ?? 0;
  const state = async (svc: ServiceProcess, id: string) => {
    const r = await json(svc, `/admin/red-envelopes/activities/${id}`);
    return r.status === 200 ? String(r.body.state) : String(r.status);
  };

  it.each([
    ['red-envelope.create.after-record', 'create', 12_000],
    ['red-envelope.create.after-funding', 'create', 12_000],
    ['red-envelope.load.after-arm', 'create', LEASE_BOUND_MS],
    ['red-envelope.load.after-ready', 'create', LEASE_BOUND_MS],
    ['red-envelope.credit.after-wallet', 'grab', 12_000],
    ['red-envelope.end.after-drain', 'end', 8000],
    ['red-envelope.end.after-refund', 'end', 8000],
  ] as const)(
    '%s',
    async (boundary, during, windowMs) => {
      const prefix = randomPrefix();
      const first = await services.start(prefix, boundary, ENV);
      const sponsor = `m_crash_${process.pid}`;
      const id = rainId('crash');
      const top = await json(first, `/admin/wallets/merchant:${sponsor}/top-ups`, {
        method: 'POST',
        body: JSON.stringify({ amount: 1000, currency: 'CNY', reference: 'top-crash' }),
      });
      expect(top.status).toBe(201);
      const endsAt = Date.now() + windowMs;
      const body = rainBody(id, { sponsorMerchantId: sponsor, totalAmount: 1000, count: 10, subPools: 2, endsAt: new Date(endsAt).toISOString() });
      const created = await first.call('/admin/red-envelopes/activities', { method: 'POST', headers: ADMIN, body: JSON.stringify(body) }).catch(() => null);
      if (during !== 'create') {
        expect(created?.status).toBe(202);
        await waitUntil('loaded', async () => (await state(first, id)) === 'OPEN', 10_000, 50);
        expect((await grab(first, 'acc_crash_1', id)).body.status).toBe('GRABBED');
      }
      await diedAtCrashPoint(first, boundary, windowMs + 10_000);

      const t0 = Date.now();
      const second = await services.start(prefix, undefined, ENV);
      if (during === 'create') {
        // The rain is taken up by its job; a grab while it is open is credited too.
        await waitUntil('the rain open again', async () => (await state(second, id)) === 'OPEN' || (await state(second, id)), LEASE_BOUND_MS, 200);
        expect((await grab(second, 'acc_crash_1', id)).body.status).toBe('GRABBED');
      }
      // Bound: the window's end, then the job's redelivery (visibility 3 s), backoff and the crediting's retries.
      await waitUntil(
        'SETTLED',
        async () => (await state(second, id)) === 'SETTLED' || (await state(second, id)),
        Math.max(0, endsAt - Date.now()) + 20_000,
        200,
      );
      const took = Date.now() - t0;

      const sponsorEntries = (await entries(second, `merchant:${sponsor}`)).filter((e) => e.kind !== 'top-up');
      const view = (await json(second, `/admin/red-envelopes/activities/${id}`)).body;
      const grabbed = 1000 - Number(view.refundedAmount);
      expect(sponsorEntries.map((e) => [e.kind, e.reference, e.amount]).sort()).toEqual(
        [
          ['funding', `red-envelope:${id}`, -1000],
          ['refund', `red-envelope:${id}:leftover`, 1000 - grabbed],
        ].sort(),
      );
      const userEntries = await entries(second, 'account:acc_crash_1');
      expect(userEntries.map((e) => [e.kind, e.amount])).toEqual([['red-envelope', grabbed]]);
      const r = (await json(second, `/admin/red-envelopes/activities/${id}/reconciliation`)).body;
      expect(r).toMatchObject({
        balanced: true,
        grabbed: { count: 1, amount: grabbed },
        credited: { count: 1, amount: grabbed },
        pending: { count: 0 },
        dead: { count: 0 },
      });
      expect(r.sponsor).toEqual({ funded: 1000, refunded: 1000 - grabbed });
      expect(view.stalled).toBeUndefined();
      // Conserved: the sponsor's top-up is in the sponsor's and the grabber's wallets.
      expect((await balance(second, `merchant:${sponsor}`)) + (await balance(second, 'account:acc_crash_1'))).toBe(1000);
      expect(took).toBeLessThan(LEASE_BOUND_MS + windowMs);
      // Every module's conservation law over the whole deployment.
      const raw = rawConnection(services.redis);
      try {
        await expectInvariants({ nodes: raw, prefix, base: second.base });
      } finally {
        raw.disconnect();
      }
    },
    120_000,
  );
});
