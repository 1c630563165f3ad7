import Redis from 'ioredis';
import { request as httpRequest } from 'node:http';
import type { AddressInfo } from 'node:net';
import { ROUTE_BODY_LIMITS } from '../../src/platform/http/body-limits';
import { RedisServerHandle, startRedisServer } from '../harness/redis-server';
import {
  CASE_CLASSES,
  CaseClass,
  casesFor,
  credentialHeaders,
  echoes,
  fieldSpellings,
  inOneSecond,
  jsonBodySchema,
  MalformedCase,
  OpenApiDocument,
  Operation,
  operationsOf,
  SchemaReader,
} from '../support/openapi-cases';
import { startTestApp, TestApp } from '../support/test-app';

/**
 * The rule, for every operation in the OpenAPI document: no malformed request
 * gets a 5xx or changes state, and every error is the one error body
 * `{statusCode, error, message, requestId, details?}` that does not echo long
 * input. The cases are generated from the document the running app serves
 * (see test/support/openapi-cases.ts), each sent with valid credentials for
 * the operation so it reaches validation. One test per class of malformed
 * input; each lists every failing case (operation, case, what was wrong).
 *
 * Redis is compared key by key (DUMP, and whether it has a TTL) before and
 * after every request, except the kinds of key listed in IGNORED.
 */

const ERROR_KEYS = ['statusCode', 'error', 'message', 'requestId'];

/**
 * Array fields whose elements the API documents as checked one by one ("one bad item does not fail the
 * others"): a case that breaks something inside element i of one of these must get a 2xx whose
 * `results[i]` has status 400 (its error naming the field when the case breaks a field of the element),
 * and store nothing, rather than a 400 for the whole request. Every other case of these operations, and
 * every other operation, keeps the plain rule. Remove an entry to hold the operation to the plain rule.
 */
const PER_ITEM_OUTCOMES: Record<string, string> = {
  'POST /messages/batch': 'messages',
};
const MAX_MESSAGE = 500;
/** Rate limits high enough never to answer a case with 429 (which would hide what the case checks), but still on. */
const HIGH = '10000000';

interface Reply {
  status: number;
  headers: Record<string, string | string[] | number | undefined>;
  body: string;
}

