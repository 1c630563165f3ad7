/**
 * Named step boundaries of the multi-step writes (docs/durability.md, "Multi-step writes"). A process started with
 * `CRASH_AT=<name>[,<name>…]` and NODE_ENV other than production dies at the first of those boundaries it reaches,
 * with SIGKILL, as a crash or a `kill -9` would: nothing after the boundary runs, no shutdown hook, no reply. The
 * crash-point suites start the built service that way, then start it again without, and prove each sequence
 * converges. `<name>#<n>` dies at the n-th time the boundary is reached (n ≥ 1). In production, and when
 * CRASH_AT is unset, a boundary is one Set lookup on an empty set.
 */
const armed = new Map<string, number>();
if (process.env.NODE_ENV !== 'production') {
  for (const spec of (process.env.CRASH_AT ?? '').split(',')) {
    const m = /^([a-z0-9.:-]+)(?:#([1-9][0-9]*))?$/.exec(spec.trim());
    if (m) armed.set(m[1], Number(m[2] ?? 1));
  }
}

/** Marks a step boundary: dies here when the process was started with this boundary in CRASH_AT. */
export function crashPoint(name: string): void {
  if (armed.size === 0) return;
  const left = armed.get(name);
  if (left === undefined) return;
  if (left > 1) {
    armed.set(name, left - 1);
    return;
  }
  // Written synchronously: the test reads which boundary the process died at.
  process.stderr.write(`crash point ${name}: SIGKILL\n`);
  process.kill(process.pid, 'SIGKILL');
}
