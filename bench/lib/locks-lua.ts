/**
 * Lua shared by the locks benchmark's script-cost variants (locks-script-cost.ts) and its
 * uncontended reference row (locks-clients.ts), so the Redis µs and the ops/s price the same text.
 */

/** How long the engine keeps a lock's fencing counter (lock.store FENCE_KEEP_MS). */
export const FENCE_KEEP_MS = 3_600_000;

/**
 * The least a fenced lock needs: a string key (no owner hash: no reentrancy, no read/write) plus the
 * engine's fencing counter with its clock floor (the token never goes back, even after the counter
 * expired). KEYS: lock, fence; ARGV: owner, lease ms, fence keep ms. Returns the token, or 0 when taken.
 */
export const FENCED_STRING_ACQUIRE_LUA =
  "local t = redis.call('TIME') local now = t[1] .. string.sub('00000' .. t[2], -6) " +
  "if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) == false then return 0 end " +
  "local prev = redis.call('SET', KEYS[2], now, 'PX', ARGV[3], 'GET') " +
  "if prev and tonumber(prev) >= tonumber(now) then now = string.format('%.0f', tonumber(prev) + 1) redis.call('SET', KEYS[2], now, 'PX', ARGV[3]) end " +
  'return now';

/** Release of a string lock, as redlock and redis-semaphore send it: DEL only if it still holds our owner. KEYS: lock; ARGV: owner. 1 or 0. */
export const OWNER_RELEASE_LUA = "if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end return 0";
