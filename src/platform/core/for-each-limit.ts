/** Runs `fn(0)` … `fn(n - 1)` with at most `inFlight` calls at once; resolves when all are done (rejects on the first failure). */
export async function forEachLimit(n: number, inFlight: number, fn: (i: number) => Promise<void>): Promise<void> {
  let next = 0;
  await Promise.all(
    Array.from({ length: Math.min(n, inFlight) }, async () => {
      while (next < n) await fn(next++);
    }),
  );
}

/** `forEachLimit` over the items of a list. */
export const eachLimit = <T>(items: readonly T[], inFlight: number, fn: (item: T) => Promise<unknown>): Promise<void> =>
  forEachLimit(items.length, inFlight, async (i) => void (await fn(items[i])));
