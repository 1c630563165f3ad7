/**
 * The one retry vocabulary of every delivery engine (the delay queue and the stream consumer groups) and of the
 * periodic jobs. An item is delivered at least once: a delivery that fails is delivered again after its backoff, one
 * that is not finished within `visibilityMs` (its worker died or stalled) is taken over by another worker, and after
 * `attempts` deliveries it goes to its engine's dead letter (the delay queue's dead set, a stream's dead-letter
 * stream), where ops see and re-drive it.
 */
export interface RetryPolicy {
  /** Deliveries before the item is given up to its dead letter (periodic jobs: runs in a row that may fail before the failure is logged at error). */
  attempts: number;
  /** The wait before delivery n + 1 after n failed ones: initialMs × factor^(n−1), at most maxMs. */
  backoff: Backoff;
  /**
   * How long a delivery may go unfinished and unextended before another worker takes it over, ms: the delay queue's
   * visibility timeout, a consumer group's claim idle time.
   */
  visibilityMs: number;
}

export interface Backoff {
  initialMs: number;
  maxMs: number;
  /** Growth per failed delivery. Default 2. */
  factor?: number;
}

/** A policy as callers give it: any field left out takes its engine's default. */
export type RetryPolicyInput = Partial<Omit<RetryPolicy, 'backoff'>> & { backoff?: Partial<Backoff> };

/** `input` over `defaults`, field by field (bounds are the engine's to check). */
export function retryPolicy(input: RetryPolicyInput | undefined, defaults: RetryPolicy): RetryPolicy {
  return {
    attempts: input?.attempts ?? defaults.attempts,
    visibilityMs: input?.visibilityMs ?? defaults.visibilityMs,
    backoff: {
      initialMs: input?.backoff?.initialMs ?? defaults.backoff.initialMs,
      maxMs: input?.backoff?.maxMs ?? defaults.backoff.maxMs,
      factor: input?.backoff?.factor ?? defaults.backoff.factor ?? 2,
    },
  };
}

/**
 * The wait before the next delivery after `attempt` failed ones: exponential, capped; with `jitter`, "equal jitter"
 * (half fixed, half random), so that items that failed together do not come back together.
 */
export function backoffDelay(attempt: number, b: Backoff, random: (() => number) | null = Math.random): number {
  const full = Math.min(b.maxMs, b.initialMs * (b.factor ?? 2) ** Math.min(Math.max(0, attempt - 1), 60));
  return random ? Math.round(full / 2 + random() * (full / 2)) : full;
}
