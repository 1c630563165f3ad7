import { signatureMatches } from '../auth/merchant-signature';
import { signMerchantRequest } from './swagger';

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
    expect(signatureMatches('another-secret-another-secret', { method: 'POST', path: '/diagnostics/whoami?x=1', timestamp, nonce, body }, signature)).toBe(false);
  });

  it('leaves requests without a merchant secret untouched', async () => {
    const req = { url: '/health/live', method: 'get', headers: { Authorization: 'Bearer x' } };
    expect(await signMerchantRequest({ ...req, headers: { ...req.headers } })).toEqual(req);
  });
});
