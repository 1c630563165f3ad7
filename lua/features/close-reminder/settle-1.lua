--[[
  An order's paid or closed event reached the close reminders: a scheduled
  reminder is cancelled (the caller then cancels its queue entry, and withdraws
  whatever a send already under way may write), and a sent one is to be
  withdrawn from the payer's inbox (withdrawing, then withdrawn by
  transition-1.lua once the message center confirms). With no record yet (the
  event overtook its order.created), a cancelled record is left for opted-in
  merchants, so that the late order.created schedules nothing. The highest
  order version seen is kept.

  KEYS[1]  the order's reminder record (hash)
  ARGV[1]  what happened: paid or closed
  ARGV[2]  the order's version after it
  ARGV[3]  1 to leave a cancelled record when there is none, 0 not to
  ARGV[4]  merchant id
  ARGV[5]  the order's close time, epoch ms
  ARGV[6]  how long the record is kept after the close, ms
  ARGV[7]  the order's payer from the event ('' when it has none)

  Returns: {case, previous state, payer, now}
    case  0 cancelled (nothing was sent; previous '' when there was no record),
          1 to withdraw (previous sent or withdrawing), 2 already final, 3 nothing to do (no record)
]]
--- @include "platform/includes/server-time-ms"
local recordKey = KEYS[1]
local cause = ARGV[1]
local orderVersion = tonumber(ARGV[2])
local leaveRecord = ARGV[3] == '1'
local merchantId = ARGV[4]
local expiresAt = tonumber(ARGV[5])
local keepMs = tonumber(ARGV[6])
local eventPayer = ARGV[7]

local now = serverTimeMs()
local nowText = string.format('%d', now)
local state, payer, seenVersion = unpack(redis.call('HMGET', recordKey, 'state', 'payer', 'orderVersion'))
payer = payer or ''
if payer == '' then payer = eventPayer end

if not state then
  if not leaveRecord then return {3, '', payer, now} end
  redis.call('HSET', recordKey, 'state', 'cancelled', 'cause', cause, 'cancelledAt', nowText, 'merchantId', merchantId,
    'expiresAt', string.format('%d', expiresAt), 'orderVersion', string.format('%d', orderVersion))
  redis.call('PEXPIREAT', recordKey, math.max(expiresAt, now) + keepMs)
  return {0, '', payer, now}
end

if not seenVersion or tonumber(seenVersion) < orderVersion then
  redis.call('HSET', recordKey, 'orderVersion', string.format('%d', orderVersion))
end
if state == 'scheduled' then
  redis.call('HSET', recordKey, 'state', 'cancelled', 'cause', cause, 'cancelledAt', nowText)
  return {0, state, payer, now}
end
if state == 'sent' then
  redis.call('HSET', recordKey, 'state', 'withdrawing', 'cause', cause, 'payer', payer)
  return {1, state, payer, now}
end
if state == 'withdrawing' then return {1, state, payer, now} end
return {2, state, payer, now}
