--[[
  Acknowledges deliveries of one queue: each item is done and removed. An
  entry whose delivery is no longer the live one (cancelled, replaced, or
  delivered again after its visibility timeout) is left alone. The worker
  sends the acks of one event-loop turn together, so a burst of finished
  handlers costs one call, not one each; and the call does the same few
  commands whatever the number of acks (each with every acked id).

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
--- @include "engines/delay-queue/includes/delay-queue-state"
local ids = {}
for i = 1, #ARGV - 1, 2 do ids[#ids + 1] = ARGV[i] end
if #ids == 0 then return {} end
-- isCurrent for every pair at once: the lease names the token, and the item is in flight.
local leases = redis.call('HMGET', leaseKey, unpack(ids))
local deadlines = redis.call('ZMSCORE', inflightKey, unpack(ids))
local acked, done, taken = {}, {}, {}
for j, id in ipairs(ids) do
  local token = leases[j] and string.match(leases[j], '^(%d+):%-?%d+$')
  if token and token == ARGV[2 * j] and deadlines[j] and not taken[id] then
    taken[id] = true
    done[#done + 1] = id
    acked[j] = 1
  else
    acked[j] = 0
  end
end
if #done > 0 then
  -- forget(), for items known to be in flight: a live delivery's item is in no other state set.
  redis.call('ZREM', inflightKey, unpack(done))
  redis.call('HDEL', payloadKey, unpack(done))
  redis.call('HDEL', attemptsKey, unpack(done))
  redis.call('HDEL', errorsKey, unpack(done))
  redis.call('HDEL', leaseKey, unpack(done))
end
return acked
