import { signatureMatches } from '../auth/merchant-signature';
import { DEV_DEFAULTS } from '../config/load-config';
import { securitySchemeDescriptions, signMerchantRequest } from './swagger';

describe('Swagger UI merchant signing (signMerchantRequest)', () => {
  const secret = 'browser-merchant-secret-0123456789';

  beforeAll(() => {
    (globalThis as { window?: unknown }).window = { location: { href: 'http://localhost:3000/docs' } };
  });
  afterAll(() => {
    delete (globalThis as { window?: unknown }).window;
  });

  it('signs exactly as the server verifies, and strips the secret', async () => {
    const body = JSON.stringify({ label: 'from-swagger' });
    const req = await signMerchantRequest({
      url: 'http://localhost:3000/diagnostics/whoami?x=1',
      method: 'post',
      body,
      headers: { 'X-Merchant-Id': 'm_demo', 'X-Merchant-Secret': secret },
    });
    expect(req.headers['X-Merchant-Secret']).toBeUndefined();
    const { 'X-Timestamp': timestamp, 'X-Nonce': nonce, 'X-Signature': signature } = req.headers;
    expect(Math.abs(Number(timestamp) - Date.now())).toBeLessThan(5000);
    expect(nonce).toMatch(/^[0-9a-f]{32}$/);
    expect(signatureMatches(secret, { method: 'POST', path: '/diagnostics/whoami?x=1', timestamp, nonce, body }, signature)).toBe(true);
    expect(signatureMatches('another-secret-another-secret', { method: 'POST', path: '/diagnostics/whoami?x=1', timestamp, nonce, body }, signature)).toBe(
      false,
    );
  });

  it('leaves requests without a merchant secret untouched', async () => {
    const req = { url: '/health/live', method: 'get', headers: { Authorization: 'Bearer x' } };
    expect(await signMerchantRequest({ ...req, headers: { ...req.headers } })).toEqual(req);
  });
});

describe('security scheme descriptions (the "Authorize" dialog)', () => {
  const devSecrets = Object.values(DEV_DEFAULTS).flatMap((raw) => raw.split(',').map((entry) => entry.slice(entry.indexOf(':') + 1)));

  it('outside production, name the development credentials the service accepts and where a JWT comes from', () => {
    const text = Object.values(securitySchemeDescriptions(false)).join('\n');
    for (const secret of devSecrets) expect(text).toContain(`\`${secret}\``);
    expect(text).toContain('npm run token -- <accountId>');
    expect(text).toContain('`m_demo`');
  });

  it('in production, say which variables hold the credentials and show no development secret', () => {
    const text = Object.values(securitySchemeDescriptions(true)).join('\n');
    for (const variable of ['JWT_SECRET', 'MERCHANT_SECRETS', 'SERVICE_TOKENS', 'ADMIN_API_KEYS']) expect(text).toContain(variable);
    for (const secret of devSecrets) expect(text).not.toContain(secret);
    expect(text).not.toContain('npm run token');
  });
});
