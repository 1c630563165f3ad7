--[[
  Moves an order's close reminder from one of the expected states to the
  next, atomically, stamping when: scheduled → sent or skipped when it comes
  due, withdrawing → withdrawn or cancelled, cancelled → withdrawn. A record
  in any other state is left alone: another step decided first.

  KEYS[1]  the order's reminder record (hash)
  ARGV[1]  the expected states, separated by spaces
  ARGV[2]  the new state
  ARGV[3]  the field that records when, stamped with the Redis clock
  ARGV[4]  more fields to set, as a JSON object of strings ('{}' for none)

  Returns: {case, now, state}
    case   0 moved (state: the one it was in), 1 refused (state: the current one, '' for none)
]]
--- @include "platform/includes/server-time-ms"
local recordKey = KEYS[1]
local expected = ARGV[1]
local nextState = ARGV[2]
local stampField = ARGV[3]
local extra = ARGV[4]

local now = serverTimeMs()
local state = redis.call('HGET', recordKey, 'state')
if not state then return {1, now, ''} end
local allowed = false
for s in string.gmatch(expected, '%S+') do
  if s == state then allowed = true end
end
if not allowed then return {1, now, state} end

local fields = {'state', nextState, stampField, string.format('%d', now)}
for field, value in pairs(cjson.decode(extra)) do
  fields[#fields + 1] = field
  fields[#fields + 1] = value
end
redis.call('HSET', recordKey, unpack(fields))
return {0, now, state}
