import Redis from 'ioredis';
import request from 'supertest';
import { lockKeys } from '../../src/engines/locks/lock.keys';
import { LockService } from '../../src/engines/locks/lock.service';
import { LocksController } from '../../src/engines/locks/locks.controller';
import { KeyBuilder } from '../../src/platform/redis/key-builder';
import { waitUntil } from '../harness/redis-process';
import { RedisServerHandle, startRedisServer } from '../harness/redis-server';
import { CREDS, merchantHeaders, startTestApp, TestApp, userToken } from '../support/test-app';
import { setTimeout as sleep } from 'node:timers/promises';
import { EventEmitter } from 'node:events';
import type { FastifyReply } from 'fastify';

/**
 * The lock engine's HTTP API (internal services, service token) on the whole
 * app against a real redis-server: acquire (reentrant, contended, waiting for
 * a release), renew, release, inspect, read/write modes, lease expiry with a
 * rising fencing token, owners kept per calling service, who may call it, bad
 * input, a Redis outage (fail closed) and the OpenAPI document.
 *
 * Two service tokens are configured (billing and ledger), to show that an
 * owner string means nothing across services. Waiters re-check the lock only
 * once a minute here (LOCK_WAKE_CHECK_MS), so a waiter that gets the lock
 * within a second of a release was woken by the release message. Rate limits
 * are off (tested in ops.e2e-spec).
 */

const LEDGER = { name: 'ledger', token: 'test-ledger-token-0123456789abcdef' };
const ENV = {
  RATE_LIMIT_ENABLED: 'false',
  SERVICE_TOKENS: `${CREDS.serviceName}:${CREDS.serviceToken},${LEDGER.name}:${LEDGER.token}`,
  LOCK_WAKE_CHECK_MS: '60000',
};
const BILLING = { 'x-service-token': CREDS.serviceToken };
const LEDGER_AUTH = { 'x-service-token': LEDGER.token };
const ERROR_KEYS = ['statusCode', 'error', 'message', 'details', 'requestId'];

/** The standard error body with its status and code, and for a 400 the field it names (in details and in the message). */
function expectError(res: request.Response, status: number, code: string, field?: string): void {
  expect({ status: res.status, statusCode: res.body.statusCode, error: res.body.error }).toEqual({ status, statusCode: status, error: code });
  expect(Object.keys(res.body).filter((k) => !ERROR_KEYS.includes(k))).toEqual([]);
  expect(typeof res.body.requestId).toBe('string');
  if (field === undefined) return;
  expect(res.body.details.map((d: { field: string }) => d.field)).toContain(field);
  expect(res.body.message).toContain(field);
}

