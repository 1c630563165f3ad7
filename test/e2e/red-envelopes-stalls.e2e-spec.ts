import { KeyBuilder } from '../../src/platform/redis/key-builder';
import { MetricsService } from '../../src/platform/metrics/metrics.service';
import { walletKeys } from '../../src/features/wallet/wallet.keys';
import { WalletService } from '../../src/features/wallet/wallet.service';
import type { WalletCommand } from '../../src/features/wallet/wallet.types';
import { waitUntil } from '../harness/redis-process';
import { rainBody, rainId, rainKit, type RainKit, redisNowMs } from '../support/red-envelopes';
import { CREDS, useAppOnOwnRedis } from '../support/test-app';

/**
 * No rain stalls silently: a refund the wallet refuses and credits the wallet does not make show in the admin view
 * (`stalled`), count in red_envelope_stalls_total, and the re-drive gets the rain going once the cause is fixed. The
 * contract of a repeated create, also after the window, and the state of a rain past its window.
 */
const ctx = useAppOnOwnRedis({
  RATE_LIMIT_ENABLED: 'false',
  RED_ENVELOPE_CREDIT_MAX_DELIVERIES: '2',
  RED_ENVELOPE_CREDIT_RETRY_MS: '100',
  RED_ENVELOPE_CREDIT_RETRY_MAX_MS: '200',
});
let kit: RainKit;
beforeAll(async () => {
  kit = rainKit(ctx.t);
  await kit.fund(CREDS.merchantId, 1_000_000);
});
afterEach(async () => kit.expectConservation(ctx.raw));

const view = async (id: string) => (await kit.admin().get(`/admin/red-envelopes/activities/${id}`)).body as Record<string, unknown>;
const stalls = async (step: string) => {
  const line = (await ctx.t.app.get(MetricsService).render()).body.split('\n').find((l) => l.startsWith(`red_envelope_stalls_total{step="${step}"}`));
  return line ? Number(line.split(' ').pop()) : 0;
};

