import { ChildProcess, spawn } from 'node:child_process';
import { existsSync, readFileSync, renameSync, rmSync } from 'node:fs';
import { resolve } from 'node:path';
import { freePort } from '../harness/free-port';
import { RedisServerHandle, startRedisServer } from '../harness/redis-server';

/**
 * The README's curl examples, run as written by a real bash against the built
 * service (`node dist/main.js`) with the development credentials, exactly as a
 * new user would: the signing helper piped into `curl -H @-`, its
 * process-substitution form, a signed POST whose body has an apostrophe,
 * quotes, spaces and non-ASCII characters, and scripts/order-flow-example.sh
 * (wallet top-up → merchant order → payment plan → pay, partly from the wallet).
 */

const ROOT = resolve(__dirname, '../..');
const MAIN = resolve(ROOT, 'dist/main.js');

/** Runs `script` with bash in the project folder, with none of the credential variables set (the development defaults apply). */
function bash(script: string, env: Record<string, string> = {}): Promise<{ code: number | null; stdout: string; stderr: string }> {
  const base = { ...process.env };
  for (const k of ['MERCHANT_ID', 'MERCHANT_SECRET', 'MERCHANT_SECRETS', 'JWT_SECRET', 'JWT_ALGORITHM', 'NODE_ENV', 'BASE_URL', 'ACCOUNT']) delete base[k];
  const child = spawn('bash', ['-c', script], { cwd: ROOT, env: { ...base, ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (d) => (stdout += d));
  child.stderr.on('data', (d) => (stderr += d));
  return new Promise((r) => child.once('close', (code) => r({ code, stdout, stderr })));
}

/** The body and the status of a curl run that ended with `-w '\n%{http_code}'`. */
function response(stdout: string): { status: number; body: unknown } {
  const lines = stdout.trimEnd().split('\n');
  const status = Number(lines.pop());
  return { status, body: JSON.parse(lines.join('\n')) };
}

/** The JSON objects curl printed back to back (no newline after each). */
function jsonValues(text: string): Record<string, unknown>[] {
  const out: Record<string, unknown>[] = [];
  let depth = 0;
  let inString = false;
  let start = 0;
  for (let i = 0; i < text.length; i++) {
    const c = text[i];
    if (inString) {
      if (c === '\\') i++;
      else if (c === '"') inString = false;
    } else if (c === '"') inString = true;
    else if (c === '{' && depth++ === 0) start = i;
    else if (c === '}' && --depth === 0) out.push(JSON.parse(text.slice(start, i + 1)) as Record<string, unknown>);
  }
  return out;
}

describe('curl examples of the README against the built service', () => {
  let redis: RedisServerHandle;
  let service: ChildProcess;
  let port: number;
  let output = '';
  /** The README says localhost:3000; the test's service listens elsewhere. */
  const at = (s: string) => s.replaceAll('localhost:3000', `127.0.0.1:${port}`);

  beforeAll(async () => {
    if (!existsSync(MAIN)) throw new Error('dist/main.js is missing: run `npm run build` first (npm test does)');
    redis = await startRedisServer();
    port = await freePort();
    service = spawn(process.execPath, [MAIN], {
      env: { PATH: process.env.PATH ?? '', NODE_ENV: 'development', PORT: String(port), HOST: '127.0.0.1', REDIS_URL: redis.url, LOG_LEVEL: 'warn' },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    service.stdout!.on('data', (d) => (output += d));
    service.stderr!.on('data', (d) => (output += d));
    const deadline = Date.now() + 30_000;
    for (;;) {
      const ready = await fetch(`http://127.0.0.1:${port}/health/ready`).then(
        (r) => r.status === 200,
        () => false,
      );
      if (ready) break;
      if (Date.now() > deadline || service.exitCode !== null) throw new Error(`the service did not get ready:\n${output}`);
      await new Promise((r) => setTimeout(r, 100));
    }
  });

  afterAll(async () => {
    service?.kill('SIGTERM');
    await redis?.destroy();
  });

  it('a signed GET: the helper piped into curl -H @-', async () => {
    const r = await bash(at(`npm run -s sign -- GET /diagnostics/whoami | curl -s localhost:3000/diagnostics/whoami -H @-`) + ` -w '\\n%{http_code}'`);
    expect({ code: r.code, stderr: r.stderr }).toEqual({ code: 0, stderr: '' });
    expect(response(r.stdout)).toEqual({ status: 200, body: { kind: 'merchant', id: 'm_demo' } });
  });

  it('a signed GET: the same headers through process substitution, -H @<(…)', async () => {
    const r = await bash(at(`curl -s localhost:3000/diagnostics/whoami -H @<(npm run -s sign -- GET /diagnostics/whoami)`) + ` -w '\\n%{http_code}'`);
    expect(response(r.stdout)).toEqual({ status: 200, body: { kind: 'merchant', id: 'm_demo' } });
  });

  it('a signed POST whose body has an apostrophe, quotes, spaces and non-ASCII characters: 201, the body stored as sent', async () => {
    const orderNo = `doc-${Date.now()}`;
    const script = [
      `BODY='{"merchantOrderNo":"${orderNo}","amount":12800,"currency":"CNY","subject":"Jo'\\''s \\"best\\" café ☕ 1 kg"}'`,
      at(`npm run -s sign -- POST /merchant/orders "$BODY" | curl -s localhost:3000/merchant/orders -H @- --data-raw "$BODY"`) + ` -w '\\n%{http_code}'`,
    ].join('\n');
    const r = await bash(script);
    expect(r.stderr).toBe('');
    expect(response(r.stdout)).toEqual({
      status: 201,
      body: expect.objectContaining({ merchantOrderNo: orderNo, subject: 'Jo\'s "best" café ☕ 1 kg', amount: 12800, status: 'CREATED' }),
    });
  });

  it("the README's order flow, run as written: the order it makes is planned and paid", async () => {
    const readme = readFileSync(resolve(ROOT, 'README.md'), 'utf8');
    const block = /The order flow:[\s\S]*?```bash\n([\s\S]*?)```/.exec(readme)?.[1];
    if (!block) throw new Error('README.md: no bash block after "The order flow:"');
    const r = await bash(at(block));
    expect(r.stderr).toBe('');
    const answers = jsonValues(r.stdout);
    const made = (answers[0] as { orderId: string }).orderId;
    expect(answers[0]).toMatchObject({ orderId: expect.stringMatching(/^ord_[0-9a-f]{24}$/), status: 'CREATED' });
    // The id shown is an example of the shape: ids are random, never the one a caller could work out.
    expect(/"orderId":"(ord_[0-9a-f]+)"/.exec(block)?.[1]).not.toBe(made);
    expect(answers[answers.length - 1]).toMatchObject({ planId: `${made}_p1`, status: 'PAID' });
  }, 120_000);

  it('the red-envelope design doc\'s "Try it", run as written: a funded rain created by the CLI, then a grab', async () => {
    const doc = readFileSync(resolve(ROOT, 'docs/modules/red-envelope.md'), 'utf8');
    const block = /## Try it[\s\S]*?```bash\n([\s\S]*?)```/.exec(doc)?.[1];
    if (!block) throw new Error('docs/modules/red-envelope.md: no bash block under "Try it"');
    // The block writes rain.json in the project folder: keep a file of that name that was there before.
    const file = resolve(ROOT, 'rain.json');
    const kept = existsSync(file) ? `${file}.${process.pid}` : undefined;
    if (kept) renameSync(file, kept);
    try {
      const r = await bash(at(block), { REDPAY_URL: `http://127.0.0.1:${port}` });
      const answers = jsonValues(r.stdout);
      expect(answers[0]).toMatchObject({ applied: true, currency: 'CNY' });
      expect(answers[1]).toMatchObject({ activityId: 'nye-quiz', state: 'OPEN', progress: { loaded: 1000, total: 1000 } });
      expect(answers[2]).toMatchObject({ status: 'GRABBED', envelopeId: expect.stringMatching(/^nye-quiz\.\d+$/) });
    } finally {
      rmSync(file, { force: true });
      if (kept) renameSync(kept, file);
    }
  }, 120_000);

  it('scripts/order-flow-example.sh: a wallet top-up, a signed merchant order, a payment plan by the app user, paid', async () => {
    const r = await bash('scripts/order-flow-example.sh', { BASE_URL: `http://127.0.0.1:${port}` });
    expect({ code: r.code, stderr: r.stderr }).toEqual({ code: 0, stderr: '' });
    const lines = Object.fromEntries(
      r.stdout
        .trim()
        .split('\n')
        .map((l) => [l.slice(0, l.indexOf(':')), JSON.parse(l.slice(l.indexOf(':') + 1))]),
    );
    expect(Object.keys(lines)).toEqual(['wallet', 'order', 'plan', 'paid']);
    expect(lines.wallet).toMatchObject({ applied: true, currency: 'CNY', balance: expect.any(Number) });
    expect(lines.order).toMatchObject({ orderId: expect.stringMatching(/^ord_/), amount: 12800, currency: 'CNY', status: 'CREATED' });
    expect(lines.plan).toMatchObject({ orderId: lines.order.orderId, status: 'PENDING', amount: 12800 });
    expect(lines.paid).toMatchObject({
      planId: lines.plan.planId,
      status: 'PAID',
      instructions: [
        { method: 'balance', amount: 2800, status: 'SUCCEEDED' },
        { method: 'quickpay', amount: 10000, status: 'SUCCEEDED' },
      ],
    });
  }, 120_000);
});
