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
  /ECONNREFUSED|ECONNRESET|ETIMEDOUT|EPIPE|EHOSTUNREACH|ENOTFOUND/,
  /None of startup nodes is available/i,
  /Failed to refresh slots cache/i,
  /Cluster(AllFailed)?Error|CLUSTERDOWN/i,
  /^LOADING|^MASTERDOWN|^READONLY|^TRYAGAIN/,
  /All sentinels are unreachable/i,
];

/** True when an error means Redis is unreachable or not serving (as opposed to a bad command). */
export function isRedisUnavailable(err: unknown): boolean {
  if (err instanceof RedisUnavailableError) return true;
  if (!(err instanceof Error)) return false;
  const text = `${err.name} ${err.message} ${(err as NodeJS.ErrnoException).code ?? ''}`;
  return UNAVAILABLE_PATTERNS.some((re) => re.test(text) || re.test(err.message));
}
