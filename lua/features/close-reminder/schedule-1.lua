--[[
  Decides an order's close reminder when its order.created event is handled,
  once per order: due at the close minus the merchant's lead; when that moment
  has already passed, due now if at least the minimum margin is left before
  the close, otherwise skipped as too late. An order already decided (scheduled,
  sent, cancelled because its paid or closed event came first, ...) keeps its
  state: events arrive late, twice and out of order, and only the first
  decision counts.

  KEYS[1]  the order's reminder record (hash)
  ARGV[1]  merchant id
  ARGV[2]  the order's close time, epoch ms (Redis clock)
  ARGV[3]  the merchant's lead, ms
  ARGV[4]  least time left before the close for a reminder sent late, ms
  ARGV[5]  the order's version as read
  ARGV[6]  how long the record is kept after the close, ms

  Returns: {case, dueAt, now, state}
    case  0 scheduled now (dueAt), 1 already scheduled (dueAt: make sure the queue has it),
          2 skipped: too late (recorded), 3 already past scheduling (state says where)
]]
--- @include "platform/includes/server-time-ms"
local recordKey = KEYS[1]
local merchantId = ARGV[1]
local expiresAt = tonumber(ARGV[2])
local leadMs = tonumber(ARGV[3])
local minLeftMs = tonumber(ARGV[4])
local orderVersion = ARGV[5]
local keepMs = tonumber(ARGV[6])

local now = serverTimeMs()
local state, dueAt = unpack(redis.call('HMGET', recordKey, 'state', 'dueAt'))
if state == 'scheduled' then return {1, tonumber(dueAt), now, state} end
if state then return {3, 0, now, state} end

local due = expiresAt - leadMs
local fields = {'merchantId', merchantId, 'expiresAt', string.format('%d', expiresAt), 'leadMs', string.format('%d', leadMs),
  'orderVersion', orderVersion}
local case = 0
if due <= now then
  if expiresAt - now >= minLeftMs then
    due = now
  else
    case = 2
  end
end
if case == 0 then
  for _, v in ipairs({'state', 'scheduled', 'dueAt', string.format('%d', due), 'scheduledAt', string.format('%d', now)}) do fields[#fields + 1] = v end
else
  for _, v in ipairs({'state', 'skipped', 'reason', 'too-late', 'skippedAt', string.format('%d', now)}) do fields[#fields + 1] = v end
end
redis.call('HSET', recordKey, unpack(fields))
redis.call('PEXPIREAT', recordKey, math.max(expiresAt, now) + keepMs)
return {case, case == 0 and due or 0, now, case == 0 and 'scheduled' or 'skipped'}
