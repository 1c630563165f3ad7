--[[
  Moves an order's close reminder from one of the expected states to the
  next, atomically, stamping when: scheduled → sent or skipped when it comes
  due, withdrawing → withdrawn or cancelled. A record in any other state is left alone: another
  step (the order's paid or closed event) decided first.

  KEYS[1]  the order's reminder record (hash)
  ARGV[1]  the expected states, separated by spaces
  ARGV[2]  the new state
  ARGV[3]  the field that records when, stamped with the Redis clock ('' for none)
  ARGV[4]  more fields to set, as a JSON object of strings ('{}' for none)

  Returns: {case, now, state, merchantId, dueAt, expiresAt, payer, msgId}
    case   0 moved (state: the one it was in), 1 refused (state: the current one, '' for none)
    the other fields are the record's after the call ('' when absent)
]]
--- @include "includes/server-time-ms"
local recordKey = KEYS[1]
local expected = ARGV[1]
local nextState = ARGV[2]
local stampField = ARGV[3]
local extra = ARGV[4]

local now = serverTimeMs()
local function view(case, state)
  local r = redis.call('HMGET', recordKey, 'merchantId', 'dueAt', 'expiresAt', 'payer', 'msgId')
  local out = {case, now, state}
  for i = 1, 5 do out[#out + 1] = r[i] or '' end
  return out
end

local state = redis.call('HGET', recordKey, 'state')
if not state then return view(1, '') end
local allowed = false
for s in string.gmatch(expected, '%S+') do
  if s == state then allowed = true end
end
if not allowed then return view(1, state) end

local fields = {'state', nextState}
if stampField ~= '' and not (state == nextState and redis.call('HEXISTS', recordKey, stampField) == 1) then
  fields[#fields + 1] = stampField
  fields[#fields + 1] = string.format('%d', now)
end
for field, value in pairs(cjson.decode(extra)) do
  fields[#fields + 1] = field
  fields[#fields + 1] = value
end
redis.call('HSET', recordKey, unpack(fields))
return view(0, state)
