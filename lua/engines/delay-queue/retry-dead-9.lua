--[[
  Gives one dead letter a fresh start: due now, delivery count and error cleared.

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
  ARGV[2]  the queue's event channel

  Returns: the new due time (ms); -1 (NOT_FOUND) when the id is not a dead letter
]]
--- @include "platform/includes/server-time-ms"
--- @include "engines/delay-queue/includes/delay-queue-state"
local id = ARGV[1]
local channel = ARGV[2]

if not redis.call('ZSCORE', deadKey, id) then return -1 end
local now = serverTimeMs()
redis.call('ZREM', deadKey, id)
redis.call('HDEL', attemptsKey, id)
redis.call('HDEL', errorsKey, id)
addPending(id, now, channel)
return now
