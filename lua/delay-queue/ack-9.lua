--[[
  Acknowledges one delivery: the item is done and removed. Does nothing when
  the delivery is no longer the live one (cancelled, replaced, or delivered
  again after its visibility timeout).

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

  Returns: 1 acked, 0 the delivery was no longer current
]]
--- @include "includes/delay-queue-state"
local id = ARGV[1]
local token = ARGV[2]

if not isCurrent(id, token) then return 0 end
forget(id)
return 1
