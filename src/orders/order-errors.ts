import { ApiError } from '../http/api-error';
import type { WriteResult } from './orders.store';

/** 404 for an order that does not exist or is not the caller's: the two are not told apart. */
export const orderNotFound = () => new ApiError(404, 'NOT_FOUND', 'No such order');
export const planNotFound = () => new ApiError(404, 'NOT_FOUND', 'No such payment plan');

/** 409 with a stable code saying which state stopped the operation. */
export const orderConflict = (code: string, message: string, details?: unknown) => new ApiError(409, code, message, details);

/** 400 naming one field, in the shape of the validation pipe's errors. */
export const invalidField = (field: string, message: string) => new ApiError(400, 'VALIDATION_FAILED', `${field}: ${message}`, [{ field, errors: [message] }]);

/** Throws when write-3 refused: a record changed meanwhile, a newer lock holder wrote, or the order expired. */
export function expectWritten(r: WriteResult): void {
  if (r.status === 'OK') return;
  if (r.status === 'VERSION') throw orderConflict('ORDER_CHANGED', 'The order changed while this request ran; read it again and retry');
  if (r.status === 'STALE_TOKEN') throw orderConflict('STALE_LOCK_HOLDER', 'A newer holder of the lock has written; this request lost its lock');
  throw orderConflict('ORDER_EXPIRED', 'The order has expired');
}
