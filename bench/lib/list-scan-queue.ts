import type Redis from 'ioredis';
import { randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';

type RemoveCommand = (list: string, timeouts: string, value: string, chunk: number) => Promise<number>;

/**
 * The list-scan baseline of the delay-queue and close-reminder benchmarks: the storage layout of Redisson's RDelayedQueue as
 * the article in shared/seeds (§2.3) describes it, only what cancel and memory need (no firing). offer: the value packed behind
 * a random id (the Lua struct format 'dLc0': 8-byte random double, 8-byte little-endian length, the bytes) goes into a timeout
 * zset (score = due time) and at the tail of a list; remove(value): one script (list-scan-remove-2.lua) walks the list from
 * the head in LRANGE chunks of 1,000, then LREM + ZREM the first match, so its cost grows with the item's position.
 */
export class ListScanQueue {
  private readonly list: string;
  private readonly timeouts: string;
  private readonly removeScript: RemoveCommand;

  constructor(
    private readonly redis: Redis,
    name: string,
  ) {
    // One hash tag: both keys in one cluster slot, as the script needs.
    [this.list, this.timeouts] = [`${name}:{q}:list`, `${name}:{q}:timeout`];
    const commands = redis as unknown as { listScanRemove?: RemoveCommand };
    if (!commands.listScanRemove)
      redis.defineCommand('listScanRemove', { numberOfKeys: 2, lua: readFileSync(join(__dirname, 'list-scan-remove-2.lua'), 'utf8') });
    this.removeScript = commands.listScanRemove!.bind(redis);
  }

  /** Many offers in one MULTI: two variadic commands. */
  async offerMany(items: { value: string; dueAt: number }[]): Promise<void> {
    if (items.length === 0) return;
    const packed = items.map(({ value }) => {
      const bytes = Buffer.from(value, 'utf8');
      const out = Buffer.alloc(16 + bytes.length);
      randomBytes(8).copy(out, 0);
      out.writeBigUInt64LE(BigInt(bytes.length), 8);
      bytes.copy(out, 16);
      return out;
    });
    await this.redis
      .multi()
      .zadd(this.timeouts, ...items.flatMap((item, n) => [item.dueAt, packed[n]]))
      .rpush(this.list, ...packed)
      .exec();
  }

  /** Removes the first item offered with `value`; false when there is none. */
  async remove(value: string): Promise<boolean> {
    return (await this.removeScript(this.list, this.timeouts, value, 1000)) === 1;
  }
}
