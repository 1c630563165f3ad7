import request from 'supertest';
import { DelayQueueService } from '../../src/engines/delay-queue/delay-queue.service';
import type { Delivery } from '../../src/engines/delay-queue/delay-queue.types';
import { waitUntil } from '../harness/redis-process';
import { RedisServerHandle, startRedisServer } from '../harness/redis-server';
import { CREDS, startTestApp, TestApp, userToken } from '../support/test-app';

/**
 * The delay queue's ops surface over HTTP on the whole app: the admin
 * endpoints (auth, paging, retry, cancel, validation, Redis outage), its
 * Prometheus metrics and its OpenAPI document. Data is seeded through
 * DelayQueueService in the same app; dead letters come from a processor whose
 * handler always throws.
 */

const ERROR_KEYS = ['statusCode', 'error', 'message', 'requestId'];

function expectErrorBody(body: Record<string, unknown>, status: number): void {
  expect(body.statusCode).toBe(status);
  for (const k of ERROR_KEYS) expect(body).toHaveProperty(k);
  expect(Object.keys(body).filter((k) => ![...ERROR_KEYS, 'details'].includes(k))).toEqual([]);
  expect(typeof body.requestId).toBe('string');
}

/** One sample of a metric with only the queue label, from Prometheus text. */
function sample(text: string, name: string, queue: string): number | undefined {
  const m = new RegExp(`^${name}\\{queue="${queue}"\\} (\\S+)$`, 'm').exec(text);
  return m ? Number(m[1]) : undefined;
}

