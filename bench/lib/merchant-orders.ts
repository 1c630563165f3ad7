import { randomBytes } from 'node:crypto';
import { signRequest } from '../../src/platform/auth/merchant-signature';

/** The bench merchant of fullEnv's MERCHANT_SECRETS. */
export const BENCH_MERCHANT = 'bench_merchant';
const SECRET = 'bench-merchant-secret-0123456789';
export const MERCHANT_ORDERS_PATH = '/merchant/orders';

/** One signed `POST /merchant/orders` of 12.00 CNY (a new merchantOrderNo unless given one; `payerAccountId` when given). */
export function signedOrder(
  merchantOrderNo = `b-${randomBytes(8).toString('hex')}`,
  payerAccountId?: string,
): { method: string; path: string; headers: Record<string, string>; body: string } {
  const body = JSON.stringify({ merchantOrderNo, amount: 1200, currency: 'CNY', subject: 'Bench', ...(payerAccountId ? { payerAccountId } : {}) });
  const timestamp = String(Date.now());
  const nonce = randomBytes(16).toString('hex');
  const signature = signRequest(SECRET, { method: 'POST', path: MERCHANT_ORDERS_PATH, timestamp, nonce, body });
  return {
    method: 'POST',
    path: MERCHANT_ORDERS_PATH,
    body,
    headers: { 'content-type': 'application/json', 'x-merchant-id': BENCH_MERCHANT, 'x-timestamp': timestamp, 'x-nonce': nonce, 'x-signature': signature },
  };
}
