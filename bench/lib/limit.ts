/** Runs `fn(0)` … `fn(n - 1)` with at most `inFlight` calls at once; resolves when all are done. */
export async function forEachLimit(n: number, inFlight: number, fn: (i: number) => Promise<void>): Promise<void> {
  let next = 0;
  await Promise.all(
    Array.from({ length: Math.min(n, inFlight) }, async () => {
      while (next < n) await fn(next++);
    }),
  );
}
