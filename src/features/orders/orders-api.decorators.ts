import { ApiErrors } from '../../platform/http/error-responses';
import { orderConflict } from './order.errors';

/** The order id the documentation's examples use. */
export const EXAMPLE_ORDER_ID = 'ord_3f9a0c1b2d4e5f60718293a4';

/** 409s several orders routes answer, worded as the services throw them: the documented examples. */
export const ORDER_CONFLICTS = {
  alreadyPaid: orderConflict('ORDER_PAID', 'The order is already paid'),
  closed: orderConflict('ORDER_CLOSED', 'The order is closed'),
  expired: orderConflict('ORDER_EXPIRED', 'The order has expired'),
  changed: orderConflict('ORDER_CHANGED', 'The order changed while this request ran; read it again and retry'),
  staleHolder: orderConflict('STALE_LOCK_HOLDER', 'A newer holder of the lock has written; this request lost its lock'),
};

/** The error responses every orders route shares: 400 (fields named, nothing stored), 429, 503 (safe to retry). */
export const OrdersErrorResponses = (badRequest: string) =>
  ApiErrors({
    400: `${badRequest}; the fields are named and nothing is stored`,
    429: 'Rate limited; see Retry-After',
    503: 'Redis unreachable (locks fail closed); see Retry-After. Retrying is safe.',
  });
