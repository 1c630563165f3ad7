/**
 * The one time source of the background machinery (the delay-queue processors, the stream runners' waits, the
 * periodic jobs, the lock engine's waits and renewals). Injected (token CLOCK, provided by WorkersModule), so that
 * tests drive time themselves (Jest's fake timers, or a clock of their own) where timing is the point, instead of
 * sleeping on the wall clock. Decisions that must hold across instances read the Redis clock, never this one.
 */
export interface Clock {
  /** Monotonic milliseconds (as `performance.now()`): for intervals and deadlines, never for dates. */
  now(): number;
  /** Runs `fn` after `ms`; the timer does not keep the process alive (the lifecycle stops the workers). */
  setTimeout(fn: () => void, ms: number): Timer;
  clearTimeout(timer: Timer | undefined): void;
  /** Runs `fn` every `ms`; the timer does not keep the process alive. */
  setInterval(fn: () => void, ms: number): Timer;
  clearInterval(timer: Timer | undefined): void;
  /** A number in [0, 1): jitter. */
  random(): number;
}

/** A timer handle, opaque to its users. */
export type Timer = ReturnType<typeof setTimeout>;

/** The injection token of the clock. */
export const CLOCK = Symbol('CLOCK');

/** The process clock. It reads the globals at each call, so Jest's fake timers apply to it too. */
export const systemClock: Clock = {
  now: () => performance.now(),
  setTimeout: (fn, ms) => {
    const timer = setTimeout(fn, Math.max(0, ms));
    timer.unref();
    return timer;
  },
  clearTimeout: (timer) => clearTimeout(timer),
  setInterval: (fn, ms) => {
    const timer = setInterval(fn, Math.max(1, ms));
    timer.unref();
    return timer;
  },
  clearInterval: (timer) => clearInterval(timer),
  random: () => Math.random(),
};