describe('red-envelope stalls', () => {
  it('a refund the wallet refuses: ENDED (never READY) with stalled {step: refund}, counted once; fixed and re-driven, it settles', async () => {
    const sponsor = `m_stall_${process.pid}`;
    await kit.fund(sponsor, 300);
    const id = rainId('stallr');
    // The refund's own reference taken with other terms (as no rain wrote it): the wallet refuses the refund.
    const k = walletKeys(ctx.t.app.get(KeyBuilder), { kind: 'merchant', id: sponsor });
    const field = `refund|red-envelope:${id}:leftover`;
    await ctx.raw.hset(k.refs, field, '1');
    const before = await stalls('refund');
    const endsAt = (await redisNowMs(ctx.raw)) + 1500;
    await kit.create(rainBody(id, { sponsorMerchantId: sponsor, totalAmount: 300, count: 3, endsAt: new Date(endsAt).toISOString() }));
    await waitUntil(
      'stalled',
      async () => ((await view(id)).stalled as { step?: string } | undefined)?.step === 'refund' || JSON.stringify(await view(id)),
      20_000,
      50,
    );
    const v = await view(id);
    expect(v).toMatchObject({ state: 'ENDED', stalled: { step: 'refund', reason: expect.stringContaining('REFERENCE_REUSED') } });
    // Retries do not count or log it again.
    await new Promise((r) => setTimeout(r, 2000));
    expect(await stalls('refund')).toBe(before + 1);
    expect((await view(id)).stalled).toEqual(v.stalled);
    // The way out: fix the cause, then re-drive.
    await ctx.raw.hdel(k.refs, field);
    expect((await kit.admin().post(`/admin/red-envelopes/activities/${id}/dead-letters/redrive`)).status).toBe(200);
    await waitUntil('settled', async () => (await kit.state(id)) === 'SETTLED', 20_000, 50);
    expect((await view(id)).stalled).toBeUndefined();
    expect(await kit.merchantBalance(sponsor)).toBe(300);
    await kit.expectBalanced(id);
  });

  it('a credit whose wallet answer is not its own entry is never counted credited: dead-lettered, stalled {step: credit}, counted once for three grabs dead at once; re-driven, credited once', async () => {
    const id = rainId('stallc');
    await kit.create(rainBody(id, { totalAmount: 300, count: 3 }));
    const wallets = ctx.t.app.get(WalletService);
    const credit = wallets.credit.bind(wallets);
    const spy = jest.spyOn(wallets, 'credit').mockImplementation(async (cmd: WalletCommand) => {
      if (cmd.kind !== 'red-envelope') return credit(cmd);
      const r = await credit({ ...cmd, kind: 'top-up', reference: `other-${cmd.reference}`, amount: 1 });
      return { ...r, applied: false };
    });
    kit.money.toppedUp += 3;
    const before = await stalls('credit');
    const grabs = await Promise.all(['acc_stallc', 'acc_stallc2', 'acc_stallc3'].map((u) => kit.grab(u, id)));
    expect(grabs.map((g) => g.body.status)).toEqual(['GRABBED', 'GRABBED', 'GRABBED']);
    await waitUntil('dead-lettered', async () => (await kit.reconciliation(id)).dead.count === 3, 20_000, 50);
    expect((await kit.reconciliation(id)).credited.count).toBe(0);
    // One cause, however many grabs it stopped: one stall, logged and counted once.
    expect(await view(id)).toMatchObject({ stalled: { step: 'credit' }, stalls: [{ step: 'credit' }] });
    expect(await stalls('credit')).toBe(before + 1);
    spy.mockRestore();
    expect((await kit.admin().post(`/admin/red-envelopes/activities/${id}/dead-letters/redrive`)).body).toEqual({ redriven: 3 });
    const r = await kit.credited(id);
    expect(r.credited).toEqual({ count: 3, amount: 300 });
    expect(await view(id)).not.toHaveProperty('stalled');
    expect(await view(id)).not.toHaveProperty('stalls');
    expect((await Promise.all(['acc_stallc', 'acc_stallc2', 'acc_stallc3'].map((u) => kit.balance(u)))).reduce((x, y) => x + y, 0)).toBe(303);
  });
});

describe('red-envelope create: the same body again', () => {
  it('answers 200 with the rain, also after its window (not 400 "endsAt must be in the future"); past the window it shows ENDED', async () => {
    const id = rainId('again');
    const endsAt = (await redisNowMs(ctx.raw)) + 1500;
    const body = rainBody(id, { totalAmount: 500, count: 5, endsAt: new Date(endsAt).toISOString() });
    const first = await kit.admin().post('/admin/red-envelopes/activities', body);
    expect(first.status).toBe(202);
    kit.rains.add(id);
    expect((await kit.admin().post('/admin/red-envelopes/activities', body)).status).toBe(200);
    await waitUntil('past the window', async () => Date.now() > endsAt + 100 && (await redisNowMs(ctx.raw)) > endsAt + 100, 10_000, 50);
    const late = await kit.admin().post('/admin/red-envelopes/activities', body);
    expect([late.status, late.body.activityId]).toEqual([200, id]);
    expect(['ENDED', 'SETTLED']).toContain(late.body.state);
    // Another body under the id after the window is still refused as before.
    expect((await kit.admin().post('/admin/red-envelopes/activities', { ...body, count: 4 })).status).toBe(409);
    await waitUntil('settled', async () => (await kit.state(id)) === 'SETTLED', 20_000, 50);
  });

  it('a rain READY past its window whose end has not run shows ENDED', () => {
    const a = { state: 'READY', startsAt: 0, endsAt: 1000 } as Parameters<RainKit['activities']['stateOf']>[0];
    expect([kit.activities.stateOf(a, 500), kit.activities.stateOf(a, 1000)]).toEqual(['OPEN', 'ENDED']);
  });
});
