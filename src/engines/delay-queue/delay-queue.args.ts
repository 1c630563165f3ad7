import { DelayQueueArgumentError } from './delay-queue.errors';
import { MAX_DELAY_MS, MAX_PAYLOAD_BYTES } from './delay-queue.keys';
import type { ProcessOptions, When } from './delay-queue.types';
import { BATCH, CLAIM_BATCH, type ProcessorSettings } from './queue-processor';
import type { RetryPolicy } from '../workers/retry-policy';

/** The delay queue's retry policy where a caller leaves a field out. */
export const DELAY_QUEUE_RETRY: RetryPolicy = { attempts: 5, backoff: { initialMs: 1000, maxMs: 300_000, factor: 2 }, visibilityMs: 30_000 };

/** The largest JS Date, ms. */
const MAX_TIME_MS = 8.64e15;

/** A `When` as script arguments: `['delay', ms]` (counted on the Redis clock) or `['at', epochMs]`. */
export function timeArgs(when: When): ['delay' | 'at', number] {
  if (when && typeof when === 'object' && 'delayMs' in when) {
    const d = when.delayMs;
    if (!Number.isInteger(d) || d < 0 || d > MAX_DELAY_MS) {
      throw new DelayQueueArgumentError('delayMs', `must be an integer from 0 to ${MAX_DELAY_MS} (ten years)`);
    }
    return ['delay', d];
  }
  if (when && typeof when === 'object' && 'dueAt' in when) {
    const t = when.dueAt instanceof Date ? when.dueAt.getTime() : when.dueAt;
    if (!Number.isInteger(t) || t < 0 || t > MAX_TIME_MS) throw new DelayQueueArgumentError('dueAt', 'must be a valid time (epoch ms or Date)');
    return ['at', t];
  }
  throw new DelayQueueArgumentError('when', 'must be {dueAt} or {delayMs}');
}

/** The payload as stored: JSON, at most MAX_PAYLOAD_BYTES. */
export function encodePayload(payload: unknown): string {
  let raw: string | undefined;
  try {
    raw = JSON.stringify(payload);
  } catch {
    raw = undefined;
  }
  if (raw === undefined) throw new DelayQueueArgumentError('payload', 'must be JSON-serialisable');
  const bytes = Buffer.byteLength(raw);
  if (bytes > MAX_PAYLOAD_BYTES) throw new DelayQueueArgumentError('payload', `is ${bytes} bytes as JSON; the limit is ${MAX_PAYLOAD_BYTES}`);
  return raw;
}

/**
 * `process()` options with defaults applied and bounds checked. `commandTimeoutMs`: how long a Redis call waits for
 * its reply (REDIS_COMMAND_TIMEOUT_MS); a claim is useless once its caller stopped waiting (see `replyWithinMs`).
 */
export function processorSettings(o: ProcessOptions, appShutdownGraceMs: number, commandTimeoutMs = 1000): ProcessorSettings {
  const int = (field: string, v: number | undefined, dflt: number, min: number, max: number) => {
    const x = v ?? dflt;
    if (!Number.isInteger(x) || x < min || x > max) throw new DelayQueueArgumentError(field, `must be an integer from ${min} to ${max}`);
    return x;
  };
  // At least a second: shorter, a GC pause or a Redis stall would hand a live delivery to a second holder.
  const d = DELAY_QUEUE_RETRY;
  const visibilityMs = int('retry.visibilityMs', o.retry?.visibilityMs, d.visibilityMs, 1000, 3_600_000);
  const initialMs = int('retry.backoff.initialMs', o.retry?.backoff?.initialMs, d.backoff.initialMs, 0, 86_400_000);
  const maxMs = int('retry.backoff.maxMs', o.retry?.backoff?.maxMs, d.backoff.maxMs, initialMs, 86_400_000);
  const factor = o.retry?.backoff?.factor ?? 2;
  if (typeof factor !== 'number' || !(factor >= 1 && factor <= 10)) throw new DelayQueueArgumentError('retry.backoff.factor', 'must be a number from 1 to 10');
  return {
    concurrency: int('concurrency', o.concurrency, 10, 1, 1000),
    retry: { attempts: int('retry.attempts', o.retry?.attempts, d.attempts, 1, 1000), backoff: { initialMs, maxMs, factor }, visibilityMs },
    pollMs: int('pollMs', o.pollMs, 1000, 50, 1000),
    handlerTimeoutMs: int('handlerTimeoutMs', o.handlerTimeoutMs, 300_000, 1000, 86_400_000),
    claimBatch: int('claimBatch', o.claimBatch, CLAIM_BATCH, 1, 1000),
    promoteBatch: int('promoteBatch', o.promoteBatch, BATCH, 10, BATCH),
    // Half the app's shutdown budget: the rest is for the HTTP drain and handing items back before the force exit.
    shutdownGraceMs: Math.min(visibilityMs, Math.floor(appShutdownGraceMs / 2)),
    // Three quarters of the command timeout for the claim to start running in Redis, the rest for its reply's way back.
    replyWithinMs: Math.max(1, Math.floor((commandTimeoutMs * 3) / 4)),
  };
}
