import { rawExchange } from '../support/raw-http';
import request from 'supertest';
import { sign } from 'jsonwebtoken';
import { RedisServerHandle, startRedisServer } from '../harness/redis-server';
import { CREDS, merchantHeaders, startTestApp, TestApp, userToken } from '../support/test-app';

describe('Identities', () => {
  let redis: RedisServerHandle;
  let t: TestApp;

  beforeAll(async () => {
    redis = await startRedisServer();
    // Many deliberate 401s from one IP here: lift the failed-attempt limit (tested in ops.e2e-spec).
    t = await startTestApp(redis.url, { RATE_LIMIT_ANONYMOUS: '100000' });
  });
  afterAll(async () => {
    await t.close();
    await redis.destroy();
  });

  const whoami = (headers: Record<string, string>) => request(t.server).get('/diagnostics/whoami').set(headers);
  /** A GET with headers exactly as listed (name, value, …), repeats included (supertest would merge them), on a raw socket. */
  const rawRequest = async (path: string, headers: string[]): Promise<{ status: number; body: string }> => {
    let lines = `GET ${path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n`;
    for (let i = 0; i < headers.length; i += 2) lines += `${headers[i]}: ${headers[i + 1]}\r\n`;
    const response = await rawExchange(t, `${lines}\r\n`);
    const [head, body] = response.split('\r\n\r\n');
    return { status: Number(head.split(' ')[1]), body };
  };

  describe('app users (bearer JWT)', () => {
    it('identifies the account from sub', async () => {
      const res = await whoami({ authorization: `Bearer ${userToken('acc_42')}` });
      expect(res.status).toBe(200);
      expect(res.body).toEqual({ kind: 'user', id: 'acc_42' });
    });

    it('tells a token pasted with "Bearer " into Swagger UI (which adds it) to paste the token alone', async () => {
      for (const header of [`Bearer Bearer ${userToken('acc_42')}`, `Bearer bearer ${userToken('acc_42')}`]) {
        const res = await whoami({ authorization: header });
        expect([res.status, res.body.message]).toEqual([
          401,
          'Authorization says "Bearer " twice: paste the token alone (Swagger UI\'s "Authorize" adds "Bearer " for AppUserJwt)',
        ]);
      }
    });

    it.each(['bearer', 'BEARER', 'bEaReR'])('takes the scheme in any case (%s), as HTTP auth schemes are case-insensitive', async (scheme) => {
      const res = await whoami({ authorization: `${scheme} ${userToken('acc_42')}` });
      expect([res.status, res.body]).toEqual([200, { kind: 'user', id: 'acc_42' }]);
    });

    it('refuses two Authorization headers (Node would read the first and drop the other), whichever holds a valid token', async () => {
      const valid = `Bearer ${userToken('acc_42')}`;
      for (const pair of [
        [valid, 'Bearer x.y.z'],
        [valid, valid],
      ]) {
        const res = await rawRequest('/diagnostics/whoami', ['Authorization', pair[0], 'Authorization', pair[1]]);
        expect([res.status, JSON.parse(res.body).error]).toEqual([401, 'UNAUTHORIZED']);
      }
      expect((await rawRequest('/diagnostics/whoami', ['Authorization', valid])).status).toBe(200);
    });

    it.each(['.', '..'])('refuses a token whose sub is %j, which is never an account id', async (sub) => {
      const res = await whoami({ authorization: `Bearer ${userToken(sub)}` });
      expect([res.status, res.body.error]).toEqual([401, 'UNAUTHORIZED']);
      expect(res.body.message).toMatch(/sub/);
    });

    it('takes the account from the token, never from the body', async () => {
      const res = await request(t.server)
        .post('/diagnostics/touch')
        .set({ authorization: `Bearer ${userToken('acc_real')}` })
        .send({ label: 'x', accountId: 'acc_victim' });
      expect(res.status).toBe(400); // unknown field rejected, nothing attributed to acc_victim
      const ok = await request(t.server)
        .post('/diagnostics/touch')
        .set({ authorization: `Bearer ${userToken('acc_real')}` })
        .send({ label: 'x' });
      expect(ok.body.accountId).toBe('acc_real');
    });

    it.each([
      ['an expired token', () => userToken('acc_1', { expiresInS: -60 }), /expired/],
      ['a token signed with another secret', () => userToken('acc_1', { secret: 'another-secret-another-secret-0123456789' }), /invalid/],
      ['a token without exp', () => sign({ sub: 'acc_1' }, CREDS.jwtSecret, { algorithm: 'HS256' }), /exp/],
      ['a token without sub', () => sign({}, CREDS.jwtSecret, { algorithm: 'HS256', expiresIn: 60 }), /sub/],
      [
        'an alg=none token',
        () =>
          `${Buffer.from('{"alg":"none","typ":"JWT"}').toString('base64url')}.${Buffer.from(JSON.stringify({ sub: 'acc_1', exp: 9999999999 })).toString('base64url')}.`,
        /invalid/,
      ],
      ['garbage', () => 'not-a-jwt', /Bearer/],
    ])('rejects %s with 401', async (_what, make, message) => {
      const res = await whoami({ authorization: `Bearer ${make()}` });
      expect(res.status).toBe(401);
      expect(res.body.error).toBe('UNAUTHORIZED');
      expect(res.body.message).toMatch(message);
    });

    it('answers 401 when no credentials are sent', async () => {
      const res = await whoami({});
      expect(res.status).toBe(401);
      expect(res.body.message).toMatch(/Missing credentials/);
    });
  });

  describe('merchants (HMAC-signed requests)', () => {
    it('tells a merchant id sent without a signature to fill in MerchantSecret (what Swagger UI sends with MerchantId alone)', async () => {
      const res = await whoami({ 'x-merchant-id': CREDS.merchantId });
      expect([res.status, res.body.error]).toEqual([401, 'UNAUTHORIZED']);
      expect(res.body.message).toBe(
        'X-Merchant-Id came without a signature: sign the request with your merchant secret (in Swagger UI, fill in MerchantSecret under "Authorize" as well; the page signs each request with it)',
      );
      const partial = await whoami({ 'x-merchant-id': CREDS.merchantId, 'x-signature': 'ab' });
      expect(partial.body.message).toMatch(/^Merchant requests need X-Merchant-Id, X-Timestamp, X-Nonce and X-Signature: .*fill in MerchantSecret/);
    });

    it('accepts a correctly signed GET and POST', async () => {
      const get = await whoami(merchantHeaders('GET', '/diagnostics/whoami', ''));
      expect(get.status).toBe(200);
      expect(get.body).toEqual({ kind: 'merchant', id: CREDS.merchantId });
      const body = JSON.stringify({ label: 'signed' });
      const post = await request(t.server)
        .post('/diagnostics/whoami')
        .set(merchantHeaders('POST', '/diagnostics/whoami', body))
        .send(body);
      expect(post.status).toBe(200);
      expect(post.body.id).toBe(CREDS.merchantId);
    });

    it('refuses a replayed request (same nonce) with 401', async () => {
      const body = JSON.stringify({ label: 'once' });
      const headers = merchantHeaders('POST', '/diagnostics/whoami', body);
      expect((await request(t.server).post('/diagnostics/whoami').set(headers).send(body)).status).toBe(200);
      const replay = await request(t.server).post('/diagnostics/whoami').set(headers).send(body);
      expect(replay.status).toBe(401);
      expect(replay.body.message).toMatch(/already been used/);
    });

    it('lets exactly one of 20 concurrent replays through', async () => {
      const headers = merchantHeaders('GET', '/diagnostics/whoami', '');
      const results = await Promise.all(Array.from({ length: 20 }, () => whoami(headers)));
      expect(results.filter((r) => r.status === 200)).toHaveLength(1);
      expect(results.filter((r) => r.status === 401)).toHaveLength(19);
    });

    it.each([
      ['a timestamp 6 minutes old', () => merchantHeaders('GET', '/diagnostics/whoami', '', { timestamp: Date.now() - 6 * 60_000 }), /window/],
      ['a timestamp 6 minutes ahead', () => merchantHeaders('GET', '/diagnostics/whoami', '', { timestamp: Date.now() + 6 * 60_000 }), /window/],
      // Unix seconds, a common slip: told so, not sent to check a clock that is right.
      [
        'a timestamp in seconds',
        () => merchantHeaders('GET', '/diagnostics/whoami', '', { timestamp: Math.floor(Date.now() / 1000) }),
        /milliseconds, not seconds/,
      ],
      ['a signature for another path', () => merchantHeaders('GET', '/diagnostics/whoami?x=1', ''), /Signature/],
      ['the wrong secret', () => merchantHeaders('GET', '/diagnostics/whoami', '', { secret: 'wrong-secret-wrong-secret-012345' }), /Signature/],
      ['another merchant id with my secret', () => merchantHeaders('GET', '/diagnostics/whoami', '', { merchantId: CREDS.otherMerchantId }), /Signature/],
      // Answered as a signature that does not match: no answer tells which merchant ids exist.
      [
        'an unknown merchant',
        () => merchantHeaders('GET', '/diagnostics/whoami', '', { merchantId: 'm_nobody' }),
        /^X-Signature does not match the request for this X-Merchant-Id$/,
      ],
      ['a short nonce', () => merchantHeaders('GET', '/diagnostics/whoami', '', { nonce: 'abc' }), /Nonce/],
    ])('rejects %s with 401', async (_what, make, message) => {
      const res = await whoami(make());
      expect(res.status).toBe(401);
      expect(res.body.message).toMatch(message);
    });

    it('rejects a body changed after signing with 401', async () => {
      const signed = JSON.stringify({ label: 'small' });
      const res = await request(t.server)
        .post('/diagnostics/whoami')
        .set(merchantHeaders('POST', '/diagnostics/whoami', signed))
        .send(JSON.stringify({ label: 'large' }));
      expect(res.status).toBe(401);
    });

    it('rejects missing signature headers with 401', async () => {
      const h = merchantHeaders('GET', '/diagnostics/whoami', '');
      delete h['x-signature'];
      expect((await whoami(h)).status).toBe(401);
    });
  });

  describe('internal services (service tokens) and ops (admin keys)', () => {
    it('identifies a service by its token name', async () => {
      const res = await whoami({ 'x-service-token': CREDS.serviceToken });
      expect(res.body).toEqual({ kind: 'service', id: CREDS.serviceName });
    });

    it('identifies an admin by its key name', async () => {
      const res = await whoami({ 'x-admin-key': CREDS.adminKey });
      expect(res.body).toEqual({ kind: 'admin', id: CREDS.adminName });
    });

    it.each([
      ['x-service-token', 'wrong-token-wrong-token'],
      ['x-service-token', CREDS.serviceToken.slice(0, -1)],
      ['x-admin-key', 'wrong-key-wrong-key-wrong'],
      ['x-admin-key', `${CREDS.adminKey}x`],
    ])('rejects a bad %s with 401', async (header, value) => {
      expect((await whoami({ [header]: value })).status).toBe(401);
    });
  });

  describe('the wrong kind of caller', () => {
    it('gets 403 from a user-only endpoint', async () => {
      const res = await request(t.server).post('/diagnostics/touch').set({ 'x-service-token': CREDS.serviceToken }).send({ label: 'a' });
      expect(res.status).toBe(403);
      expect(res.body.error).toBe('FORBIDDEN');
    });

    it('gets 403 from an admin-only endpoint (a valid user token on /metrics)', async () => {
      const res = await request(t.server)
        .get('/metrics')
        .set({ authorization: `Bearer ${userToken('acc_1')}` });
      expect(res.status).toBe(403);
    });

    it('still gets 401, not 403, when the wrong-kind credential is itself invalid', async () => {
      const res = await request(t.server).get('/metrics').set({ 'x-service-token': 'nope-nope-nope-nope' });
      expect(res.status).toBe(401);
    });

    it('gets 403 as a signed merchant on a user-only endpoint', async () => {
      const body = JSON.stringify({ label: 'a' });
      const res = await request(t.server)
        .post('/diagnostics/touch')
        .set(merchantHeaders('POST', '/diagnostics/touch', body))
        .send(body);
      expect(res.status).toBe(403);
    });

    it('gets 401 when two kinds of credentials are sent at once', async () => {
      const res = await whoami({ authorization: `Bearer ${userToken('acc_1')}`, 'x-admin-key': CREDS.adminKey });
      expect(res.status).toBe(401);
      expect(res.body.message).toMatch(/exactly one/);
    });
  });

  describe('development tokens (POST /dev/token)', () => {
    it('outside production, gives an app-user token without the terminal: whoami then names that account', async () => {
      const res = await request(t.server).post('/dev/token').send({ accountId: 'acc_1001' });
      expect(res.status).toBe(200);
      expect(res.body).toEqual({ accountId: 'acc_1001', token: expect.any(String), expiresAt: expect.any(String) });
      expect(Date.parse(res.body.expiresAt) - Date.now()).toBeGreaterThan(86_000_000);
      expect((await whoami({ authorization: `Bearer ${res.body.token}` })).body).toEqual({ kind: 'user', id: 'acc_1001' });
      const bad = await request(t.server).post('/dev/token').send({ accountId: 'a b' });
      expect([bad.status, bad.body.details]).toEqual([400, [{ field: 'accountId', errors: [expect.stringMatching(/^accountId must be/)] }]]);
    });

    it('in production, is absent: 404, and neither the OpenAPI document nor its "Getting started" offers it', async () => {
      const prod = await startTestApp(redis.url, { NODE_ENV: 'production' });
      try {
        const res = await request(prod.server).post('/dev/token').send({ accountId: 'acc_1001' });
        expect(res.status).toBe(404);
        const doc = (await request(prod.server).get('/docs/openapi.json').expect(200)).body;
        expect(Object.keys(doc.paths).filter((p) => p.startsWith('/dev'))).toEqual([]);
        expect(JSON.stringify(doc)).not.toContain('/dev/token');
        expect(doc.info.description).toContain('## Getting started');
      } finally {
        await prod.close();
      }
    });
  });
});