describe('Malformed input, generated from the OpenAPI document', () => {
  let redis: RedisServerHandle;
  let t: TestApp;
  let raw: Redis;
  let doc: OpenApiDocument;
  let ops: Operation[];
  let baseUrl: string;
  const cases = new Map<CaseClass, MalformedCase[]>();

  /**
   * Keys that legitimately change on requests that are refused, or in the
   * background; everything else under the app's prefix must stay as it was.
   */
  let IGNORED: Array<{ re: RegExp; why: string }> = [];

  beforeAll(async () => {
    redis = await startRedisServer();
    t = await startTestApp(redis.url, {
      RATE_LIMIT_USER: HIGH,
      RATE_LIMIT_MERCHANT: HIGH,
      RATE_LIMIT_SERVICE: HIGH,
      RATE_LIMIT_ADMIN: HIGH,
      RATE_LIMIT_ANONYMOUS: HIGH,
    });
    raw = new Redis(redis.url);
    baseUrl = `http://127.0.0.1:${(t.app.getHttpServer().address() as AddressInfo).port}`;
    const p = escapeRe(t.config.redis.keyPrefix);
    IGNORED = [
      // <prefix>:rate-limit:{<caller>}:window (src/platform/rate-limit/rate-limit.keys.ts): the rate-limit guard spends from
      // the caller's window on every request, before the body or parameters are looked at.
      { re: new RegExp(`^${p}:rate-limit:\\{[^}]*\\}:window$`), why: 'rate-limit counters' },
      // <prefix>:auth:{m:<merchant>}:nonce:<nonce> (src/platform/auth/auth.keys.ts): a correctly signed
      // request claims its nonce in the guard (replay protection), before validation.
      { re: new RegExp(`^${p}:auth:\\{m:[^}]*\\}:nonce:`), why: 'merchant replay-protection nonces' },
      // <prefix>:delay-queue:{<queue>}:lease|seq (src/engines/delay-queue/delay-queue.keys.ts): the app's own queue processors (order
      // expiry, payment follow-ups, reminders) write these when they claim and heartbeat items, whatever requests do.
      // Every other part of a queue (pending, ready, in-flight, dead, payloads, attempts, errors) is compared.
      { re: new RegExp(`^${p}:delay-queue:\\{[^}]*\\}:(lease|seq)$`), why: 'delay-queue worker bookkeeping (leases, fencing sequence)' },
      // <prefix>:seckill:{i}:sweep (src/features/seckill/seckill.keys.ts): the flash-sale safety net's sweep takes this lease on
      // its own timer (SET NX PX) and lets it expire, whatever requests do.
      { re: new RegExp(`^${p}:seckill:\\{i\\}:sweep$`), why: 'the seckill safety-net sweep lease' },
    ];

    doc = await fetchDocument();
    ops = operationsOf(doc);
    const reader = new SchemaReader(doc);
    const bodyLimit = (op: Operation) => {
      const route = op.path.replace(/\{([^}]+)\}/g, ':$1');
      return Math.max(ROUTE_BODY_LIMITS.get(`${op.method} ${route}`) ?? 0, t.config.bodyLimitBytes);
    };
    for (const cls of CASE_CLASSES) cases.set(cls, []);
    for (const op of ops) for (const c of casesFor(doc, op, { bodyLimit })) cases.get(c.cls)!.push(c);
    await seed(reader);
  });

  afterAll(async () => {
    raw?.disconnect();
    await t?.close();
    await redis?.destroy();
  });

  /** The document the running app serves (the first of its two addresses that answers; both, when both do, the same). */
  async function fetchDocument(): Promise<OpenApiDocument> {
    const found = await inOneSecond(async () => {
      const docs: OpenApiDocument[] = [];
      for (const url of ['/docs/openapi.json', '/docs-json']) {
        const res = await inject('GET', url, {});
        if (res.status === 200) docs.push(JSON.parse(res.body) as OpenApiDocument);
      }
      return docs;
    });
    if (found.length === 0) throw new Error('neither /docs/openapi.json nor /docs-json serves the OpenAPI document');
    if (found.length === 2) expect(found[1]).toEqual(found[0]);
    return found[0];
  }

  /**
   * State for malformed requests to leave alone: an order under the merchant order number the document uses
   * as its example (so the order paths' valid-looking values name a real order), and messages in two inboxes.
   */
  async function seed(reader: SchemaReader): Promise<void> {
    const sends: Array<[string, string, unknown]> = [
      ['POST', '/merchant/orders', undefined],
      ['POST', '/messages', undefined],
      ['POST', '/messages', { accountId: 'acct-x', outerBizId: 'seed-acct-x' }],
    ];
    for (const [method, path, overrides] of sends) {
      const op = ops.find((o) => o.method === method && o.path === path);
      if (!op) continue; // an endpoint that is gone seeds nothing
      const body = JSON.stringify({ ...(reader.sample(jsonBodySchema(op)) as object), ...(overrides as object) });
      const res = await send(op, path, body, 'application/json');
      expect({ seed: `${method} ${path}`, status: res.status, body: res.status < 300 ? '' : res.body }).toEqual({
        seed: `${method} ${path}`,
        status: 201,
        body: '',
      });
    }
  }

  function inject(method: string, url: string, headers: Record<string, string>, payload?: string): Promise<Reply> {
    return t.app
      .getHttpAdapter()
      .getInstance()
      .inject({ method: method as 'GET', url, headers, payload })
      .then((r) => ({ status: r.statusCode, headers: r.headers, body: r.body }));
  }

  /** Over a socket, for URLs that inject would normalise (inject parses with WHATWG URL, which resolves `..`). */
  function overSocket(method: string, url: string, headers: Record<string, string>, payload?: string): Promise<Reply> {
    return new Promise((resolve, reject) => {
      const req = httpRequest(
        `${baseUrl}/`,
        {
          method,
          path: url,
          headers: { ...headers, connection: 'close', ...(payload !== undefined ? { 'content-length': String(Buffer.byteLength(payload)) } : {}) },
        },
        (res) => {
          const chunks: Buffer[] = [];
          res.on('data', (c: Buffer) => chunks.push(c));
          res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body: Buffer.concat(chunks).toString('utf8') }));
          res.on('error', reject);
        },
      );
      req.on('error', reject);
      req.end(payload);
    });
  }

  /** Sends one request with valid credentials for the operation (a merchant signature over exactly this URL and body). */
  function send(op: Operation, url: string, body: string | undefined, contentType: string | null | undefined): Promise<Reply> {
    const headers = credentialHeaders(doc, op, url, body);
    if (body !== undefined && contentType !== null) headers['content-type'] = contentType ?? 'application/json';
    const parsed = new URL(url, 'http://x');
    const preserved = parsed.pathname + parsed.search === url;
    return preserved ? inject(op.method, url, headers, body) : overSocket(op.method, url, headers, body);
  }

  /** Every key under the app's prefix but the ignored kinds: its type, whether it expires, and its DUMP. */
  async function snapshot(): Promise<Map<string, string>> {
    const keys: string[] = [];
    let cursor = '0';
    do {
      const [next, batch] = await raw.scan(cursor, 'MATCH', `${t.config.redis.keyPrefix}:*`, 'COUNT', 1000);
      cursor = next;
      keys.push(...batch.filter((k) => !IGNORED.some((i) => i.re.test(k))));
    } while (cursor !== '0');
    const pipe = raw.pipeline();
    for (const k of keys) pipe.type(k).pttl(k).dumpBuffer(k);
    const out = (await pipe.exec()) ?? [];
    const snap = new Map<string, string>();
    keys.forEach((k, i) => {
      const [type, ttl, dump] = [out[3 * i][1], out[3 * i + 1][1], out[3 * i + 2][1]] as [string, number, Buffer | null];
      if (dump) snap.set(k, `${type} ${ttl >= 0 ? 'expiring' : 'persistent'} ${dump.toString('hex')}`);
    });
    return snap;
  }

  function diff(before: Map<string, string>, after: Map<string, string>): string[] {
    const strip = (k: string) => k.slice(t.config.redis.keyPrefix.length + 1);
    const out: string[] = [];
    for (const [k, v] of after)
      if (!before.has(k)) out.push(`added ${strip(k)}`);
      else if (before.get(k) !== v) out.push(`changed ${strip(k)}`);
    for (const k of before.keys()) if (!after.has(k)) out.push(`removed ${strip(k)}`);
    return out;
  }

  /** The element index when the case breaks something inside an element of a PER_ITEM_OUTCOMES array. */
  function perItemIndex(c: MalformedCase): number | undefined {
    const f = c.field;
    return f && f.length >= 2 && PER_ITEM_OUTCOMES[c.op.id] === f[0] && typeof f[1] === 'number' ? f[1] : undefined;
  }

  /** The documented per-item outcome: a 2xx whose results[index] is a 400 (naming the field), echoing no long input. */
  function perItemProblems(c: MalformedCase, res: Reply, index: number): string[] {
    if (res.status >= 500) return [`got ${res.status}, a 5xx`];
    if (res.status < 200 || res.status >= 300) return [`got ${res.status}, not the documented 2xx with a per-item 400`];
    const out: string[] = [];
    let item: { status?: unknown; error?: unknown } | undefined;
    try {
      const results = (JSON.parse(res.body) as { results?: Array<{ index?: unknown; status?: unknown; error?: unknown }> }).results;
      item = Array.isArray(results) ? results.find((r) => r.index === index) : undefined;
    } catch {
      // reported below
    }
    if (!item) return [`no results[${index}] in the ${res.status} body`];
    if (item.status !== 400) out.push(`results[${index}].status is ${String(item.status)}, not 400`);
    const leaf = c.field!.length > 2 ? String(c.field![c.field!.length - 1]) : undefined;
    if (c.names && leaf && !(typeof item.error === 'string' && item.error.includes(leaf))) out.push(`results[${index}].error does not name ${leaf}`);
    if (typeof item.error === 'string' && item.error.length > MAX_MESSAGE)
      out.push(`results[${index}].error is ${item.error.length} characters (over ${MAX_MESSAGE})`);
    for (const input of c.bigInputs) if (echoes(res.body, input)) out.push(`echoes ${input.length} characters of input`);
    return out;
  }

  /** What is wrong with the reply to a malformed request; empty when it keeps the rule. */
  function problems(c: MalformedCase, res: Reply): string[] {
    const index = perItemIndex(c);
    if (index !== undefined) return perItemProblems(c, res, index);
    const out: string[] = [];
    if (res.status >= 500) out.push(`got ${res.status}, a 5xx`);
    else if (c.expect === '4xx' && (res.status < 400 || res.status >= 500)) out.push(`got ${res.status}, not a 4xx`);
    else if (c.statuses && res.status >= 400 && !c.statuses.includes(res.status)) out.push(`got ${res.status}, expected one of ${c.statuses.join('/')}`);
    if (res.status < 400) return out;

    let body: Record<string, unknown> | undefined;
    try {
      const parsed: unknown = JSON.parse(res.body);
      if (parsed !== null && typeof parsed === 'object' && !Array.isArray(parsed)) body = parsed as Record<string, unknown>;
    } catch {
      // reported below
    }
    if (!body) return [...out, 'error body is not a JSON object'];
    const missing = ERROR_KEYS.filter((k) => !(k in body));
    const extra = Object.keys(body).filter((k) => !ERROR_KEYS.includes(k) && k !== 'details');
    if (missing.length) out.push(`error body lacks ${missing.join(', ')}`);
    if (extra.length) out.push(`error body has extra ${extra.join(', ')}`);
    if (body.statusCode !== res.status) out.push(`statusCode ${String(body.statusCode)} is not the HTTP status ${res.status}`);
    if (typeof body.error !== 'string' || body.error === '') out.push('error is not a non-empty string code');
    // Every error status is one the operation documents; but a 404 from the router (no route has this path) is no
    // operation's, and an operation that takes no input documents no 400, which broken JSON sent to it still gets.
    const routerMiss = res.status === 404 && typeof body.message === 'string' && body.message.startsWith('Cannot ');
    const unwantedBody = res.status === 400 && !c.op.op.requestBody && (body.error === 'BAD_REQUEST' || body.error === 'BODY_TOO_DEEP');
    if (!routerMiss && !unwantedBody && !(String(res.status) in (c.op.op.responses ?? {})))
      out.push(`${res.status} is not a documented response of ${c.op.id}`);
    if (typeof body.message !== 'string') out.push('message is not a string');
    else if (body.message.length > MAX_MESSAGE) out.push(`message is ${body.message.length} characters (over ${MAX_MESSAGE})`);
    const header = res.headers[t.config.requestIdHeader];
    if (typeof body.requestId !== 'string' || body.requestId === '') out.push('requestId is not a non-empty string');
    else if (body.requestId !== header) out.push(`requestId ${body.requestId} is not the ${t.config.requestIdHeader} header (${String(header)})`);
    for (const input of c.bigInputs) if (echoes(res.body, input)) out.push(`echoes ${input.length} characters of input`);
    if (c.names && c.field && res.status === 400) {
      const text = `${typeof body.message === 'string' ? body.message : ''}\n${JSON.stringify(body.details ?? null)}`;
      const spellings = fieldSpellings(c.field);
      if (!spellings.some((s) => text.includes(s))) out.push(`does not name the field ${spellings[0]}`);
    }
    for (const d of Array.isArray(body.details) ? (body.details as { field?: unknown }[]) : [])
      if (typeof d?.field === 'string' && /\.\d+([.[]|$)/.test(d.field)) out.push(`names ${d.field} with a dotted index (not in brackets)`);
    return out;
  }

  const excerpt = (s: string) => (s.length > 160 ? `${s.slice(0, 160)}…` : s);

  it('the document has operations to generate cases from', () => {
    expect(ops.length).toBeGreaterThan(0);
    const total = [...cases.values()].reduce((n, c) => n + c.length, 0);
    expect(total).toBeGreaterThan(0);
    console.log(
      `malformed-input cases: ${ops.length} operations, ${total} cases\n` +
        CASE_CLASSES.map((cls) => {
          const list = cases.get(cls)!;
          const byOp = new Set(list.map((c) => c.op.id)).size;
          return `  ${cls.padEnd(30)} ${String(list.length).padStart(5)} cases over ${byOp} operations`;
        }).join('\n') +
        `\n  ignored key kinds: ${IGNORED.map((i) => i.why).join('; ')}`,
    );
  });

  it.each(CASE_CLASSES.map((c) => [c]))('%s: no 5xx, a 4xx in the error shape, no state change', async (cls) => {
    const list = cases.get(cls)!;
    // Every class applies to some operation of this API; none may silently generate nothing.
    expect({ cls, cases: list.length > 0 }).toEqual({ cls, cases: true });

    const failures: string[] = [];
    const statuses = new Map<number, number>();
    let before = await snapshot();
    for (const c of list) {
      const res = await send(c.op, c.url, c.body, c.contentType);
      statuses.set(res.status, (statuses.get(res.status) ?? 0) + 1);
      const wrong = problems(c, res);
      const after = await snapshot();
      const changed = diff(before, after);
      if (changed.length) wrong.push(`changed state: ${changed.join(', ')}`);
      before = after;
      if (wrong.length) failures.push(`${c.op.id} | ${c.name} | ${wrong.join('; ')} | ${res.status} ${excerpt(res.body)}`);
    }

    // The app still serves, Redis included.
    for (const path of ['/health/live', '/health/ready']) {
      const res = await inject('GET', path, {});
      if (res.status !== 200) failures.push(`afterwards GET ${path} answered ${res.status}`);
    }

    const byOp = new Map<string, number>();
    for (const c of list) byOp.set(c.op.id, (byOp.get(c.op.id) ?? 0) + 1);
    console.log(
      `${cls}: ${list.length} cases over ${byOp.size} operations, ${failures.length} failing; statuses ${[...statuses]
        .sort(([a], [b]) => a - b)
        .map(([s, n]) => `${s}×${n}`)
        .join(' ')}\n` + [...byOp].map(([op, n]) => `  ${op}: ${n}`).join('\n'),
    );
    expect(failures).toEqual([]);
  });
});

function escapeRe(s: string): string {
  return s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
}
