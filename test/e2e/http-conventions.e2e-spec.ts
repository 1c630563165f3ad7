import Redis from 'ioredis';
import { connect } from 'node:net';
import type { AddressInfo } from 'node:net';
import request from 'supertest';
import { RedisServerHandle, startRedisServer } from '../harness/redis-server';
import { rawExchange } from '../support/raw-http';
import { CREDS, merchantHeaders, startTestApp, TestApp, userToken } from '../support/test-app';
import { currencyMessage } from '../../src/platform/core/money';
import { HEADERS } from '../../src/platform/http/security-schemes';

const ERROR_KEYS = ['statusCode', 'error', 'message', 'requestId'];

function expectErrorShape(body: Record<string, unknown>, status: number, requestId?: string) {
  expect(body.statusCode).toBe(status);
  for (const k of ERROR_KEYS) expect(body).toHaveProperty(k);
  expect(Object.keys(body).every((k) => [...ERROR_KEYS, 'details'].includes(k))).toBe(true);
  expect(JSON.stringify(body)).not.toMatch(/\n\s+at |node_modules|\.ts:\d+/);
  if (requestId) expect(body.requestId).toBe(requestId);
}

describe('HTTP conventions', () => {
  let redis: RedisServerHandle;
  let t: TestApp;
  let raw: Redis;
  const token = userToken('acc_http');
  const auth = { authorization: `Bearer ${token}` };

  beforeAll(async () => {
    redis = await startRedisServer();
    t = await startTestApp(redis.url, { BODY_LIMIT_BYTES: '2048' });
    raw = new Redis(redis.url);
  });
  afterAll(async () => {
    raw.disconnect();
    await t.close();
    await redis.destroy();
  });

  const storedKeys = () => raw.keys(`${t.config.redis.keyPrefix}:diagnostics:*`);

  describe('request id', () => {
    it('echoes a well-formed X-Request-Id and puts it in error bodies', async () => {
      const res = await request(t.server).get('/diagnostics/whoami').set('x-request-id', 'req-abc.123');
      expect(res.status).toBe(401);
      expect(res.headers['x-request-id']).toBe('req-abc.123');
      expectErrorShape(res.body, 401, 'req-abc.123');
    });

    it('replaces a malformed request id with a fresh UUID-shaped one', async () => {
      const res = await request(t.server).get('/health/live').set('x-request-id', 'bad id with spaces');
      expect(res.headers['x-request-id']).toMatch(/^[0-9a-f-]{36}$/);
    });

    it('generates one when none is sent, different per request', async () => {
      const a = await request(t.server).get('/health/live');
      const b = await request(t.server).get('/health/live');
      expect(a.headers['x-request-id']).toMatch(/^[0-9a-f-]{36}$/);
      expect(a.headers['x-request-id']).not.toBe(b.headers['x-request-id']);
    });
  });

  describe('validation and error bodies', () => {
    it('accepts a valid request and runs the script for the token account', async () => {
      const res = await request(t.server).post('/diagnostics/touch').set(auth).send({ label: 'home' });
      expect(res.status).toBe(200);
      expect(res.body).toMatchObject({ accountId: 'acc_http', label: 'home', count: 1 });
      expect(await raw.hget(`${t.config.redis.keyPrefix}:diagnostics:{a:acc_http}:visits:home`, 'n')).toBe('1');
    });

    it.each([
      ['an unknown field', { label: 'a', accountId: 'someone-else' }, 'accountId'],
      ['a string that is too long', { label: 'x'.repeat(33) }, 'label'],
      ['a wrong type', { label: 42 }, 'label'],
      ['a number out of range', { label: 'a', ttlSeconds: 10_000_000 }, 'ttlSeconds'],
      ['a numeric string where a number is required', { label: 'a', ttlSeconds: '60' }, 'ttlSeconds'],
      ['a missing field', {}, 'label'],
    ])('rejects %s with 400 naming the field, storing nothing', async (_what, body, field) => {
      const before = await storedKeys();
      const res = await request(t.server).post('/diagnostics/touch').set(auth).send(body);
      expect(res.status).toBe(400);
      expectErrorShape(res.body, 400);
      expect(res.body.error).toBe('VALIDATION_FAILED');
      expect(res.body.details.map((d: { field: string }) => d.field)).toContain(field);
      expect(res.body.message).toContain(field);
      expect(await storedKeys()).toEqual(before);
    });

    it('answers hundreds of bad fields with a small 400: the message lists what fits in 500 characters and counts the rest, details name 50 (a 65 KB body of 5,000 unknown fields got a 495 KB answer)', async () => {
      const check = (res: request.Response, first: string) => {
        expect(res.status).toBe(400);
        expectErrorShape(res.body, 400);
        expect(res.text.length).toBeLessThan(10_000);
        expect(res.body.message.length).toBeLessThanOrEqual(500);
        expect(res.body.message).toMatch(new RegExp(`^${first}; .*; … and \\d+ more$`));
        expect(res.body.details).toHaveLength(50);
      };
      const before = await storedKeys();
      const body = Object.fromEntries([['label', 'home'], ...Array.from({ length: 200 }, (_, i) => [`k${i}`, 1])]);
      check(await request(t.server).post('/diagnostics/touch').set(auth).send(body), 'property k0 should not exist');
      expect(await storedKeys()).toEqual(before);
      const query = Array.from({ length: 1500 }, (_, i) => `q${i}=1`).join('&');
      check(await request(t.server).get(`/messages?${query}`).set(auth), 'property q0 should not exist');
      // One item of a batch with 400 unknown fields: its error is bounded the same way.
      const item = {
        accountId: 'acc_http',
        bizType: 'T',
        outerBizId: 'o-1',
        title: 't',
        content: 'c',
        ...Object.fromEntries(Array.from({ length: 400 }, (_, i) => [`k${i}`, 1])),
      };
      const batch = await request(t.server)
        .post('/messages/batch')
        .set('x-service-token', CREDS.serviceToken)
        .send({ messages: [item] });
      expect([batch.status, batch.body.results[0].status, batch.body.invalid]).toEqual([200, 400, 1]);
      expect(batch.body.results[0].error.length).toBeLessThanOrEqual(500);
      expect(batch.body.results[0].error).toMatch(/^property k0 should not exist; .*; … and \d+ more$/);
    });

    it('refuses a body that is not UTF-8 with 400, storing nothing (Latin-1 "Café" was stored as "Caf\uFFFD")', async () => {
      // Raw bytes, through Fastify's inject (SuperTest would serialise a Buffer as JSON).
      const post = async (url: string, headers: Record<string, string>, payload: Buffer) => {
        const r = await t.app
          .getHttpAdapter()
          .getInstance()
          .inject({ method: 'POST', url, headers: { ...headers, 'content-type': 'application/json' }, payload });
        return { status: r.statusCode, body: JSON.parse(r.body) as Record<string, string> };
      };
      const before = await storedKeys();
      const latin1 = Buffer.concat([Buffer.from('{"label":"caf'), Buffer.from([0xe9]), Buffer.from('"}')]);
      const res = await post('/diagnostics/touch', auth, latin1);
      expect(res.status).toBe(400);
      expectErrorShape(res.body, 400);
      expect(res.body.message).toContain('UTF-8');
      expect(await storedKeys()).toEqual(before);
      const inboxBefore = await raw.keys(`${t.config.redis.keyPrefix}:messages:*`);
      const message = Buffer.concat([
        Buffer.from('{"accountId":"acc_http","bizType":"T","outerBizId":"latin1-1","title":"Caf'),
        Buffer.from([0xe9, 0x20, 0xff, 0xfe]),
        Buffer.from('","content":"c"}'),
      ]);
      const write = await post('/messages', { 'x-service-token': CREDS.serviceToken }, message);
      expect([write.status, write.body.error]).toEqual([400, 'BAD_REQUEST']);
      expect(await raw.keys(`${t.config.redis.keyPrefix}:messages:*`)).toEqual(inboxBefore);
      // The same text in UTF-8 is taken.
      const utf8 = await post('/diagnostics/touch', auth, Buffer.from('{"label":"cafe"}'));
      expect(utf8.status).toBe(200);
    });

    it('rejects malformed JSON with 400 in the standard shape', async () => {
      const res = await request(t.server).post('/diagnostics/touch').set(auth).set('content-type', 'application/json').send('{"label":');
      expect(res.status).toBe(400);
      expectErrorShape(res.body, 400);
    });

    it.each([
      ['a missing comma', '{\n  "label": "home"\n  "ttlSeconds": 60\n}', 'unexpected "\\"" at line 3, column 3 (character 23)'],
      ['a trailing comma', '{"label": "home",}', 'unexpected "}" at line 1, column 18 (character 18)'],
      ['single quotes', "{'label': 'home'}", 'unexpected "\'" at line 1, column 2 (character 2)'],
      ['a body cut short', '{"label":', 'it ends too soon, at line 1, column 10 (character 10)'],
    ])('says where malformed JSON breaks (%s): the line, the column and what is there', async (_what, body, where) => {
      const res = await request(t.server).post('/diagnostics/touch').set(auth).set('content-type', 'application/json').send(body);
      expect([res.status, res.body.error, res.body.message]).toEqual([400, 'BAD_REQUEST', `Request body is not valid JSON: ${where}`]);
    });

    it.each([
      ['an order', '/merchant/orders', { merchantOrderNo: 'cur-1', amount: 100, subject: 'Tea' }],
      ['a top-up', '/admin/wallets/account:acc_cur/top-ups', { amount: 100, reference: 'cur-1' }],
    ])('tells a wrong currency of %s one thing, once, whatever is wrong with it', async (_what, path, fields) => {
      for (const currency of ['cny', 'XXQ', 'CN', 'CNYY']) {
        const body = JSON.stringify({ ...fields, currency });
        const headers = path.startsWith('/merchant') ? merchantHeaders('POST', path, body) : { [HEADERS.admin]: CREDS.adminKey };
        const res = await request(t.server).post(path).set(headers).set('content-type', 'application/json').send(body);
        expect([res.status, res.body.details]).toEqual([400, [{ field: 'currency', errors: [currencyMessage()] }]]);
      }
    });

    it.each([
      ['a "__proto__" key', '{"label":"p","__proto__":{"admin":true}}'],
      ['a "constructor" key holding "prototype"', '{"label":"p","nested":{"constructor":{"prototype":{"admin":true}}}}'],
    ])('refuses valid JSON with %s (prototype poisoning) with a 400 that says so; nothing stored', async (_what, body) => {
      const before = await storedKeys();
      const res = await request(t.server).post('/diagnostics/touch').set(auth).set('content-type', 'application/json').send(body);
      expect(res.status).toBe(400);
      expectErrorShape(res.body, 400);
      expect(res.body.message).toBe('Request body must not have a "__proto__" key, or a "constructor" key holding "prototype"');
      expect(await storedKeys()).toEqual(before);
    });

    it('rejects a body over the size limit with 413 in the standard shape', async () => {
      const res = await request(t.server)
        .post('/diagnostics/touch')
        .set(auth)
        .send({ label: 'a', pad: 'x'.repeat(4096) });
      expect(res.status).toBe(413);
      expectErrorShape(res.body, 413);
      expect(res.body.error).toBe('PAYLOAD_TOO_LARGE');
    });

    it('takes an empty application/json body as no body too (it was Fastify\'s 400 "Body cannot be empty"), and asks for the body where the route takes one', async () => {
      for (const type of ['application/json', 'application/json; charset=utf-8', 'text/plain']) {
        const empty = await request(t.server).post('/messages/read-all').set(auth).set('content-type', type).send('');
        expect({ type, status: empty.status, body: empty.body }).toEqual({ type, status: 200, body: { marked: 0, unread: 0 } });
      }
      // A Content-Type and neither a Content-Length nor a chunked body: no body either.
      const reply = await rawExchange(
        t,
        `POST /messages/read-all HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${token}\r\nContent-Type: application/json\r\nConnection: close\r\n\r\n`,
      );
      expect(reply.split('\r\n')[0]).toBe('HTTP/1.1 200 OK');
      const before = await storedKeys();
      const needsOne = await request(t.server).post('/diagnostics/touch').set(auth).set('content-type', 'application/json').send('');
      expectErrorShape(needsOne.body, 400);
      expect([needsOne.body.error, needsOne.body.details]).toEqual(['VALIDATION_FAILED', [{ field: 'body', errors: ['Request body must be a JSON object'] }]]);
      expect(await storedKeys()).toEqual(before);
    });

    it('takes an empty body of any media type as no body, and refuses a non-JSON body with 415', async () => {
      const before = await storedKeys();
      const empty = await request(t.server).post('/messages/read-all').set(auth).set('content-type', 'application/x-www-form-urlencoded').send('');
      expect(empty.status).toBe(200);
      const form = await request(t.server).post('/diagnostics/touch').set(auth).set('content-type', 'application/x-www-form-urlencoded').send('label=home');
      expectErrorShape(form.body, 415);
      expect(form.body.error).toBe('UNSUPPORTED_MEDIA_TYPE');
      expect(await storedKeys()).toEqual(before);
    });

    it.each(['gzip', 'deflate, gzip', 'br'])(
      'refuses a body with Content-Encoding %s with 415, storing nothing (bodies are not decompressed)',
      async (encoding) => {
        const before = await storedKeys();
        const res = await request(t.server)
          .post('/diagnostics/touch')
          .set(auth)
          .set('content-type', 'application/json')
          .set('content-encoding', encoding)
          .send(JSON.stringify({ label: 'encoded' }));
        expect(res.status).toBe(415);
        expectErrorShape(res.body, 415);
        expect(await storedKeys()).toEqual(before);
        const identity = await request(t.server).post('/diagnostics/touch').set(auth).set('content-encoding', 'identity').send({ label: 'plain' });
        expect(identity.status).toBe(200);
      },
    );

    it('names an unknown field without echoing a long name', async () => {
      const long = 'k'.repeat(300);
      const res = await request(t.server)
        .post('/diagnostics/touch')
        .set(auth)
        .send({ label: 'home', [long]: 1 });
      expectErrorShape(res.body, 400);
      expect(res.body.message).toBe(`property ${'k'.repeat(64)}… should not exist`);
      expect(JSON.stringify(res.body)).not.toContain(long);
    });

    it('answers an unknown route with 404 in the standard shape', async () => {
      const res = await request(t.server).get('/no/such/route').set('x-request-id', 'r404');
      expect(res.status).toBe(404);
      expectErrorShape(res.body, 404, 'r404');
    });
  });

  describe('requests the HTTP parser refuses', () => {
    const parse = (response: string) => {
      const [head, body] = response.split('\r\n\r\n');
      return { statusLine: head.split('\r\n')[0], head: head.toLowerCase(), body: JSON.parse(body) as Record<string, unknown> };
    };

    it.each([
      ['headers over the limit', `GET /health/live HTTP/1.1\r\nHost: x\r\nX-Big: ${'a'.repeat(20_000)}\r\n\r\n`, 431, 'HEADERS_TOO_LARGE'],
      ['a malformed request line', 'GET /health/live HTTP/9.x\r\nHost: x\r\n\r\n', 400, 'BAD_REQUEST'],
      ['a malformed header', 'GET /health/live HTTP/1.1\r\nHost: x\r\nBad Header: 1\r\n\r\n', 400, 'BAD_REQUEST'],
    ])('answers %s in the standard error shape, with a request id and Connection: close', async (_what, bytes, status, code) => {
      const { statusLine, head, body } = parse(await rawExchange(t, bytes));
      expect(statusLine).toBe(`HTTP/1.1 ${status} ${statusLine.split(' ').slice(2).join(' ')}`);
      expectErrorShape(body, status);
      expect(body.error).toBe(code);
      expect(head).toContain('connection: close');
      expect(head).toContain(`x-request-id: ${String(body.requestId).toLowerCase()}`);
    });
  });

  describe('a client that sends its request slowly', () => {
    let slow: TestApp;
    beforeAll(async () => {
      slow = await startTestApp(redis.url, { REQUEST_TIMEOUT_MS: '1500' });
    });
    afterAll(() => slow.close());

    it('gets 408 in the standard shape and loses the connection once REQUEST_TIMEOUT_MS has passed; nothing is stored', async () => {
      const before = await storedKeys();
      const { port } = slow.server.address() as AddressInfo;
      const body = JSON.stringify({ label: 'trickled' }).padEnd(100, ' ');
      const response = await new Promise<string>((resolve, reject) => {
        const socket = connect(port, '127.0.0.1');
        let got = '';
        let sent = 0;
        socket.setEncoding('utf8');
        socket.on('data', (c: string) => (got += c));
        socket.on('error', (e: NodeJS.ErrnoException) => (e.code === 'ECONNRESET' || e.code === 'EPIPE' ? undefined : reject(e)));
        // One byte every 250 ms: the whole body would take 25 s, far past the timeout.
        const drip = setInterval(() => {
          if (sent < body.length && socket.writable) socket.write(body[sent++]);
        }, 250);
        socket.on('close', () => {
          clearInterval(drip);
          resolve(got);
        });
        socket.write(
          `POST /diagnostics/touch HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${token}\r\nContent-Type: application/json\r\nContent-Length: ${body.length}\r\n\r\n`,
        );
      });
      const [head, text] = response.split('\r\n\r\n');
      expect(head.split('\r\n')[0]).toBe('HTTP/1.1 408 Request Timeout');
      expect(head.toLowerCase()).toContain('connection: close');
      const parsed = JSON.parse(text) as Record<string, unknown>;
      expectErrorShape(parsed, 408);
      expect(parsed.error).toBe('REQUEST_TIMEOUT');
      expect(await storedKeys()).toEqual(before);
    }, 20_000);

    it('still serves a request whose body arrives within the timeout', async () => {
      const res = await request(slow.server).post('/diagnostics/touch').set(auth).send({ label: 'prompt' });
      expect(res.status).toBe(200);
    });
  });

  describe('Swagger', () => {
    it('serves Swagger UI at /docs and an OpenAPI document with the four security schemes', async () => {
      const ui = await request(t.server).get('/docs/');
      expect(ui.status).toBe(200);
      expect(ui.text).toContain('swagger');
      const doc = await request(t.server).get('/docs/openapi.json');
      expect(doc.status).toBe(200);
      const schemes = doc.body.components.securitySchemes;
      expect(Object.keys(schemes).sort()).toEqual(['AdminKey', 'AppUserJwt', 'MerchantId', 'MerchantSecret', 'ServiceToken']);
      expect(doc.body.paths['/diagnostics/touch'].post.security).toEqual([{ AppUserJwt: [] }]);
    });
  });

  describe('when Redis is unreachable', () => {
    it('answers 503 within the command timeout when Redis hangs (no reply at all)', async () => {
      await raw.call('CLIENT', 'PAUSE', '3000', 'ALL');
      try {
        const started = Date.now();
        const res = await request(t.server).post('/diagnostics/touch').set(auth).send({ label: 'hang' });
        const elapsed = Date.now() - started;
        expect(res.status).toBe(503);
        expect(res.headers['retry-after']).toBe('1');
        expect(res.body.error).toBe('REDIS_UNAVAILABLE');
        expect(elapsed).toBeLessThan(2 * t.config.redis.commandTimeoutMs + 500);
      } finally {
        await raw.call('CLIENT', 'UNPAUSE');
      }
    });

    it('answers 503 with Retry-After within the command timeout, then recovers', async () => {
      await redis.stop();
      try {
        const started = Date.now();
        const res = await request(t.server).post('/diagnostics/touch').set(auth).send({ label: 'down' });
        const elapsed = Date.now() - started;
        expect(res.status).toBe(503);
        expect(res.headers['retry-after']).toBe('1');
        expectErrorShape(res.body, 503);
        expect(res.body.error).toBe('REDIS_UNAVAILABLE');
        // command timeout is 500 ms; rate limit + script = at most two timed-out commands
        expect(elapsed).toBeLessThan(2 * t.config.redis.commandTimeoutMs + 500);
      } finally {
        await redis.start();
      }
      let status = 0;
      for (let i = 0; i < 50 && status !== 200; i++) {
        status = (await request(t.server).post('/diagnostics/touch').set(auth).send({ label: 'back' })).status;
        if (status !== 200) await new Promise((r) => setTimeout(r, 100));
      }
      expect(status).toBe(200);
      // The request answered 503 was never queued: it must not run once Redis is back.
      expect(await raw.exists(`${t.config.redis.keyPrefix}:diagnostics:{a:acc_http}:visits:down`)).toBe(0);
    });
  });
});
