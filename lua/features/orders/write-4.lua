--[[
  The one state write of master orders and payment plans: a compare-and-set
  that refuses lost updates and stale lock holders. It applies the field
  updates to the order and/or the plan only when each record written still
  has the version the caller read (optimistic locking; 0 means the record must
  not exist yet, and creates it) and the caller's fencing token is at least the
  highest one recorded on the record its lock guards (ARGV[1]). Then it bumps
  the version of each record written, records the token, renews the
  retention TTL (the order's too when only its plan is written, so a plan
  never outlives its order) and appends the event, if any, to the shard's
  stream: all in one step, so an event exists exactly when its state change
  does. Field values are stored exactly as given; the fields that take the
  Redis clock come in a list of their own (ARGV[11] on), so no value is ever
  interpreted. The order's number index entry (KEYS[4]) is renewed with the
  order while it names this order, so a merchantOrderNo finds its order as long
  as the order is kept.

  KEYS[1]  order hash
  KEYS[2]  plan hash
  KEYS[3]  the shard's events stream
  KEYS[4]  the order's number index entry (a key never written for an order stored before the index)
  ARGV[1]  the lock the caller holds: order (token kept on KEYS[1]), plan (on KEYS[2]) or '' (none: creation)
  ARGV[2]  the caller's fencing token (0 with no lock)
  ARGV[3]  expected order version, or '' when the order is not written
  ARGV[4]  order field updates, a JSON object of strings ('{}' none), each stored verbatim
  ARGV[5]  expected plan version, or '' when the plan is not written
  ARGV[6]  plan field updates, as ARGV[4]
  ARGV[7]  event type to append ('' none); the event carries the order's public fields after the write
  ARGV[8]  approximate most entries kept in the events stream
  ARGV[9]  deadline, epoch ms: refuse once the Redis clock has reached it ('' none)
  ARGV[10]  retention, ms (TTL of every record written)
  ARGV[11]  n: how many order fields take the Redis clock
  ARGV[12]  m: how many plan fields take the Redis clock
  ARGV[13]  then n pairs for the order and m pairs for the plan: field name, ms added to the
            Redis clock (a decimal integer >= 0); the field is set to that time, epoch ms

  Returns: {case, orderVersion, planVersion, now}
    case          0 written; 1 VERSION (a record's version is not the expected one: it changed since it
                  was read); 2 STALE_TOKEN (a newer holder of the lock has written); 3 EXPIRED (the
                  deadline has passed). Nothing is written unless 0.
    orderVersion  the order's version after the call (0 when it does not exist)
    planVersion   the plan's version after the call
    now           the Redis clock, epoch ms

  Durable: money
]]
--- @include "platform/includes/server-time-ms"
--- @include "engines/locks/includes/fencing"
--- @include "features/orders/includes/order-record"
local orderKey = KEYS[1]
local planKey = KEYS[2]
local eventsKey = KEYS[3]
local indexKey = KEYS[4]
local lockHeld = ARGV[1]
local token = tonumber(ARGV[2])
local expectedOrderVersion = ARGV[3]
local orderUpdates = ARGV[4]
local expectedPlanVersion = ARGV[5]
local planUpdates = ARGV[6]
local eventType = ARGV[7]
local eventsMaxLen = ARGV[8]
local deadline = ARGV[9]
local retentionMs = tonumber(ARGV[10])
local orderClockCount = tonumber(string.match(ARGV[11] or '', '^%d+$'))
local planClockCount = tonumber(string.match(ARGV[12] or '', '^%d+$'))
local CLOCK_PAIRS_FROM = 13
local WRITTEN, VERSION, STALE_TOKEN, EXPIRED = 0, 1, 2, 3

local now = serverTimeMs()

-- The clock fields of the order (1) and the plan (2) as HSET arguments, checked before anything is written.
local clockSets, clockError = orderClockFields(ARGV, CLOCK_PAIRS_FROM, {orderClockCount, planClockCount}, 2, now)
if not clockSets then return clockError end
local function version(key) return tonumber(redis.call('HGET', key, 'version') or '0') end
local orderVersion, planVersion = version(orderKey), version(planKey)
local function reply(case) return {case, orderVersion, planVersion, now} end

if deadline ~= '' and now >= tonumber(deadline) then return reply(EXPIRED) end
if expectedOrderVersion ~= '' and tonumber(expectedOrderVersion) ~= orderVersion then return reply(VERSION) end
if expectedPlanVersion ~= '' and tonumber(expectedPlanVersion) ~= planVersion then return reply(VERSION) end

-- The record the caller's lock guards: its fence decides, and it must be among the records written.
local records = {
  {key = orderKey, expected = expectedOrderVersion, updates = orderUpdates},
  {key = planKey, expected = expectedPlanVersion, updates = planUpdates},
}
local guarded = nil
if lockHeld == 'order' then guarded = 1 elseif lockHeld == 'plan' then guarded = 2 end
if guarded then
  if records[guarded].expected == '' then return redis.error_reply('ERR the record the lock guards must be written') end
  if fenceRefuses(records[guarded].key, token) then return reply(STALE_TOKEN) end
end

local function apply(i)
  local r = records[i]
  if r.expected == '' then return nil end
  local set = {'version', tostring(tonumber(r.expected) + 1), 'updatedAt', string.format('%d', now)}
  if guarded == i then
    local field, value = fenceField(token)
    set[#set + 1] = field
    set[#set + 1] = value
  end
  for field, value in pairs(cjson.decode(r.updates)) do
    set[#set + 1] = field
    set[#set + 1] = value
  end
  for _, v in ipairs(clockSets[i]) do set[#set + 1] = v end
  redis.call('HSET', r.key, unpack(set))
  redis.call('PEXPIRE', r.key, retentionMs)
  return tonumber(r.expected) + 1
end
orderVersion = apply(1) or orderVersion
planVersion = apply(2) or planVersion
-- A plan written alone renews its order's retention too, so a plan never outlives its order.
if expectedOrderVersion == '' and expectedPlanVersion ~= '' then redis.call('PEXPIRE', orderKey, retentionMs) end
-- The number index lives as long as the order it names (never an earlier order's, nor a later one's).
local indexed = redis.call('GET', indexKey)
if indexed and indexed == redis.call('HGET', orderKey, 'orderId') then redis.call('PEXPIRE', indexKey, retentionMs) end

if eventType ~= '' then appendOrderEvent(orderKey, eventsKey, eventType, eventsMaxLen, now) end
return reply(WRITTEN)
