-- Shared piece of the delay-queue scripts, inlined by the script loader.
-- Every queue script takes the same nine keys, all under the queue's hash tag, and names them here:
local pendingKey = KEYS[1]  -- zset    id -> due time (ms, Redis clock)
local readyKey = KEYS[2]    -- zset    id -> due time (claim order: oldest first)
local inflightKey = KEYS[3] -- zset    id -> visibility deadline (ms)
local deadKey = KEYS[4]     -- zset    id -> time of death (ms)
local payloadKey = KEYS[5]  -- hash    id -> payload
local attemptsKey = KEYS[6] -- hash    id -> deliveries so far
local errorsKey = KEYS[7]   -- hash    id -> last handler error
local leaseKey = KEYS[8]    -- hash    id -> '<token>:<due>' of the live delivery (only while in flight):
                            --         its fencing token and the item's due time, kept for a requeue
local seqKey = KEYS[9]      -- string  the queue's last fencing token. Tokens never repeat, even when an
                            --         id is cancelled and scheduled again, and never fall below the Redis
                            --         clock in microseconds (includes/monotonic-counter), so a replica
                            --         promoted after losing recent writes still hands out larger tokens
                            --         than the old master did
-- State codes: 0 absent, 1 pending, 2 ready, 3 in flight, 4 dead.
local STATE_KEYS = { pendingKey, readyKey, inflightKey, deadKey }

-- Where `id` is, and its score there (O(1) per structure).
local function itemState(id)
  for code, key in ipairs(STATE_KEYS) do
    local score = redis.call('ZSCORE', key, id)
    if score then return code, tonumber(score) end
  end
  return 0, nil
end

-- Removes every trace of `id` (O(log n)).
local function forget(id)
  for _, key in ipairs(STATE_KEYS) do redis.call('ZREM', key, id) end
  redis.call('HDEL', payloadKey, id)
  redis.call('HDEL', attemptsKey, id)
  redis.call('HDEL', errorsKey, id)
  redis.call('HDEL', leaseKey, id)
end

-- Deliveries `id` has had so far.
local function attemptsOf(id)
  return tonumber(redis.call('HGET', attemptsKey, id) or '0')
end

-- Adds `id` to pending at `due` and tells every instance when it became the new head.
local function addPending(id, due, channel)
  redis.call('ZADD', pendingKey, due, id)
  local head = redis.call('ZRANGE', pendingKey, 0, 0)
  if head[1] == id then redis.call('PUBLISH', channel, 'due:' .. string.format('%d', due)) end
end

-- The lease of `id` split into its fencing token and due time, or nil when it has none.
local function leaseOf(id)
  local lease = redis.call('HGET', leaseKey, id)
  if not lease then return nil, nil end
  local token, due = string.match(lease, '^(%d+):(%-?%d+)$')
  return token, tonumber(due)
end

-- True when (id, token) is the live delivery: in flight and not cancelled, replaced or
-- redelivered since. Also returns the item's due time.
local function isCurrent(id, token)
  local leased, due = leaseOf(id)
  if leased ~= token or not redis.call('ZSCORE', inflightKey, id) then return false, nil end
  return true, due
end

-- A due time from ARGV: mode 'delay' counts from the Redis clock, 'at' is absolute.
local function dueFrom(mode, value, now)
  local v = tonumber(value)
  if not v then return nil end
  if mode == 'delay' then return now + v end
  if mode == 'at' then return v end
  return nil
end

-- Tells the holder of an in-flight delivery of `id` that it was revoked (cancelled or replaced),
-- naming the delivery by its fencing token so a later delivery of the same id is not disturbed.
local function revoke(id, channel)
  local token = leaseOf(id)
  if token then redis.call('PUBLISH', channel, 'gone:' .. token) end
end
