--[[
  Reads a lock as it is now (holders whose lease ended are not shown).

  KEYS[1]  lock hash
  KEYS[2]  fencing counter
  ARGV  none

  Returns: {mode or false, ttlMs, lastFencingToken, owner1, count1, leaseEnd1, owner2, ...};
           mode is false when nobody holds the lock
]]
--- @include "platform/includes/server-time-ms"
local holdersKey = KEYS[1]
local fenceKey = KEYS[2]

local nowMs = serverTimeMs()
local flat = redis.call('HGETALL', holdersKey)
local fields = {}
for i = 1, #flat, 2 do fields[flat[i]] = flat[i + 1] end
local out = {false, redis.call('PTTL', holdersKey), redis.call('GET', fenceKey) or '0'}
for f, v in pairs(fields) do
  if string.sub(f, 1, 2) == 'e:' and tonumber(v) > nowMs then
    local o = string.sub(f, 3)
    out[#out + 1] = o
    out[#out + 1] = fields['c:' .. o]
    out[#out + 1] = v
  end
end
if #out > 3 then out[1] = fields['mode'] end
return out
