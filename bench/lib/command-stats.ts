/** One command's line of `INFO commandstats`. */
export interface CommandStat {
  calls: number;
  usec: number;
}

/** `INFO commandstats` as command name → calls and microseconds. */
export function parseCommandStats(info: string): Map<string, CommandStat> {
  const out = new Map<string, CommandStat>();
  for (const m of info.matchAll(/^cmdstat_([^:]+):calls=(\d+),usec=(\d+)/gm)) out.set(m[1], { calls: Number(m[2]), usec: Number(m[3]) });
  return out;
}
