--[[
  Ends one delivery without success. 'fail': records the error, then either
  schedules a retry after ARGV[4] ms or, when the item used up ARGV[3]
  deliveries, moves it to dead. 'release': hands the item back to ready at
  once, at its original due time (a worker shutting down); the interrupted delivery still counts.

  KEYS[1]  pending zset
  KEYS[2]  ready zset
  KEYS[3]  in-flight zset
  KEYS[4]  dead zset
  KEYS[5]  payload hash
  KEYS[6]  attempts hash
  KEYS[7]  errors hash
  KEYS[8]  lease hash (id -> fencing token of the live delivery)
  KEYS[9]  fencing-token counter
  ARGV[1]  the item id
  ARGV[2]  the delivery's fencing token
  ARGV[3]  max deliveries per item (compared with the item's delivery count)
  ARGV[4]  retry delay, ms
  ARGV[5]  the error text
  ARGV[6]  'fail' or 'release'
  ARGV[7]  the queue's event channel

  Returns: 1 retry scheduled, 2 dead, 3 released, 0 the delivery was no longer current
]]
--- @include "platform/includes/server-time-ms"
--- @include "engines/delay-queue/includes/delay-queue-state"
local id = ARGV[1]
local token = ARGV[2]
local maxAttempts = tonumber(ARGV[3])
local retryDelayMs = tonumber(ARGV[4])
local errorText = ARGV[5]
local action = ARGV[6]
local channel = ARGV[7]

local current, due = isCurrent(id, token)
if not current then return 0 end
local now = serverTimeMs()
redis.call('ZREM', inflightKey, id)
redis.call('HDEL', leaseKey, id)
if action == 'release' then
  redis.call('ZADD', readyKey, due or now, id)
  redis.call('PUBLISH', channel, 'due:' .. string.format('%d', now)) -- a running peer picks it up now
  return 3
end
redis.call('HSET', errorsKey, id, errorText)
if attemptsOf(id) >= maxAttempts then
  redis.call('ZADD', deadKey, now, id)
  return 2
end
addPending(id, now + retryDelayMs, channel)
return 1
