import Redis from 'ioredis';

/** One command's line of `INFO commandstats`. */
export interface CommandStat {
  calls: number;
  usec: number;
}

/** `INFO commandstats` as command name → calls and microseconds. */
export const parseCommandStats = (info: string) =>
  new Map<string, CommandStat>([...info.matchAll(/^cmdstat_([^:]+):calls=(\d+),usec=(\d+)/gm)].map((m) => [m[1], { calls: Number(m[2]), usec: Number(m[3]) }]));

/** INFO commandstats of every node, summed. */
export async function commandStats(urls: string[]): Promise<Map<string, CommandStat>> {
  const out = new Map<string, CommandStat>();
  for (const url of urls) {
    const r = new Redis(url, { maxRetriesPerRequest: 1 });
    const info = await r.info('commandstats').finally(() => r.disconnect());
    for (const [k, v] of parseCommandStats(info)) out.set(k, { calls: (out.get(k)?.calls ?? 0) + v.calls, usec: (out.get(k)?.usec ?? 0) + v.usec });
  }
  return out;
}

/** Calls and µs per command between two snapshots, minus the INFO call of the later snapshot. */
export function statsDelta(a: Map<string, CommandStat>, b: Map<string, CommandStat>): Record<string, CommandStat> {
  const out: Record<string, CommandStat> = {};
  for (const [k, v] of b) {
    const calls = v.calls - (a.get(k)?.calls ?? 0) - (k === 'info' ? 1 : 0);
    if (calls > 0) out[k] = { calls, usec: v.usec - (a.get(k)?.usec ?? 0) };
  }
  return out;
}

/** Redis's own CPU (INFO cpu: used_cpu_sys + used_cpu_user, seconds) and its commandstats, in one INFO call on `conn`. */
export async function redisSnapshot(conn: Redis): Promise<{ cpuS: number; stats: Map<string, CommandStat> }> {
  const info = String(await conn.call('INFO', 'cpu', 'commandstats'));
  const cpu = (f: string) => Number(new RegExp(`^${f}:([\\d.]+)`, 'm').exec(info)?.[1] ?? NaN);
  return { cpuS: cpu('used_cpu_sys') + cpu('used_cpu_user'), stats: parseCommandStats(info) };
}