describe(`${LocksController.name} over HTTP`, () => {
  let redis: RedisServerHandle;
  let t: TestApp;
  let raw: Redis;
  let keys: KeyBuilder;
  let n = 0;
  /** A lock name no other test uses. */
  const fresh = (what: string) => `e2e:${what}:${++n}`;
  const hashKey = (name: string) => lockKeys(keys, `ext:${name}`).hash;
  /** Every key stored under the lock's hash tag (hash and fencing counter). */
  const storedKeys = (name: string) => raw.keys(`${keys.prefix}:locks:{n:ext:${name}}:*`);

  const http = () => request(t.server);
  const acquire = (name: string, body: object, auth: Record<string, string> = BILLING) => http().post(`/locks/${name}/acquire`).set(auth).send(body);
  const renew = (name: string, body: object, auth: Record<string, string> = BILLING) => http().post(`/locks/${name}/renew`).set(auth).send(body);
  const release = (name: string, body: object, auth: Record<string, string> = BILLING) => http().post(`/locks/${name}/release`).set(auth).send(body);
  const inspect = (name: string, auth: Record<string, string> = BILLING) => http().get(`/locks/${name}`).set(auth);
  /** Acquires, asserting 200, and returns the body. */
  async function hold(
    name: string,
    body: object,
    auth: Record<string, string> = BILLING,
  ): Promise<{ fencingToken: number; expiresAt: number; holdCount: number }> {
    const res = await acquire(name, body, auth);
    expect({ name, body, status: res.status, error: res.body.error }).toEqual({ name, body, status: 200, error: undefined });
    return res.body;
  }

  beforeAll(async () => {
    redis = await startRedisServer();
    t = await startTestApp(redis.url, ENV);
    keys = t.app.get(KeyBuilder);
    raw = new Redis(redis.url);
  });

  afterAll(async () => {
    raw?.disconnect();
    await t?.close();
    await redis?.destroy();
  });

  it('keeps HTTP locks apart from the service\'s own: a caller holding "plan:…" does not block the payment-plan lock', async () => {
    const name = `plan:${fresh('ns')}`;
    await hold(name, { owner: 'squatter', leaseMs: 60_000 });
    const internal = await t.app.get(LockService).acquire(name, { waitMs: 0, leaseMs: 1_000 });
    expect(internal.holdCount).toBe(1);
    await internal.release();
    expect((await release(name, { owner: 'squatter' })).body).toEqual({ holdCount: 0 });
  });

  describe('acquire', () => {
    it('takes a free lock: 200 with a fencing token, the lease end on the Redis clock and hold count 1; the hash is stored under the lock tag', async () => {
      const name = fresh('free');
      const sent = Date.now();
      const res = await acquire(name, { owner: 'op-1', leaseMs: 5_000 });
      expect(res.status).toBe(200);
      expect(Object.keys(res.body).sort()).toEqual(['expiresAt', 'fencingToken', 'holdCount']);
      expect(res.body.holdCount).toBe(1);
      expect(Number.isSafeInteger(res.body.fencingToken) && res.body.fencingToken > 0).toBe(true);
      // Same machine, so the Redis clock is ours: the lease ends leaseMs after the call.
      expect(res.body.expiresAt).toBeGreaterThanOrEqual(sent + 5_000 - 50);
      expect(res.body.expiresAt).toBeLessThan(Date.now() + 5_000 + 50);
      expect(await raw.hget(hashKey(name), `c:svc:${CREDS.serviceName}:op-1`)).toBe('1');
      const pttl = await raw.pttl(hashKey(name));
      expect(pttl).toBeGreaterThan(3_000);
      expect(pttl).toBeLessThanOrEqual(5_000);
    });

    it('is reentrant for the same owner: hold count 2 with the same fencing token, and the lease starts again', async () => {
      const name = fresh('reentrant');
      const first = await hold(name, { owner: 'op-1', leaseMs: 5_000 });
      await sleep(20);
      const second = await hold(name, { owner: 'op-1', leaseMs: 5_000 });
      expect(second.holdCount).toBe(2);
      expect(second.fencingToken).toBe(first.fencingToken);
      expect(second.expiresAt).toBeGreaterThan(first.expiresAt);
      const state = (await inspect(name)).body;
      expect(state.holders).toEqual([{ owner: `svc:${CREDS.serviceName}:op-1`, count: 2, expiresAt: second.expiresAt }]);
    });

    it('refuses another owner with 409 LOCK_CONTENDED, the time left on the lease and Retry-After', async () => {
      const name = fresh('contended');
      const held = await hold(name, { owner: 'op-1', leaseMs: 4_000 });
      const started = Date.now();
      const res = await acquire(name, { owner: 'op-2', leaseMs: 4_000 });
      expect(Date.now() - started).toBeLessThan(1_000); // waitMs 0: answered at once
      expectError(res, 409, 'LOCK_CONTENDED');
      expect(res.body.message).toContain(name);
      const left = res.body.details.remainingTtlMs;
      expect(Number.isInteger(left)).toBe(true);
      expect(left).toBeGreaterThan(2_000);
      expect(left).toBeLessThanOrEqual(4_000);
      expect(res.headers['retry-after']).toBe(String(Math.ceil(left / 1000)));
      // The refused owner was not added, and the holder is untouched.
      expect((await inspect(name)).body).toMatchObject({ holders: [{ owner: `svc:${CREDS.serviceName}:op-1`, count: 1, expiresAt: held.expiresAt }] });
      expect(await raw.hexists(hashKey(name), `c:svc:${CREDS.serviceName}:op-2`)).toBe(0);
    });

    it('with waitMs, a waiter gets the lock right after another request releases it (woken by the release message), well before waitMs', async () => {
      const name = fresh('wait');
      const held = await hold(name, { owner: 'op-1', leaseMs: 30_000 });
      let answeredAt = 0;
      const waiting = acquire(name, { owner: 'op-2', leaseMs: 5_000, waitMs: 20_000 }).then((res) => {
        answeredAt = Date.now();
        return res;
      });
      await sleep(300);
      expect(answeredAt).toBe(0); // still waiting while op-1 holds
      const releasedAt = Date.now();
      const rel = await release(name, { owner: 'op-1' });
      expect(rel.status).toBe(200);
      expect(rel.body).toEqual({ holdCount: 0 });
      const res = await waiting;
      expect(res.status).toBe(200);
      expect(res.body.holdCount).toBe(1);
      expect(res.body.fencingToken).toBeGreaterThan(held.fencingToken);
      expect(answeredAt).toBeGreaterThanOrEqual(releasedAt);
      // Re-checks are a minute apart and op-1's lease had 30 s left: only the release message explains this.
      expect(answeredAt - releasedAt).toBeLessThan(2_000);
      expect((await inspect(name)).body.holders).toEqual([expect.objectContaining({ owner: `svc:${CREDS.serviceName}:op-2`, count: 1 })]);
    });

    it('a waiter that hangs up stops waiting: the lock freed afterwards is not taken for it', async () => {
      const name = fresh('hang-up');
      await hold(name, { owner: 'op-1', leaseMs: 30_000 });
      // op-2's client gives up after 300 ms of a 20 s wait and closes its connection.
      const gaveUp = await acquire(name, { owner: 'op-2', leaseMs: 60_000, waitMs: 20_000 })
        .timeout(300)
        .then(
          () => false,
          (err: { timeout?: number }) => err.timeout === 300,
        );
      expect(gaveUp).toBe(true);
      await sleep(200);
      expect((await release(name, { owner: 'op-1' })).body).toEqual({ holdCount: 0 });
      // A waiter still running would be woken by that release at once and hold the lock for 60 s, for nobody.
      await sleep(1_000);
      expectError(await inspect(name), 404, 'NOT_FOUND');
      // The lock is free for the next caller.
      expect((await hold(name, { owner: 'op-3', leaseMs: 5_000 })).holdCount).toBe(1);
    });

    it('a waiter whose connection closed before the handler ran (during the guards) is not given the lock either', async () => {
      const name = fresh('closed-early');
      await hold(name, { owner: 'op-1', leaseMs: 30_000 });
      // What Node leaves of the response of a client that hung up while a guard awaited Redis (the rate limit): it is
      // destroyed and its 'close' event has already been emitted, so no listener added now will hear it.
      const closed = Object.assign(new EventEmitter(), { destroyed: true, writableEnded: false });
      const reply = { raw: closed } as unknown as FastifyReply;
      const waiting = t.app
        .get(LocksController)
        .acquire({ name }, { owner: 'op-2', leaseMs: 60_000, waitMs: 20_000 }, { kind: 'service', id: CREDS.serviceName }, reply)
        .then(
          (held) => held,
          (err: { status?: number; code?: string }) => ({ refused: err.code ?? err.status }),
        );
      expect((await release(name, { owner: 'op-1' })).body).toEqual({ holdCount: 0 });
      // A waiter that went on waiting is woken by that release and holds the lock for 60 s, for nobody.
      expect(await waiting).toEqual({ refused: expect.anything() });
      expectError(await inspect(name), 404, 'NOT_FOUND');
    });

    it('with waitMs and nobody releasing, answers 409 LOCK_CONTENDED once waitMs has passed', async () => {
      const name = fresh('wait-out');
      await hold(name, { owner: 'op-1', leaseMs: 30_000 });
      const started = Date.now();
      const res = await acquire(name, { owner: 'op-2', leaseMs: 5_000, waitMs: 400 });
      const elapsed = Date.now() - started;
      expectError(res, 409, 'LOCK_CONTENDED');
      expect(elapsed).toBeGreaterThanOrEqual(380);
      expect(elapsed).toBeLessThan(3_000);
      expect(res.body.details.remainingTtlMs).toBeGreaterThan(25_000);
    });

    it('gives every new hold a higher fencing token, across release and re-acquire', async () => {
      const name = fresh('fence');
      const tokens: number[] = [];
      for (const owner of ['a', 'b', 'a', 'c']) {
        tokens.push((await hold(name, { owner, leaseMs: 5_000 })).fencingToken);
        expect((await release(name, { owner })).body).toEqual({ holdCount: 0 });
      }
      for (let i = 1; i < tokens.length; i++) expect(tokens[i]).toBeGreaterThan(tokens[i - 1]);
    });
  });

  describe('renew and release', () => {
    it('renew moves the lease end and the key TTL forward', async () => {
      const name = fresh('renew');
      const held = await hold(name, { owner: 'op-1', leaseMs: 1_000 });
      const res = await renew(name, { owner: 'op-1', leaseMs: 20_000 });
      expect(res.status).toBe(200);
      expect(Object.keys(res.body)).toEqual(['expiresAt']);
      expect(res.body.expiresAt).toBeGreaterThanOrEqual(held.expiresAt + 18_000);
      const state = (await inspect(name)).body;
      expect(state.holders[0].expiresAt).toBe(res.body.expiresAt);
      expect(state.ttlMs).toBeGreaterThan(15_000);
      // Past the original lease, it is still held.
      await sleep(1_200);
      expectError(await acquire(name, { owner: 'op-2', leaseMs: 1_000 }), 409, 'LOCK_CONTENDED');
    });

    it('renew and release by an owner that does not hold the lock → 409 LOCK_LOST, and the holder keeps it', async () => {
      const name = fresh('not-holder');
      const held = await hold(name, { owner: 'op-1', leaseMs: 5_000 });
      expectError(await renew(name, { owner: 'op-2', leaseMs: 60_000 }), 409, 'LOCK_LOST');
      expectError(await release(name, { owner: 'op-2' }), 409, 'LOCK_LOST');
      const never = fresh('never-held');
      expectError(await renew(never, { owner: 'op-1', leaseMs: 1_000 }), 409, 'LOCK_LOST');
      expectError(await release(never, { owner: 'op-1' }), 409, 'LOCK_LOST');
      expect(await storedKeys(never)).toEqual([]);
      expect((await inspect(name)).body.holders).toEqual([{ owner: `svc:${CREDS.serviceName}:op-1`, count: 1, expiresAt: held.expiresAt }]);
    });

    it('after two holds, release answers holdCount 1, then 0 (the lock is free), then 409 LOCK_LOST', async () => {
      const name = fresh('release-twice');
      await hold(name, { owner: 'op-1', leaseMs: 5_000 });
      await hold(name, { owner: 'op-1', leaseMs: 5_000 });
      const first = await release(name, { owner: 'op-1' });
      expect({ status: first.status, body: first.body }).toEqual({ status: 200, body: { holdCount: 1 } });
      expectError(await acquire(name, { owner: 'op-2', leaseMs: 1_000 }), 409, 'LOCK_CONTENDED'); // one hold left
      const second = await release(name, { owner: 'op-1' });
      expect({ status: second.status, body: second.body }).toEqual({ status: 200, body: { holdCount: 0 } });
      expect(await raw.exists(hashKey(name))).toBe(0);
      expectError(await inspect(name), 404, 'NOT_FOUND');
      expectError(await release(name, { owner: 'op-1' }), 409, 'LOCK_LOST');
    });
  });

  describe('GET /locks/{name}', () => {
    it('shows the holder as svc:<service>:<owner>, its count and lease end, the mode, the TTL and the last fencing token', async () => {
      const name = fresh('inspect');
      const held = await hold(name, { owner: 'settlement-run-7', leaseMs: 8_000 });
      await hold(name, { owner: 'settlement-run-7', leaseMs: 8_000 });
      const res = await inspect(name);
      expect(res.status).toBe(200);
      expect(Object.keys(res.body).sort()).toEqual(['fencingToken', 'holders', 'mode', 'name', 'ttlMs']);
      expect(res.body).toMatchObject({ name, mode: 'write', fencingToken: held.fencingToken });
      expect(res.body.holders).toEqual([{ owner: `svc:${CREDS.serviceName}:settlement-run-7`, count: 2, expiresAt: expect.any(Number) }]);
      expect(res.body.ttlMs).toBeGreaterThan(6_000);
      expect(res.body.ttlMs).toBeLessThanOrEqual(8_000);
      // Another service may look (it cannot touch, see below).
      expect((await inspect(name, LEDGER_AUTH)).body.holders).toEqual(res.body.holders);
    });

    it('answers 404 NOT_FOUND for a lock nobody holds, and stores nothing', async () => {
      const name = fresh('free-inspect');
      const res = await inspect(name);
      expectError(res, 404, 'NOT_FOUND');
      expect(res.body.message).toContain(name);
      expect(await storedKeys(name)).toEqual([]);
    });
  });

  describe('owners are kept per calling service', () => {
    it("another service using the same owner string cannot renew, release or take the first service's hold", async () => {
      const name = fresh('per-service');
      const held = await hold(name, { owner: 'job-1', leaseMs: 5_000 });
      expectError(await release(name, { owner: 'job-1' }, LEDGER_AUTH), 409, 'LOCK_LOST');
      expectError(await renew(name, { owner: 'job-1', leaseMs: 600_000 }, LEDGER_AUTH), 409, 'LOCK_LOST');
      const taken = await acquire(name, { owner: 'job-1', leaseMs: 5_000 }, LEDGER_AUTH);
      expectError(taken, 409, 'LOCK_CONTENDED');
      expect(taken.body.details.remainingTtlMs).toBeGreaterThan(3_000);
      // Billing's hold is exactly as it was: one hold, its lease unchanged.
      expect((await inspect(name)).body.holders).toEqual([{ owner: `svc:${CREDS.serviceName}:job-1`, count: 1, expiresAt: held.expiresAt }]);
      expect((await release(name, { owner: 'job-1' })).body).toEqual({ holdCount: 0 });
    });

    it("each service's owner is its own: after billing releases, ledger's job-1 takes the lock as svc:ledger:job-1", async () => {
      const name = fresh('per-service-2');
      await hold(name, { owner: 'job-1', leaseMs: 5_000 });
      await release(name, { owner: 'job-1' });
      const theirs = await hold(name, { owner: 'job-1', leaseMs: 5_000 }, LEDGER_AUTH);
      expect(theirs.holdCount).toBe(1);
      expect((await inspect(name)).body.holders).toEqual([expect.objectContaining({ owner: `svc:${LEDGER.name}:job-1`, count: 1 })]);
      expectError(await acquire(name, { owner: 'job-1', leaseMs: 5_000 }), 409, 'LOCK_CONTENDED');
    });
  });

  describe('read and write modes', () => {
    it('two readers share the lock; a writer gets 409 while they hold, and the lock once both have released', async () => {
      const name = fresh('rw');
      const r1 = await hold(name, { owner: 'reader-1', leaseMs: 5_000, mode: 'read' });
      const r2 = await hold(name, { owner: 'reader-2', leaseMs: 5_000, mode: 'read' });
      expect([r1.holdCount, r2.holdCount]).toEqual([1, 1]);
      expect(r2.fencingToken).toBeGreaterThan(r1.fencingToken);
      const state = (await inspect(name)).body;
      expect(state.mode).toBe('read');
      expect(state.holders.map((h: { owner: string }) => h.owner).sort()).toEqual([`svc:${CREDS.serviceName}:reader-1`, `svc:${CREDS.serviceName}:reader-2`]);

      expectError(await acquire(name, { owner: 'writer', leaseMs: 5_000 }), 409, 'LOCK_CONTENDED');
      expectError(await acquire(name, { owner: 'writer', leaseMs: 5_000, mode: 'write' }), 409, 'LOCK_CONTENDED');
      expect((await release(name, { owner: 'reader-1' })).body).toEqual({ holdCount: 0 });
      expectError(await acquire(name, { owner: 'writer', leaseMs: 5_000 }), 409, 'LOCK_CONTENDED'); // reader-2 still holds
      expect((await release(name, { owner: 'reader-2' })).body).toEqual({ holdCount: 0 });
      const w = await hold(name, { owner: 'writer', leaseMs: 5_000 });
      expect(w.fencingToken).toBeGreaterThan(r2.fencingToken);
      expect((await inspect(name)).body.mode).toBe('write');
      expectError(await acquire(name, { owner: 'reader-3', leaseMs: 5_000, mode: 'read' }), 409, 'LOCK_CONTENDED');
    });

    it('a waiting writer keeps new readers out, and gets the lock when the last reader leaves', async () => {
      const name = fresh('rw-starve');
      await hold(name, { owner: 'reader-1', leaseMs: 10_000, mode: 'read' });
      // .then() sends the request now (a supertest request is lazy).
      const writer = acquire(name, { owner: 'writer', leaseMs: 5_000, waitMs: 10_000 }).then((res) => res);
      await sleep(300); // the writer has tried once and is waiting
      expectError(await acquire(name, { owner: 'reader-2', leaseMs: 5_000, mode: 'read' }), 409, 'LOCK_CONTENDED');
      const releasedAt = Date.now();
      expect((await release(name, { owner: 'reader-1' })).body).toEqual({ holdCount: 0 });
      const res = await writer;
      expect(res.status).toBe(200);
      expect(Date.now() - releasedAt).toBeLessThan(2_000);
      expect((await inspect(name)).body).toMatchObject({ mode: 'write', holders: [expect.objectContaining({ owner: `svc:${CREDS.serviceName}:writer` })] });
    });

    it('a reader cannot upgrade itself to writer (409 LOCK_UPGRADE_REFUSED), and keeps its read hold', async () => {
      const name = fresh('upgrade');
      await hold(name, { owner: 'reader', leaseMs: 5_000, mode: 'read' });
      expectError(await acquire(name, { owner: 'reader', leaseMs: 5_000, mode: 'write' }), 409, 'LOCK_UPGRADE_REFUSED');
      expect((await inspect(name)).body).toMatchObject({ mode: 'read', holders: [expect.objectContaining({ count: 1 })] });
    });
  });

  describe('lease expiry', () => {
    it('a lease that ends without renewal frees the lock for another owner, whose fencing token is higher; the old owner has lost it', async () => {
      const name = fresh('lease');
      const first = await hold(name, { owner: 'slow', leaseMs: 150 });
      expect(first.holdCount).toBe(1);
      await sleep(400);
      expectError(await inspect(name), 404, 'NOT_FOUND');
      const next = await hold(name, { owner: 'next', leaseMs: 5_000 });
      expect(next.holdCount).toBe(1);
      expect(next.fencingToken).toBeGreaterThan(first.fencingToken);
      // The stale owner can neither extend nor give back what it no longer holds.
      expectError(await renew(name, { owner: 'slow', leaseMs: 5_000 }), 409, 'LOCK_LOST');
      expectError(await release(name, { owner: 'slow' }), 409, 'LOCK_LOST');
      expect((await inspect(name)).body.holders).toEqual([expect.objectContaining({ owner: `svc:${CREDS.serviceName}:next`, count: 1 })]);
    });
  });

  describe('identities', () => {
    const name = 'e2e:identity';
    const body = { owner: 'op-1', leaseMs: 5_000 };
    const routes: Array<['get' | 'post', string, object | undefined]> = [
      ['post', `/locks/${name}/acquire`, body],
      ['post', `/locks/${name}/renew`, body],
      ['post', `/locks/${name}/release`, { owner: 'op-1' }],
      ['get', `/locks/${name}`, undefined],
    ];
    const callers: Array<[string, number, (method: string, path: string, raw: string) => Record<string, string>]> = [
      ['no credentials', 401, () => ({})],
      ['a forged service token', 401, () => ({ 'x-service-token': 'not-the-service-token-0123456789' })],
      ['an app-user JWT', 403, () => ({ authorization: `Bearer ${userToken('acc_locks')}` })],
      ['a signed merchant request', 403, (method, path, raw) => merchantHeaders(method.toUpperCase(), path, raw)],
      ['the admin key', 403, () => ({ 'x-admin-key': CREDS.adminKey })],
    ];
    const cases = routes.flatMap(([method, path, b]) =>
      callers.map(([who, status, headers]) => [method.toUpperCase(), path, who, status, method, b, headers] as const),
    );

    it.each(cases)('%s %s with %s → %s, and no lock is taken', async (_m, path, _who, status, method, b, headers) => {
      const payload = b ? JSON.stringify(b) : '';
      const agent = http();
      let req = agent[method](path).set(headers(method, path, payload));
      if (b) req = req.set('content-type', 'application/json').send(payload);
      const res = await req;
      expectError(res, status, status === 401 ? 'UNAUTHORIZED' : 'FORBIDDEN');
      expect(await storedKeys(name)).toEqual([]);
    });

    it('the same requests with the service token are served', async () => {
      expect((await acquire(name, body)).status).toBe(200);
      expect((await renew(name, body)).status).toBe(200);
      expect((await inspect(name)).status).toBe(200);
      expect((await release(name, { owner: 'op-1' })).status).toBe(200);
    });
  });

  describe('validation', () => {
    const longName = 'n'.repeat(125);
    const ok = { owner: 'op-1', leaseMs: 5_000 };
    it.each<[string, 'acquire' | 'renew' | 'release', string, Record<string, unknown>, string]>([
      ['a name with a space', 'acquire', 'has%20space', ok, 'name'],
      ['a name of 125 characters', 'acquire', longName, ok, 'name'],
      ['a name with a brace (a hash tag of its own)', 'acquire', 'a%7Bb%7D', ok, 'name'],
      ['a bad name on renew', 'renew', 'has%20space', ok, 'name'],
      ['a bad name on release', 'release', longName, { owner: 'op-1' }, 'name'],
      ['owner missing', 'acquire', 'v-owner-missing', { leaseMs: 5_000 }, 'owner'],
      ['an owner of 129 characters', 'acquire', 'v-owner-long', { owner: 'o'.repeat(129), leaseMs: 5_000 }, 'owner'],
      ['an owner with a space', 'acquire', 'v-owner-space', { owner: 'op 1', leaseMs: 5_000 }, 'owner'],
      ['an owner with a slash', 'acquire', 'v-owner-slash', { owner: 'svc/op', leaseMs: 5_000 }, 'owner'],
      ['an owner that is a number', 'acquire', 'v-owner-number', { owner: 42, leaseMs: 5_000 }, 'owner'],
      ['an empty owner', 'release', 'v-owner-empty', { owner: '' }, 'owner'],
      ['leaseMs missing', 'acquire', 'v-lease-missing', { owner: 'op-1' }, 'leaseMs'],
      ['leaseMs 0', 'acquire', 'v-lease-0', { owner: 'op-1', leaseMs: 0 }, 'leaseMs'],
      ['leaseMs 99', 'acquire', 'v-lease-99', { owner: 'op-1', leaseMs: 99 }, 'leaseMs'],
      ['leaseMs 600001', 'acquire', 'v-lease-max', { owner: 'op-1', leaseMs: 600_001 }, 'leaseMs'],
      ['leaseMs 1000.5', 'acquire', 'v-lease-frac', { owner: 'op-1', leaseMs: 1000.5 }, 'leaseMs'],
      ['leaseMs as a string', 'acquire', 'v-lease-string', { owner: 'op-1', leaseMs: '5000' }, 'leaseMs'],
      ['waitMs -1', 'acquire', 'v-wait-neg', { ...ok, waitMs: -1 }, 'waitMs'],
      ['waitMs 30001', 'acquire', 'v-wait-max', { ...ok, waitMs: 30_001 }, 'waitMs'],
      ['mode exclusive', 'acquire', 'v-mode', { ...ok, mode: 'exclusive' }, 'mode'],
      ['an unknown field', 'acquire', 'v-extra', { ...ok, fencingToken: 1 }, 'fencingToken'],
      ['renew with leaseMs 99', 'renew', 'v-renew-lease', { owner: 'op-1', leaseMs: 99 }, 'leaseMs'],
      ['renew without leaseMs', 'renew', 'v-renew-missing', { owner: 'op-1' }, 'leaseMs'],
      ['release with a leaseMs', 'release', 'v-release-extra', { owner: 'op-1', leaseMs: 5_000 }, 'leaseMs'],
    ])('rejects %s with 400 naming the field, and stores nothing', async (_what, route, name, b, field) => {
      const res = await http().post(`/locks/${name}/${route}`).set(BILLING).send(b);
      expectError(res, 400, 'VALIDATION_FAILED', field);
      expect(await storedKeys(decodeURIComponent(name))).toEqual([]);
    });

    it('rejects a bad name on GET with 400 naming the field', async () => {
      expectError(await inspect('has%20space'), 400, 'VALIDATION_FAILED', 'name');
      expectError(await inspect(longName), 400, 'VALIDATION_FAILED', 'name');
    });

    it('names every failing field at once', async () => {
      const res = await acquire('v-many', { owner: 'a b', leaseMs: 0, waitMs: -1, mode: 'x' });
      expectError(res, 400, 'VALIDATION_FAILED');
      expect(res.body.details.map((d: { field: string }) => d.field).sort()).toEqual(['leaseMs', 'mode', 'owner', 'waitMs']);
    });

    it('accepts the limits themselves: a 128-character owner, leaseMs 100 and 600000, waitMs 30000', async () => {
      const name = fresh('limits');
      const owner = 'o'.repeat(128);
      const res = await acquire(name, { owner, leaseMs: 100, waitMs: 30_000 });
      expect({ status: res.status, error: res.body.error }).toEqual({ status: 200, error: undefined });
      expect((await renew(name, { owner, leaseMs: 600_000 })).status).toBe(200);
      expect((await inspect(name)).body.holders).toEqual([expect.objectContaining({ owner: `svc:${CREDS.serviceName}:${owner}` })]);
      expect((await release(name, { owner })).body).toEqual({ holdCount: 0 });
    });

    it('accepts a name of 124 characters, the documented maximum', async () => {
      const name = 'n'.repeat(124);
      const res = await acquire(name, { owner: 'op-1', leaseMs: 5_000 });
      expect({ status: res.status, error: res.body.error }).toEqual({ status: 200, error: undefined });
      expect((await inspect(name)).body).toMatchObject({ name, holders: [expect.objectContaining({ count: 1 })] });
      expect((await release(name, { owner: 'op-1' })).body).toEqual({ holdCount: 0 });
    });
  });

  describe('when Redis is down', () => {
    it.each([
      ['stopped', () => redis.stop()],
      ['killed (SIGKILL)', () => redis.kill()],
    ])('Redis %s: acquire answers 503 promptly, and once Redis is back the lock is not held (fail closed)', async (_how, down) => {
      const name = fresh('outage');
      // A lock held before the outage survives it (AOF), so the "after" checks below can tell held from free.
      const before = fresh('outage-held');
      await hold(before, { owner: 'op-0', leaseMs: 60_000 });
      await down();
      try {
        for (const call of [
          () => acquire(name, { owner: 'op-1', leaseMs: 60_000 }),
          () => acquire(name, { owner: 'op-1', leaseMs: 60_000, waitMs: 10_000 }),
          () => renew(before, { owner: 'op-0', leaseMs: 60_000 }),
          () => release(before, { owner: 'op-0' }),
          () => inspect(before),
        ]) {
          const started = Date.now();
          const res = await call();
          const elapsed = Date.now() - started;
          expectError(res, 503, 'REDIS_UNAVAILABLE');
          expect(res.headers['retry-after']).toBe('1');
          expect(elapsed).toBeLessThan(t.config.redis.commandTimeoutMs + 1_000);
        }
      } finally {
        await redis.start();
      }
      await waitUntil('the lock API answers again', async () => (await inspect(before)).status === 200, 10_000, 100);
      // The hold from before the outage is intact (so the data survived), and the refused one was never taken.
      expect((await inspect(before)).body.holders).toEqual([expect.objectContaining({ owner: `svc:${CREDS.serviceName}:op-0`, count: 1 })]);
      expectError(await inspect(name), 404, 'NOT_FOUND');
      expect(await raw.exists(hashKey(name))).toBe(0);
      expectError(await release(name, { owner: 'op-1' }), 409, 'LOCK_LOST');
      const other = await hold(name, { owner: 'op-2', leaseMs: 5_000 });
      expect(other.holdCount).toBe(1);
    });
  });

  describe('OpenAPI document', () => {
    it('lists the four lock routes under the service-token scheme, with their request schemas and error responses', async () => {
      const res = await http().get('/docs/openapi.json');
      expect(res.status).toBe(200);
      const doc = res.body;
      const ops: Array<[string, string, string | undefined, string[]]> = [
        ['/locks/{name}/acquire', 'post', 'AcquireLockDto', ['409', '413', '414', '415']],
        ['/locks/{name}/renew', 'post', 'RenewLockDto', ['409', '413', '414', '415']],
        ['/locks/{name}/release', 'post', 'ReleaseLockDto', ['409', '413', '414', '415']],
        ['/locks/{name}', 'get', undefined, ['404', '414']],
      ];
      for (const [path, method, schema, extra] of ops) {
        const op = doc.paths[path]?.[method];
        expect({ path, method, security: op?.security }).toEqual({ path, method, security: [{ ServiceToken: [] }] });
        expect({ path, responses: Object.keys(op.responses).sort() }).toEqual({ path, responses: ['200', '400', '401', '403', '503', ...extra].sort() });
        expect(op.parameters).toEqual([expect.objectContaining({ name: 'name', in: 'path', required: true })]);
        const body = op.requestBody?.content?.['application/json']?.schema;
        expect({ path, body }).toEqual({ path, body: schema ? { $ref: `#/components/schemas/${schema}` } : undefined });
      }
      const schemas = doc.components.schemas;
      expect(schemas.AcquireLockDto.required.sort()).toEqual(['leaseMs', 'owner']);
      expect(schemas.AcquireLockDto.properties).toMatchObject({
        owner: { type: 'string', maxLength: 128 },
        leaseMs: { minimum: 100, maximum: 600_000 },
        waitMs: { minimum: 0, maximum: 30_000 },
        mode: { enum: ['write', 'read'] },
      });
      expect(schemas.RenewLockDto.required.sort()).toEqual(['leaseMs', 'owner']);
      expect(schemas.RenewLockDto.properties.leaseMs).toMatchObject({ minimum: 100, maximum: 600_000 });
      expect(schemas.ReleaseLockDto.required).toEqual(['owner']);
      expect(Object.keys(schemas.ReleaseLockDto.properties)).toEqual(['owner']);
      const ok = (path: string, method: string) => doc.paths[path][method].responses['200'].content['application/json'].schema;
      expect(ok('/locks/{name}/acquire', 'post')).toEqual({ $ref: '#/components/schemas/AcquireResultDto' });
      expect(ok('/locks/{name}', 'get')).toEqual({ $ref: '#/components/schemas/LockStateDto' });
      expect(Object.keys(schemas.AcquireResultDto.properties).sort()).toEqual(['expiresAt', 'fencingToken', 'holdCount']);
    });
  });
});
