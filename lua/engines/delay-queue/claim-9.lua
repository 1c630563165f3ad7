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

  A claim names when its caller stops waiting for the reply (ARGV[6]). A call
  that reaches Redis only after that (Redis was frozen or stalled, the call
  sat in a socket buffer) still does steps 1 and 2, but claims nothing: no
  one would read its reply, and the items it took would stay invisible until
  their visibility timeout. The caller's next claim takes them at once.

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
  ARGV[6]  reply-by: the Redis-clock time, ms, after which the caller no longer reads the reply ('' or absent: no limit)
  ARGV[7]  '1': also name the items this call moved to dead-letter, after the deliveries ('' or absent: only their count)

  Returns: {now, nextWake, readyLeft, promoted, requeued, died, id1, payload1, attempt1, dueAt1, token1, ...,
            deadId1, deadAttempts1, deadError1, ...}
    (no deliveries when the call ran after its reply-by time; the dead triples only with ARGV[7] '1', one per died)
    nextWake  the earliest pending due time or in-flight deadline, '' when neither exists
]]
--- @include "platform/includes/server-time-ms"
--- @include "platform/includes/monotonic-counter"
--- @include "engines/delay-queue/includes/delay-queue-state"
local want = tonumber(ARGV[1])
local visibilityMs = tonumber(ARGV[2])
local maxAttempts = tonumber(ARGV[3])
local batch = tonumber(ARGV[4])
local channel = ARGV[5]
local replyBy = tonumber(ARGV[6])
local nameDead = ARGV[7] == '1'

local now = serverTimeMs()
-- The caller has given up on this call: whatever it claimed would wait out its visibility timeout unread.
if replyBy and now > replyBy then want = 0 end

-- 1. Lost deliveries.
local requeued, died = 0, 0
-- id, deliveries, last error of every item this call moves to dead-letter (named in the reply with ARGV[7]).
local deadNamed = {}
local function buried(id, attempts, errorText)
  died = died + 1
  deadNamed[#deadNamed + 1] = id
  deadNamed[#deadNamed + 1] = attempts
  deadNamed[#deadNamed + 1] = errorText
end
local expired = redis.call('ZRANGEBYSCORE', inflightKey, '-inf', now, 'LIMIT', 0, batch)
for _, id in ipairs(expired) do
  local token, due = leaseOf(id)
  -- The silent holder may still be alive: tell it the delivery is gone.
  if token then redis.call('PUBLISH', channel, 'gone:' .. token) end
  redis.call('ZREM', inflightKey, id)
  redis.call('HDEL', leaseKey, id)
  local attempts = attemptsOf(id)
  if attempts >= maxAttempts then
    local errorText = 'visibility timeout: the worker holding the item stopped responding'
    redis.call('ZADD', deadKey, now, id)
    redis.call('HSET', errorsKey, id, errorText)
    buried(id, attempts, errorText)
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

-- 3. Claim, with a handful of commands for the whole batch (each taking every claimed id).
local out = {now, '', 0, promoted, requeued, died}
if want > 0 then
  local ready = redis.call('ZRANGE', readyKey, 0, want - 1, 'WITHSCORES')
  local ids = {}
  for i = 1, #ready, 2 do ids[#ids + 1] = ready[i] end
  if #ids > 0 then
    redis.call('ZREM', readyKey, unpack(ids))
    local payloads = redis.call('HMGET', payloadKey, unpack(ids))
    local counts = redis.call('HMGET', attemptsKey, unpack(ids))
    local live = 0
    for j = 1, #ids do
      if payloads[j] then live = live + 1 end
    end
    -- The claim's own clock, so every token of one step is measured against the same instant:
    -- the tokens of one claim are consecutive.
    local token = live > 0 and reserveCounterRun(seqKey, nil, nil, now * 1000, live) or 0
    local deadline = now + visibilityMs
    local inflightArgs, attemptArgs, leaseArgs = {}, {}, {}
    for j, id in ipairs(ids) do
      local payload = payloads[j]
      if payload then
        local attempt = (tonumber(counts[j]) or 0) + 1
        local dueText = string.format('%d', tonumber(ready[2 * j]))
        inflightArgs[#inflightArgs + 1] = deadline
        inflightArgs[#inflightArgs + 1] = id
        attemptArgs[#attemptArgs + 1] = id
        attemptArgs[#attemptArgs + 1] = attempt
        leaseArgs[#leaseArgs + 1] = id
        leaseArgs[#leaseArgs + 1] = string.format('%.0f', token) .. ':' .. dueText
        out[#out + 1] = id
        out[#out + 1] = payload
        out[#out + 1] = attempt
        out[#out + 1] = ready[2 * j]
        out[#out + 1] = token
        token = token + 1
      else
        -- Cannot happen through these scripts; never hand out an item without its payload.
        redis.call('ZADD', deadKey, now, id)
        redis.call('HSET', payloadKey, id, 'null') -- every entry has a payload (schedule relies on it)
        redis.call('HSET', errorsKey, id, 'payload missing')
        buried(id, tonumber(counts[j]) or 0, 'payload missing')
        out[6] = died
      end
    end
    if live > 0 then
      redis.call('ZADD', inflightKey, unpack(inflightArgs))
      redis.call('HSET', attemptsKey, unpack(attemptArgs))
      redis.call('HSET', leaseKey, unpack(leaseArgs))
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
if nameDead then
  for _, v in ipairs(deadNamed) do out[#out + 1] = v end
end
return out
