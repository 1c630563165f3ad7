import { randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import type Redis from 'ioredis';

/** Elements the remove script reads per LRANGE. */
const SCAN_CHUNK = 1000;

type RemoveCommand = (list: string, timeouts: string, value: string, chunk: number) => Promise<number>;

/**
 * The baseline of the delay-queue benchmark: the storage layout of Redisson's
 * RDelayedQueue as the article in shared/seeds (§2.3) describes it, written
 * here from that description. Only what the cancel and memory measurements
 * need is modelled (no firing):
 *
 * - offer(value, dueAt): the value is packed behind a random id (so equal
 *   values can be offered twice) and the packed bytes go both into a timeout
 *   zset (score = due time) and at the tail of a list (offer order);
 * - remove(value): one Lua script (list-scan-remove-2.lua) walks the list
 *   from the head comparing unpacked values, then LREM + ZREM the first match.
 *   Its cost grows with the item's position in the list.
 *
 * Packed layout (the Lua struct format 'dLc0', little-endian x86-64):
 * 8-byte double random id, 8-byte unsigned length, the value's bytes.
 */
export class ListScanQueue {
  readonly listKey: string;
  readonly timeoutKey: string;
  private readonly removeScript: RemoveCommand;

  constructor(
    private readonly redis: Redis,
    name: string,
  ) {
    // One hash tag: both keys in one cluster slot, as the script needs.
    this.listKey = `${name}:{q}:list`;
    this.timeoutKey = `${name}:{q}:timeout`;
    if (!(redis as unknown as Record<string, unknown>).listScanRemove) {
      redis.defineCommand('listScanRemove', { numberOfKeys: 2, lua: readFileSync(join(__dirname, 'list-scan-remove-2.lua'), 'utf8') });
    }
    const commands = redis as unknown as { listScanRemove: RemoveCommand };
    this.removeScript = commands.listScanRemove.bind(redis);
  }

  /** Every key of the queue (for MEMORY USAGE). */
  get keys(): string[] {
    return [this.listKey, this.timeoutKey];
  }

  static pack(value: string): Buffer {
    const bytes = Buffer.from(value, 'utf8');
    const out = Buffer.allocUnsafe(16 + bytes.length);
    randomBytes(8).copy(out, 0);
    out.writeBigUInt64LE(BigInt(bytes.length), 8);
    bytes.copy(out, 16);
    return out;
  }

  /** One offer: the zset and the list change together (MULTI). */
  async offer(value: string, dueAt: number): Promise<void> {
    const packed = ListScanQueue.pack(value);
    await this.redis.multi().zadd(this.timeoutKey, dueAt, packed).rpush(this.listKey, packed).exec();
  }

  /** Many offers in one MULTI: two variadic commands (for filling the queue fast). */
  async offerMany(items: { value: string; dueAt: number }[]): Promise<void> {
    if (items.length === 0) return;
    const packed = items.map((i) => ListScanQueue.pack(i.value));
    const zargs: (number | Buffer)[] = [];
    items.forEach((item, n) => zargs.push(item.dueAt, packed[n]));
    await this.redis
      .multi()
      .zadd(this.timeoutKey, ...zargs)
      .rpush(this.listKey, ...packed)
      .exec();
  }

  /** Removes the first item offered with `value`; false when there is none. */
  async remove(value: string): Promise<boolean> {
    return (await this.removeScript(this.listKey, this.timeoutKey, value, SCAN_CHUNK)) === 1;
  }

  /** Items in the queue (list length). */
  size(): Promise<number> {
    return this.redis.llen(this.listKey);
  }
}
