--[[
  Ends the sale of one product shard now (ops end an activity early): the
  window closes on the Redis clock; reservations already made stay.

  KEYS[1]  the shard's stock hash
  ARGV     none

  Returns: {endedAt}  epoch ms (the earlier end when it had ended before; 0 when the shard is not loaded)
]]
--- @include "platform/includes/server-time-ms"
local stockKey = KEYS[1]
if redis.call('EXISTS', stockKey) == 0 then return {0} end
local endedAt = tonumber(redis.call('HGET', stockKey, 'endedAt') or '0')
if endedAt > 0 then return {endedAt} end
endedAt = serverTimeMs()
redis.call('HSET', stockKey, 'endedAt', endedAt)
return {endedAt}