describe('Delay-queue admin API', () => {
  let redis: RedisServerHandle;
  let t: TestApp;
  let dq: DelayQueueService;
  const admin = { 'x-admin-key': CREDS.adminKey };
  /** Every delivery the always-failing dead-q handler got, in order. */
  const deadDeliveries: Array<{ id: string; attempt: number }> = [];
  let overdueAt = 0;

  beforeAll(async () => {
    redis = await startRedisServer();
    t = await startTestApp(redis.url, { RATE_LIMIT_ADMIN: '100000', RATE_LIMIT_ANONYMOUS: '100000' });
    dq = t.app.get(DelayQueueService);

    // stats-q: one item already overdue (no processor, so it stays pending) and two in the future.
    overdueAt = Date.now() - 5000;
    await dq.schedule('stats-q', 'overdue', { dueAt: overdueAt }, { n: 0 });
    await dq.schedule('stats-q', 'soon', { delayMs: 60_000 }, { n: 1 });
    await dq.schedule('stats-q', 'later', { delayMs: 120_000 }, { n: 2 });

    await dq.schedule('cancel-q', 'p1', { delayMs: 3_600_000 }, { n: 1 });
    await dq.schedule('cancel-q', 'p2', { delayMs: 3_600_000 }, { n: 2 });

    // dead-q: every delivery fails; two attempts, then dead. Due 150 ms apart, so they die in order d0..d4.
    await dq.process<{ n: number }>(
      'dead-q',
      async (d: Delivery<{ n: number }>) => {
        deadDeliveries.push({ id: d.id, attempt: d.attempt });
        throw new Error(`boom ${d.id}`);
      },
      { retry: { attempts: 2, backoff: { initialMs: 10, maxMs: 10 } }, pollMs: 50, concurrency: 5 },
    );
    const base = Date.now() + 100;
    for (let i = 0; i < 5; i++) await dq.schedule('dead-q', `d${i}`, { dueAt: base + i * 150 }, { n: i });
    await waitUntil('five dead letters', async () => (await dq.stats('dead-q')).dead === 5, 10_000, 25);
  });

  afterAll(async () => {
    await t?.close();
    await redis?.destroy();
  });

  describe('authentication', () => {
    const routes: Array<[string, 'get' | 'post' | 'delete', string, number]> = [
      ['list', 'get', '/admin/delay-queues', 200],
      ['stats', 'get', '/admin/delay-queues/stats-q', 200],
      ['dead letters', 'get', '/admin/delay-queues/dead-q/dead', 200],
      ['retry', 'post', '/admin/delay-queues/dead-q/dead/no-such-id/retry', 404],
      ['cancel', 'delete', '/admin/delay-queues/cancel-q/items/no-such-id', 404],
    ];
    const callers: Array<[string, Record<string, string>, number | 'route']> = [
      ['no credentials', {}, 401],
      ['a wrong admin key', { 'x-admin-key': 'not-the-admin-key-0123456789' }, 401],
      ['an app-user JWT', { authorization: `Bearer ${userToken('acc_dq')}` }, 403],
      ['a service token', { 'x-service-token': CREDS.serviceToken }, 403],
      ['the admin key', admin, 'route'],
    ];
    const cases = routes.flatMap(([route, method, path, ok]) =>
      callers.map(([who, headers, status]) => [route, who, status === 'route' ? ok : status, method, path, headers] as const),
    );

    it.each(cases)('%s with %s → %s', async (_route, _who, status, method, path, headers) => {
      const res = await request(t.server)[method](path).set(headers);
      expect(res.status).toBe(status);
      if (status >= 400) expectErrorBody(res.body, status);
    });
  });

  describe('queues and stats', () => {
    it('GET /admin/delay-queues lists every known queue, sorted, each with its counts', async () => {
      const res = await request(t.server).get('/admin/delay-queues').set(admin);
      expect(res.status).toBe(200);
      const names = (res.body.queues as Array<{ queue: string }>).map((q) => q.queue);
      expect(names).toEqual([...names].sort());
      expect(names).toEqual(expect.arrayContaining(['cancel-q', 'dead-q', 'stats-q']));
      const byName = Object.fromEntries((res.body.queues as Array<{ queue: string }>).map((q) => [q.queue, q]));
      expect(byName['cancel-q']).toMatchObject({ pending: 2, ready: 0, inFlight: 0, dead: 0 });
      expect(byName['dead-q']).toMatchObject({ pending: 0, ready: 0, inFlight: 0, dead: 5 });
      expect(byName['stats-q']).toMatchObject({ pending: 3, ready: 0, inFlight: 0, dead: 0, nextDueAt: overdueAt });
    });

    it('GET /admin/delay-queues/{queue} returns the counts, how overdue the oldest item is, and the next due time', async () => {
      const res = await request(t.server).get('/admin/delay-queues/stats-q').set(admin);
      expect(res.status).toBe(200);
      expect(Object.keys(res.body).sort()).toEqual(['dead', 'inFlight', 'nextDueAt', 'oldestOverdueMs', 'pending', 'queue', 'ready']);
      expect(res.body).toMatchObject({ queue: 'stats-q', pending: 3, ready: 0, inFlight: 0, dead: 0, nextDueAt: overdueAt });
      expect(res.body.oldestOverdueMs).toBeGreaterThanOrEqual(4900);
      expect(res.body.oldestOverdueMs).toBeLessThan(60_000);
    });
  });

  describe('unknown queues', () => {
    it.each<[string, 'get' | 'post' | 'delete', string]>([
      ['stats', 'get', '/admin/delay-queues/no-such-queue'],
      ['dead letters', 'get', '/admin/delay-queues/no-such-queue/dead'],
      ['retry', 'post', '/admin/delay-queues/no-such-queue/dead/d2/retry'],
      ['cancel', 'delete', '/admin/delay-queues/no-such-queue/items/p2'],
    ])('%s of a queue nobody ever scheduled on or processes → 404 naming the queue', async (_route, method, path) => {
      const res = await request(t.server)[method](path).set(admin);
      expect(res.status).toBe(404);
      expectErrorBody(res.body, 404);
      expect(res.body.error).toBe('NOT_FOUND');
      expect(res.body.message).toContain('no delay queue no-such-queue');
      // Asking did not make it known.
      const list = await request(t.server).get('/admin/delay-queues').set(admin);
      expect((list.body.queues as Array<{ queue: string }>).map((q) => q.queue)).not.toContain('no-such-queue');
    });

    it('a built-in queue of the service with only a processor and no items is known (200, zero counts); a misspelt name is not', async () => {
      const res = await request(t.server).get('/admin/delay-queues/payment-queries').set(admin);
      expect(res.status).toBe(200);
      expect(res.body).toMatchObject({ queue: 'payment-queries', pending: 0, ready: 0, inFlight: 0, dead: 0, nextDueAt: null });
      expect((await request(t.server).get('/admin/delay-queues/payment-queries/dead').set(admin)).body).toEqual({ items: [], total: 0, offset: 0, limit: 20 });
      expect((await request(t.server).get('/admin/delay-queues/payment-query').set(admin)).status).toBe(404);
    });

    it('a queue becomes known once any instance schedules on it (the registry is shared in Redis)', async () => {
      expect((await request(t.server).get('/admin/delay-queues/elsewhere-q').set(admin)).status).toBe(404);
      const other = await startTestApp(redis.url, { REDIS_KEY_PREFIX: t.config.redis.keyPrefix });
      try {
        await other.app.get(DelayQueueService).schedule('elsewhere-q', 'x1', { delayMs: 3_600_000 }, { n: 1 });
      } finally {
        await other.close();
      }
      const res = await request(t.server).get('/admin/delay-queues/elsewhere-q').set(admin);
      expect(res.status).toBe(200);
      expect(res.body).toMatchObject({ queue: 'elsewhere-q', pending: 1 });
    });
  });

  describe('dead letters', () => {
    const page = (query: string) => request(t.server).get(`/admin/delay-queues/dead-q/dead${query}`).set(admin);

    it('pages dead letters newest first, with payload, attempts, last error and time of death', async () => {
      const first = await page('?offset=0&limit=2');
      expect(first.status).toBe(200);
      expect(first.body).toMatchObject({ total: 5, offset: 0, limit: 2 });
      expect(first.body.items).toEqual([
        { id: 'd4', payload: { n: 4 }, attempts: 2, lastError: 'Error: boom d4', diedAt: expect.any(Number) },
        { id: 'd3', payload: { n: 3 }, attempts: 2, lastError: 'Error: boom d3', diedAt: expect.any(Number) },
      ]);
      const second = await page('?offset=2&limit=2');
      const last = await page('?offset=4&limit=2');
      const beyond = await page('?offset=5&limit=2');
      expect(second.body.items.map((i: { id: string }) => i.id)).toEqual(['d2', 'd1']);
      expect(last.body.items.map((i: { id: string }) => i.id)).toEqual(['d0']);
      expect(beyond.body).toEqual({ items: [], total: 5, offset: 5, limit: 2 });
      const diedAt = [...first.body.items, ...second.body.items, ...last.body.items].map((i: { diedAt: number }) => i.diedAt);
      expect(diedAt).toEqual([...diedAt].sort((a, b) => b - a));
      // Defaults: offset 0, limit 20.
      const all = await page('');
      expect(all.body).toMatchObject({ total: 5, offset: 0, limit: 20 });
      expect(all.body.items.map((i: { id: string }) => i.id)).toEqual(['d4', 'd3', 'd2', 'd1', 'd0']);
    });

    it('POST …/dead/{id}/retry makes the dead letter due now with its delivery count reset: it is delivered again from attempt 1', async () => {
      const before = deadDeliveries.length;
      const sent = Date.now();
      const res = await request(t.server).post('/admin/delay-queues/dead-q/dead/d0/retry').set(admin);
      expect(res.status).toBe(200);
      expect(Object.keys(res.body)).toEqual(['dueAt']);
      expect(Math.abs(res.body.dueAt - sent)).toBeLessThan(2000);
      // The handler still fails, so d0 runs attempts 1 and 2 again and dies again, now the newest dead letter.
      await waitUntil('d0 delivered twice more', async () => deadDeliveries.slice(before).filter((d) => d.id === 'd0').length >= 2, 5000, 20);
      await waitUntil('d0 dead again', async () => (await dq.stats('dead-q')).dead === 5, 5000, 20);
      expect(deadDeliveries.slice(before)).toEqual([
        { id: 'd0', attempt: 1 },
        { id: 'd0', attempt: 2 },
      ]);
      const newest = (await page('?limit=1')).body.items[0];
      expect(newest).toMatchObject({ id: 'd0', attempts: 2, lastError: 'Error: boom d0' });
    });

    it.each([
      ['an unknown id', 'no-such-id'],
      ['an item that is pending, not dead', 'p1'],
    ])('POST …/dead/{id}/retry answers 404 for %s', async (_what, id) => {
      const queue = id === 'p1' ? 'cancel-q' : 'dead-q';
      const res = await request(t.server).post(`/admin/delay-queues/${queue}/dead/${id}/retry`).set(admin);
      expect(res.status).toBe(404);
      expectErrorBody(res.body, 404);
      expect(res.body.error).toBe('NOT_FOUND');
      expect(res.body.message).toBe(`no dead letter ${id} in queue ${queue} (never dead, already retried, or cancelled)`);
      if (id === 'p1') expect(await dq.get('cancel-q', 'p1')).toMatchObject({ state: 'pending' });
    });
  });

  describe('cancel', () => {
    it('DELETE …/items/{id} cancels a pending item (200, wasPending) and then answers 404', async () => {
      const first = await request(t.server).delete('/admin/delay-queues/cancel-q/items/p1').set(admin);
      expect(first.status).toBe(200);
      expect(first.body).toEqual({ wasPending: true, state: 'pending', attempts: 0 });
      expect(await dq.get('cancel-q', 'p1')).toBeNull();
      const second = await request(t.server).delete('/admin/delay-queues/cancel-q/items/p1').set(admin);
      expect(second.status).toBe(404);
      expectErrorBody(second.body, 404);
      expect(second.body.error).toBe('NOT_FOUND');
      expect(second.body.message).toContain('p1');
      expect((await dq.stats('cancel-q')).pending).toBe(1);
    });

    it('DELETE …/items/{id} removes a dead letter, saying no handler is pending on it', async () => {
      const res = await request(t.server).delete('/admin/delay-queues/dead-q/items/d1').set(admin);
      expect(res.status).toBe(200);
      expect(res.body).toEqual({ wasPending: false, state: 'dead', attempts: 2 });
      const after = await request(t.server).get('/admin/delay-queues/dead-q/dead').set(admin);
      expect(after.body.total).toBe(4);
      expect(after.body.items.map((i: { id: string }) => i.id)).not.toContain('d1');
    });
  });

  describe('validation', () => {
    it.each<[string, 'get' | 'post' | 'delete', string, string]>([
      ['a queue name with a character outside A-Z a-z 0-9 . _ : -', 'get', '/admin/delay-queues/bad$name', 'queue'],
      ['a queue name starting with a dash', 'get', '/admin/delay-queues/-lead', 'queue'],
      ['a queue name of 65 characters', 'get', `/admin/delay-queues/${'q'.repeat(65)}`, 'queue'],
      ['a bad queue name on the dead-letter route', 'get', '/admin/delay-queues/bad$name/dead', 'queue'],
      ['a bad queue name on the retry route', 'post', '/admin/delay-queues/bad$name/dead/d2/retry', 'queue'],
      ['an item id with a space', 'delete', '/admin/delay-queues/cancel-q/items/has%20space', 'id'],
      ['limit 0', 'get', '/admin/delay-queues/dead-q/dead?limit=0', 'limit'],
      ['limit 101', 'get', '/admin/delay-queues/dead-q/dead?limit=101', 'limit'],
      ['limit abc', 'get', '/admin/delay-queues/dead-q/dead?limit=abc', 'limit'],
      ['offset -1', 'get', '/admin/delay-queues/dead-q/dead?offset=-1', 'offset'],
      ['offset 1.5', 'get', '/admin/delay-queues/dead-q/dead?offset=1.5', 'offset'],
      ['an unknown query parameter', 'get', '/admin/delay-queues/dead-q/dead?page=2', 'page'],
    ])('rejects %s with 400 naming the field', async (_what, method, path, field) => {
      const res = await request(t.server)[method](path).set(admin);
      expect(res.status).toBe(400);
      expectErrorBody(res.body, 400);
      expect(res.body.error).toBe('VALIDATION_FAILED');
      expect(res.body.details.map((d: { field: string }) => d.field)).toContain(field);
      expect(res.body.message).toContain(field);
    });
  });

  describe('metrics', () => {
    it('counts scheduled, cancelled, fired, acked, retried and dead items by queue, with gauges and the lateness histogram', async () => {
      const queue = 'metrics-q';
      let release!: () => void;
      const gate = new Promise<void>((r) => (release = r));
      await dq.process<{ kind: string }>(
        queue,
        async (d: Delivery<{ kind: string }>) => {
          if (d.payload.kind === 'fail') throw new Error('nope');
          if (d.payload.kind === 'hold') await gate;
        },
        { retry: { attempts: 2, backoff: { initialMs: 10, maxMs: 10 } }, pollMs: 50, concurrency: 10 },
      );
      for (const id of ['ok1', 'ok2', 'ok3']) await dq.schedule(queue, id, { delayMs: 0 }, { kind: 'ok' }); // 3 fired, 3 acked
      for (const id of ['fail1', 'fail2']) await dq.schedule(queue, id, { delayMs: 0 }, { kind: 'fail' }); // 4 fired, 2 retried, 2 dead
      await dq.schedule(queue, 'hold1', { delayMs: 0 }, { kind: 'hold' }); // 1 fired, in flight
      await dq.schedule(queue, 'fut1', { delayMs: 3_600_000 }, { kind: 'ok' });
      await dq.schedule(queue, 'fut2', { delayMs: 3_600_000 }, { kind: 'ok' });
      expect((await dq.schedule(queue, 'fut1', { delayMs: 7_200_000 }, { kind: 'ok' })).written).toBe(true); // replaced: counts
      expect((await dq.schedule(queue, 'fut2', { delayMs: 60_000 }, { kind: 'ok' }, { ifExists: 'keep' })).written).toBe(false); // kept: does not
      expect((await dq.cancel(queue, 'fut2')).wasPending).toBe(true);
      expect((await dq.cancel(queue, 'never-scheduled')).state).toBe('absent'); // nothing to cancel: does not count

      let text = '';
      /** Scrapes /metrics until `ready(text)`; `text` keeps the last scrape. */
      const scrapeUntil = (what: string, ready: () => boolean) =>
        waitUntil(
          what,
          async () => {
            const res = await request(t.server).get('/metrics').set(admin);
            text = res.status === 200 ? res.text : '';
            return ready() || `not yet (status ${res.status})`;
          },
          5000,
          50,
        );
      await scrapeUntil(
        'three acks and two dead letters',
        () => sample(text, 'delay_queue_acked_total', queue) === 3 && sample(text, 'delay_queue_dead_total', queue) === 2,
      );
      const counts = (names: string[]) => Object.fromEntries(names.map((n) => [n, sample(text, n, queue)]));
      expect(
        counts([
          'delay_queue_scheduled_total',
          'delay_queue_cancelled_total',
          'delay_queue_fired_total',
          'delay_queue_acked_total',
          'delay_queue_retried_total',
          'delay_queue_dead_total',
          'delay_queue_pending',
          'delay_queue_ready',
          'delay_queue_in_flight',
          'delay_queue_lateness_seconds_count',
        ]),
      ).toEqual({
        delay_queue_scheduled_total: 9,
        delay_queue_cancelled_total: 1,
        delay_queue_fired_total: 8,
        delay_queue_acked_total: 3,
        delay_queue_retried_total: 2,
        delay_queue_dead_total: 2,
        delay_queue_pending: 1,
        delay_queue_ready: 0,
        delay_queue_in_flight: 1,
        delay_queue_lateness_seconds_count: 8,
      });
      expect(text).toMatch(/^# TYPE delay_queue_lateness_seconds histogram$/m);
      expect(text).toMatch(new RegExp(`^delay_queue_lateness_seconds_bucket\\{le="\\+Inf",queue="${queue}"\\} 8$`, 'm'));

      release();
      await scrapeUntil(
        'the held item acked',
        () => sample(text, 'delay_queue_acked_total', queue) === 4 && sample(text, 'delay_queue_in_flight', queue) === 0,
      );
      expect(sample(text, 'delay_queue_fired_total', queue)).toBe(8);
    });
  });

  describe('OpenAPI document', () => {
    it('documents every admin endpoint under the admin-key security scheme, with its error responses and paging bounds', async () => {
      const res = await request(t.server).get('/docs/openapi.json');
      expect(res.status).toBe(200);
      const doc = res.body;
      expect(doc.components.securitySchemes.AdminKey).toMatchObject({ type: 'apiKey', in: 'header', name: 'X-Admin-Key' });
      const ops: Array<[string, string, string[]]> = [
        // The list takes no input, so it cannot answer 400. A path parameter may be too long (414); a POST or DELETE may
        // carry a body the HTTP layer refuses (413, 415).
        ['/admin/delay-queues', 'get', []],
        ['/admin/delay-queues/{queue}', 'get', ['400', '404', '414']],
        ['/admin/delay-queues/{queue}/dead', 'get', ['400', '404', '414']],
        ['/admin/delay-queues/{queue}/dead/{id}/retry', 'post', ['400', '404', '413', '414', '415']],
        ['/admin/delay-queues/{queue}/items/{id}', 'delete', ['400', '404', '413', '414', '415']],
      ];
      for (const [path, method, extra] of ops) {
        const op = doc.paths[path]?.[method];
        expect({ path, method, security: op?.security }).toEqual({ path, method, security: [{ AdminKey: [] }] });
        expect({ path, responses: Object.keys(op.responses).sort() }).toEqual({ path, responses: ['200', '401', '403', '503', ...extra].sort() });
        expect(op.responses['503'].content['application/json'].schema).toEqual({ $ref: '#/components/schemas/ErrorBodyDto' });
      }
      const params = doc.paths['/admin/delay-queues/{queue}/dead'].get.parameters as Array<{ name: string; in: string; schema: Record<string, unknown> }>;
      const byName = Object.fromEntries(params.map((p) => [`${p.in}:${p.name}`, p.schema]));
      expect(byName['path:queue']).toBeDefined();
      expect(byName['query:offset']).toMatchObject({ minimum: 0, maximum: 1_000_000 });
      expect(byName['query:limit']).toMatchObject({ minimum: 1, maximum: 100 });
    });
  });

  describe('when Redis is down', () => {
    it('answers 503 with Retry-After promptly on every admin endpoint, and recovers once Redis is back', async () => {
      const before = await dq.stats('cancel-q');
      await redis.stop();
      try {
        const calls: Array<['get' | 'post' | 'delete', string]> = [
          ['get', '/admin/delay-queues'],
          ['get', '/admin/delay-queues/stats-q'],
          ['get', '/admin/delay-queues/dead-q/dead'],
          ['post', '/admin/delay-queues/dead-q/dead/d2/retry'],
          ['delete', '/admin/delay-queues/cancel-q/items/p2'],
        ];
        for (const [method, path] of calls) {
          const started = Date.now();
          const res = await request(t.server)[method](path).set(admin);
          expect({ path, status: res.status }).toEqual({ path, status: 503 });
          expect(Date.now() - started).toBeLessThan(t.config.redis.commandTimeoutMs + 1000);
          expect(res.headers['retry-after']).toBe('1');
          expectErrorBody(res.body, 503);
          expect(res.body.error).toBe('REDIS_UNAVAILABLE');
        }
      } finally {
        await redis.start();
      }
      await waitUntil(
        'the admin API answers again',
        async () => (await request(t.server).get('/admin/delay-queues/stats-q').set(admin)).status === 200,
        10_000,
        100,
      );
      // The refused cancel changed nothing.
      expect((await request(t.server).get('/admin/delay-queues/cancel-q').set(admin)).body).toMatchObject({ pending: before.pending });
      expect(await dq.get('cancel-q', 'p2')).toMatchObject({ state: 'pending' });
    });
  });
});
