import { execFile } from 'node:child_process';
import { resolve } from 'node:path';
import { JwtVerifier } from '../../src/platform/auth/jwt-verifier.service';
import { DEV_DEFAULTS, loadConfig } from '../../src/platform/config/load-config';

/**
 * The development CLIs as a shell runs them (`npm run -s token`, `npm run -s sign`): exit 2 with a one-line
 * message for bad arguments or settings (never a stack trace), and never a credential the service would refuse.
 */
const ROOT = resolve(__dirname, '../..');

function run(script: string, args: string[], env: Record<string, string> = {}): Promise<{ code: number; stdout: string; stderr: string }> {
  const base = { ...process.env };
  for (const k of ['MERCHANT_ID', 'MERCHANT_SECRET', 'MERCHANT_SECRETS', 'JWT_SECRET', 'JWT_ALGORITHM', 'JWT_ISSUER', 'JWT_AUDIENCE', 'NODE_ENV'])
    delete base[k];
  return new Promise((done) => {
    execFile('npx', ['tsx', `scripts/${script}`, ...args], { cwd: ROOT, timeout: 60_000, env: { ...base, ...env } }, (err, stdout, stderr) =>
      done({ code: err ? ((err as { code?: number }).code ?? -1) : 0, stdout, stderr }),
    );
  });
}

const noStack = (text: string) => expect(text).not.toMatch(/^\s+at /m);

describe('npm run -s token', () => {
  const verifier = new JwtVerifier(loadConfig({ NODE_ENV: 'test', JWT_SECRET: DEV_DEFAULTS.JWT_SECRET }));

  it.each(['.', '..'])(
    'refuses the account id %j, which the service refuses as a sub (exit 2, no token)',
    async (id) => {
      const r = await run('mint-token.ts', [id]);
      expect({ code: r.code, stdout: r.stdout }).toEqual({ code: 2, stdout: '' });
      expect(r.stderr).toMatch(/^usage: npm run token/m);
      noStack(r.stderr);
    },
    60_000,
  );

  it.each(['acc_1001', '.a', 'a:b.c-d'])(
    'mints a token for %j that the service accepts',
    async (id) => {
      const r = await run('mint-token.ts', [id]);
      expect(r.code).toBe(0);
      expect(verifier.verify(r.stdout.trim())).toBe(id);
    },
    60_000,
  );
});

describe('npm run -s token with JWT_ISSUER and JWT_AUDIENCE set', () => {
  it('mints a token with the iss and aud the service then requires', async () => {
    const env = { JWT_ISSUER: 'https://id.example', JWT_AUDIENCE: 'redis-pay' };
    const strict = new JwtVerifier(loadConfig({ NODE_ENV: 'test', JWT_SECRET: DEV_DEFAULTS.JWT_SECRET, ...env }));
    const r = await run('mint-token.ts', ['acc_1001'], env);
    expect(r.code).toBe(0);
    expect(strict.verify(r.stdout.trim())).toBe('acc_1001');
  }, 60_000);
});

describe('npm run -s sign', () => {
  it.each([
    ['no name', 'dev-merchant-secret-0123456789', /^MERCHANT_SECRETS has an entry without a valid name/m],
    ['a short secret', 'm_demo:short', /^MERCHANT_SECRETS entry "m_demo" has a secret shorter than 16 characters/m],
  ])(
    'a MERCHANT_SECRETS with %s: exit 2 and the variable named, no stack trace',
    async (_case, value, message) => {
      const r = await run('sign-request.ts', ['GET', '/diagnostics/whoami'], { MERCHANT_SECRETS: value });
      expect({ code: r.code, stdout: r.stdout }).toEqual({ code: 2, stdout: '' });
      expect(r.stderr).toMatch(message);
      noStack(r.stderr);
    },
    60_000,
  );
});
