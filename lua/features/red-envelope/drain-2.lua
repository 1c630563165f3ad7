--[[
  Ends one sub-pool: grabs stop (endedAt), and the envelopes left are taken
  out of the pool into the refunded counters, to go back to the sponsor.
  Idempotent: a second call changes nothing and answers the same amount.

  KEYS[1]  the pool list
  KEYS[2]  the stats hash
  ARGV     none

  Returns: {refundedCount, refundedAmount}
]]
--- @include "platform/includes/server-time-ms"
--- @include "features/red-envelope/includes/red-envelope-pool"
local poolKey = KEYS[1]
local statsKey = KEYS[2]

if statNumber(statsKey, 'endedAt') == 0 then redis.call('HSET', statsKey, 'endedAt', serverTimeMs()) end
if redis.call('HGET', statsKey, 'drained') ~= '1' then
  local count = statNumber(statsKey, 'leftCount')
  local amount = statNumber(statsKey, 'leftAmount')
  redis.call('HINCRBY', statsKey, 'refundedCount', count)
  redis.call('HINCRBY', statsKey, 'refundedAmount', amount)
  redis.call('HSET', statsKey, 'leftCount', 0, 'leftAmount', 0, 'drained', 1)
  redis.call('UNLINK', poolKey)
end
return {statNumber(statsKey, 'refundedCount'), statNumber(statsKey, 'refundedAmount')}
