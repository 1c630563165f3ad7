/**
 * The time source of the lock engine's waits, renewals and deadlines. The
 * engine takes it by injection so that tests can drive time themselves (Jest's
 * fake timers, or a clock of their own) where timing is the point, instead of
 * sleeping on the wall clock. Lease ends themselves come from the Redis clock.
 */
export interface LockClock {
  /** Monotonic milliseconds (as `performance.now()`). */
  now(): number;
  /** Runs `fn` after `ms`; the timer does not keep the process alive. */
  setTimeout(fn: () => void, ms: number): LockTimer;
  clearTimeout(timer: LockTimer | undefined): void;
}

/** A timer handle, opaque to the engine. */
export type LockTimer = ReturnType<typeof setTimeout>;

/** The process clock. It reads the globals at each call, so Jest's fake timers apply to it too. */
export const systemLockClock: LockClock = {
  now: () => performance.now(),
  setTimeout: (fn, ms) => {
    const timer = setTimeout(fn, Math.max(0, ms));
    timer.unref();
    return timer;
  },
  clearTimeout: (timer) => clearTimeout(timer),
};
