--[[
  One step of a worker, in bounded work (each batch at most 1,000 items):
  1. in-flight items past their visibility deadline go back to ready at
     their due time, or to dead when they used up ARGV[3] deliveries (their
     holder went silent; a 'gone:<token>' event tells it, if it is alive);
  2. due pending items move to ready, oldest first;
  3. up to ARGV[1] ready items, oldest first, are claimed: moved to in-flight
     with deadline now + ARGV[2], their delivery count incremented and a new
     fencing token leased to the delivery (the queue's counter, kept at or
     above the Redis clock in microseconds).
  Any instance may run it; two runs never claim the same delivery.

  KEYS[1]  pending zset
  KEYS[2]  ready zset
  KEYS[3]  in-flight zset
  KEYS[4]  dead zset
  KEYS[5]  payload hash
  KEYS[6]  attempts hash
  KEYS[7]  errors hash
  KEYS[8]  lease hash (id -> fencing token of the live delivery)
  KEYS[9]  fencing-token counter
  ARGV[1]  items to claim, 0..1000
  ARGV[2]  visibility timeout, ms
  ARGV[3]  max deliveries per item
  ARGV[4]  batch size for steps 1 and 2, 1..1000
  ARGV[5]  the queue's event channel (revocations of lost deliveries)

  Returns: {now, nextWake, readyLeft, promoted, requeued, died, id1, payload1, attempt1, dueAt1, token1, ...}
    nextWake  the earliest pending due time or in-flight deadline, '' when neither exists
]]
--- @include "includes/server-time-ms"
--- @include "includes/monotonic-counter"
--- @include "includes/delay-queue-state"
local want = tonumber(ARGV[1])
local visibilityMs = tonumber(ARGV[2])
local maxAttempts = tonumber(ARGV[3])
local batch = tonumber(ARGV[4])
local channel = ARGV[5]

local now = serverTimeMs()

-- 1. Lost deliveries.
local requeued, died = 0, 0
local expired = redis.call('ZRANGEBYSCORE', inflightKey, '-inf', now, 'LIMIT', 0, batch)
for _, id in ipairs(expired) do
  local token, due = leaseOf(id)
  -- The silent holder may still be alive: tell it the delivery is gone.
  if token then redis.call('PUBLISH', channel, 'gone:' .. token) end
  redis.call('ZREM', inflightKey, id)
  redis.call('HDEL', leaseKey, id)
  if attemptsOf(id) >= maxAttempts then
    redis.call('ZADD', deadKey, now, id)
    redis.call('HSET', errorsKey, id, 'visibility timeout: the worker holding the item stopped responding')
    died = died + 1
  else
    -- Back in line at its original due time, so catch-up stays oldest first.
    redis.call('ZADD', readyKey, due or now, id)
    requeued = requeued + 1
  end
end

-- 2. Promotion.
local due = redis.call('ZRANGEBYSCORE', pendingKey, '-inf', now, 'WITHSCORES', 'LIMIT', 0, batch)
local promoted = #due / 2
if promoted > 0 then
  local zargs, ids = {}, {}
  for i = 1, #due, 2 do
    zargs[#zargs + 1] = due[i + 1]
    zargs[#zargs + 1] = due[i]
    ids[#ids + 1] = due[i]
  end
  redis.call('ZADD', readyKey, unpack(zargs))
  redis.call('ZREM', pendingKey, unpack(ids))
end

-- 3. Claim.
local out = {now, '', 0, promoted, requeued, died}
if want > 0 then
  local ready = redis.call('ZRANGE', readyKey, 0, want - 1, 'WITHSCORES')
  local deadline = now + visibilityMs
  for i = 1, #ready, 2 do
    local id = ready[i]
    redis.call('ZREM', readyKey, id)
    local payload = redis.call('HGET', payloadKey, id)
    if payload then
      redis.call('ZADD', inflightKey, deadline, id)
      local attempt = redis.call('HINCRBY', attemptsKey, id, 1)
      -- The claim's own clock, so every token of one step is measured against the same instant.
      local token, tokenText = nextCounterAtLeastClock(seqKey, nil, nil, now * 1000)
      redis.call('HSET', leaseKey, id, tokenText .. ':' .. string.format('%d', tonumber(ready[i + 1])))
      out[#out + 1] = id
      out[#out + 1] = payload
      out[#out + 1] = attempt
      out[#out + 1] = ready[i + 1]
      out[#out + 1] = token
    else
      -- Cannot happen through these scripts; never hand out an item without its payload.
      redis.call('ZADD', deadKey, now, id)
      redis.call('HSET', payloadKey, id, 'null') -- every entry has a payload (schedule relies on it)
      redis.call('HSET', errorsKey, id, 'payload missing')
      died = died + 1
      out[6] = died
    end
  end
end

local nextWake = nil
local p = redis.call('ZRANGE', pendingKey, 0, 0, 'WITHSCORES')
if p[2] then nextWake = tonumber(p[2]) end
local f = redis.call('ZRANGE', inflightKey, 0, 0, 'WITHSCORES')
if f[2] and (not nextWake or tonumber(f[2]) < nextWake) then nextWake = tonumber(f[2]) end
if nextWake then out[2] = string.format('%d', nextWake) end
out[3] = redis.call('ZCARD', readyKey)
return out
