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
--- @include "includes/server-time-ms"
local function head(key)
  local h = redis.call('ZRANGE', key, 0, 0, 'WITHSCORES')
  return h[2] or ''
end
return {
  serverTimeMs(),
  redis.call('ZCARD', KEYS[1]),
  redis.call('ZCARD', KEYS[2]),
  redis.call('ZCARD', KEYS[3]),
  redis.call('ZCARD', KEYS[4]),
  head(KEYS[1]),
  head(KEYS[2]),
}
