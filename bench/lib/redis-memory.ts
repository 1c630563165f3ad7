import type Redis from 'ioredis';

/** MEMORY USAGE … SAMPLES 0 (exact) summed over `keys`, pipelined, grouped by `groupOf(key)`. */
export async function memoryUsage(redis: Redis, keys: string[], groupOf: (key: string) => string): Promise<Map<string, number>> {
  const groups = new Map<string, number>();
  for (let i = 0; i < keys.length; i += 1000) {
    const batch = keys.slice(i, i + 1000);
    const p = redis.pipeline();
    for (const k of batch) p.call('MEMORY', 'USAGE', k, 'SAMPLES', '0');
    ((await p.exec()) ?? []).forEach(([err, v], n) => {
      if (err) throw err;
      const g = groupOf(batch[n]);
      groups.set(g, (groups.get(g) ?? 0) + Number(v ?? 0));
    });
  }
  return groups;
}

/** INFO memory's used_memory (bytes the allocator holds for Redis). */
export async function usedMemory(redis: Redis): Promise<number> {
  return Number(/used_memory:(\d+)/.exec(await redis.info('memory'))?.[1] ?? NaN);
}
