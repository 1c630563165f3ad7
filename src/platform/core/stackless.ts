/**
 * Errors that are answers (a 4xx, or a 503 with its code) are outcomes, not bugs: the exception filter never logs
 * their stack, and capturing one costs about 4 µs per error under Nest's deep call stacks, more than the rest of a
 * refused request. Their constructors call `super(stackless(message))` and then `stackRestored()`: the Error
 * constructor then records no frames (`stack` is just `Name: message`).
 */
let saved = Error.stackTraceLimit;

export function stackless<T>(message: T): T {
  saved = Error.stackTraceLimit;
  Error.stackTraceLimit = 0;
  return message;
}

export function stackRestored(): void {
  Error.stackTraceLimit = saved;
}
