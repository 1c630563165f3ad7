/** Redis could not be reached in time. Mapped to 503 with Retry-After. */
export class RedisUnavailableError extends Error {
  constructor(cause?: unknown) {
    super('Redis is unavailable', { cause });
    this.name = 'RedisUnavailableError';
  }
}

const UNAVAILABLE_PATTERNS = [
  /Command timed out/i,
  /Connection is closed/i,
  /Stream isn't writeable/i,
  /isn't ready and enableOfflineQueue/i,
  /MaxRetriesPerRequest/i,
  /None of startup nodes is available/i,
  /Failed to refresh slots cache/i,
  /Cluster(AllFailed)?Error|CLUSTERDOWN/i,
  /^(LOADING|MASTERDOWN|READONLY|TRYAGAIN|BUSY|OOM|MISCONF|NOREPLICAS)\b/,
  /Command aborted due to connection close/i,
  /All sentinels are unreachable/i,
];

/**
 * True when an error from ioredis means Redis is unreachable or cannot serve
 * now (as opposed to a bad command): mapped to 503 + Retry-After. Bare socket
 * errno codes are deliberately not matched: they could come from any other
 * dependency, and ioredis reports a lost connection with its own messages.
 */
export function isRedisUnavailable(err: unknown): boolean {
  if (err instanceof RedisUnavailableError) return true;
  if (!(err instanceof Error)) return false;
  const text = `${err.name} ${err.message} ${(err as NodeJS.ErrnoException).code ?? ''}`;
  return UNAVAILABLE_PATTERNS.some((re) => re.test(text) || re.test(err.message));
}
