--[[
  Acknowledges deliveries of one queue: each item is done and removed. An
  entry whose delivery is no longer the live one (cancelled, replaced, or
  delivered again after its visibility timeout) is left alone. The worker
  sends the acks of one event-loop turn together, so a burst of finished
  handlers costs one call, not one each.

  KEYS[1]  pending zset
  KEYS[2]  ready zset
  KEYS[3]  in-flight zset
  KEYS[4]  dead zset
  KEYS[5]  payload hash
  KEYS[6]  attempts hash
  KEYS[7]  errors hash
  KEYS[8]  lease hash (id -> fencing token of the live delivery)
  KEYS[9]  fencing-token counter
  ARGV[1]  the first item id
  ARGV[2]  its delivery's fencing token, then more (item id, token) pairs

  Returns: {acked1, acked2, ...} one per pair: 1 acked, 0 the delivery was no longer current
]]
--- @include "includes/delay-queue-state"
local acked = {}
for i = 1, #ARGV - 1, 2 do
  local id = ARGV[i]
  local token = ARGV[i + 1]
  if isCurrent(id, token) then
    forget(id)
    acked[#acked + 1] = 1
  else
    acked[#acked + 1] = 0
  end
end
return acked
