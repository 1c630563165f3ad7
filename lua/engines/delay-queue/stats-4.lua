--[[
  Counts one queue's items and reads the two heads, on the Redis clock.

  KEYS[1]  pending zset
  KEYS[2]  ready zset
  KEYS[3]  in-flight zset
  KEYS[4]  dead zset
  ARGV  none

  Returns: {now, pending, ready, inFlight, dead, pendingHead, readyHead}
    the heads are the smallest scores (due times), '' when the zset is empty
]]
--- @include "platform/includes/server-time-ms"
local pendingKey = KEYS[1]
local readyKey = KEYS[2]
local inflightKey = KEYS[3]
local deadKey = KEYS[4]

local function head(key)
  local h = redis.call('ZRANGE', key, 0, 0, 'WITHSCORES')
  return h[2] or ''
end
return {
  serverTimeMs(),
  redis.call('ZCARD', pendingKey),
  redis.call('ZCARD', readyKey),
  redis.call('ZCARD', inflightKey),
  redis.call('ZCARD', deadKey),
  head(pendingKey),
  head(readyKey),
}
