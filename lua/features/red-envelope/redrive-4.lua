--[[
  Ops re-drive a sub-pool's dead-lettered grabs: each goes back on the credit
  stream (its own fields, as the grab wrote them) and its envelope back to
  'pending', and leaves the dead-letter stream, in one step.

  KEYS[1]  the credit stream
  KEYS[2]  its dead-letter stream (entries: group, consumer, eventId, deliveries, error, then the grab's fields)
  KEYS[3]  the envelopes' state hash
  KEYS[4]  the stats hash
  ARGV[1]  most entries to re-drive

  Returns: {redriven}
]]
--- @include "features/red-envelope/includes/red-envelope-pool"
local creditsKey = KEYS[1]
local deadKey = KEYS[2]
local envKey = KEYS[3]
local statsKey = KEYS[4]
local most = tonumber(ARGV[1])

local n = 0
for _, e in ipairs(redis.call('XRANGE', deadKey, '-', '+', 'COUNT', most)) do
  local f = e[2]
  local grab = {}
  local envelopeId
  for i = 11, #f, 2 do
    grab[#grab + 1] = f[i]
    grab[#grab + 1] = f[i + 1]
    if f[i] == 'envelopeId' then envelopeId = f[i + 1] end
  end
  if envelopeId then
    local raw = redis.call('HGET', envKey, envelopeId)
    if raw and string.sub(raw, 1, 1) == 'D' then
      moveCounters(statsKey, 'dead', 'pending', tonumber(string.match(raw, '|(%d+)$')))
      redis.call('HSET', envKey, envelopeId, 'P' .. string.sub(raw, 2))
    end
    redis.call('XADD', creditsKey, '*', unpack(grab))
  end
  redis.call('XDEL', deadKey, e[1])
  n = n + 1
end
return {n}
