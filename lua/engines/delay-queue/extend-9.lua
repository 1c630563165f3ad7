--[[
  Checks that a delivery is still the live one and, if so, pushes its
  visibility deadline to now + ARGV[3]. Workers call it as a heartbeat and
  handlers through `stillWanted()` before an irreversible step.

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
  ARGV[3]  visibility timeout, ms

  Returns: 1 still current (deadline extended), 0 cancelled, replaced or delivered again
]]
--- @include "platform/includes/server-time-ms"
--- @include "engines/delay-queue/includes/delay-queue-state"
local id = ARGV[1]
local token = ARGV[2]
local visibilityMs = tonumber(ARGV[3])

if not isCurrent(id, token) then return 0 end
redis.call('ZADD', inflightKey, 'XX', serverTimeMs() + visibilityMs, id)
return 1
