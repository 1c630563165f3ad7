--[[
  Arms one sub-pool once its preload is complete: the staging list holds
  exactly the envelopes expected, so it becomes the pool (RENAME: nothing
  half-loaded is ever grabbed from) and the stats are set. An armed pool is
  left as it is.

  KEYS[1]  the staging list (envelopes "id:amount" being loaded)
  KEYS[2]  the pool list
  KEYS[3]  the stats hash
  ARGV[1]  envelopes expected
  ARGV[2]  their amount, minor units
  ARGV[3]  startsAt, epoch ms
  ARGV[4]  endsAt, epoch ms
  ARGV[5]  per-user limit
  ARGV[6]  this sub-pool's index
  ARGV[7]  when the keys expire, epoch ms

  Returns: {1} armed now, {2} armed before, {0, staged} the staging list is not complete (nothing changed)
]]
--- @include "features/red-envelope/includes/red-envelope-pool"
local stagingKey = KEYS[1]
local poolKey = KEYS[2]
local statsKey = KEYS[3]
local count = tonumber(ARGV[1])
local amount = ARGV[2]

if redis.call('HGET', statsKey, 'armed') == '1' then return {2} end
local staged = redis.call('LLEN', stagingKey)
if staged ~= count then return {0, staged} end
if count > 0 then redis.call('RENAME', stagingKey, poolKey) end
redis.call('HSET', statsKey, 'armed', 1, 'startsAt', ARGV[3], 'endsAt', ARGV[4], 'endedAt', 0, 'limit', ARGV[5], 'pool', ARGV[6],
  'expireAt', ARGV[7], 'loadedCount', count, 'loadedAmount', amount, 'leftCount', count, 'leftAmount', amount,
  'grabbedCount', 0, 'grabbedAmount', 0, 'pendingCount', 0, 'pendingAmount', 0, 'creditedCount', 0, 'creditedAmount', 0,
  'deadCount', 0, 'deadAmount', 0, 'refundedCount', 0, 'refundedAmount', 0)
redis.call('PEXPIREAT', statsKey, ARGV[7])
if count > 0 then redis.call('PEXPIREAT', poolKey, ARGV[7]) end
return {1}
