--[[
  Creates a master order once per (merchant, merchantOrderNo), with its number
  index entry and its order.created event, in one step. The order's id is
  random (the caller draws it), so nobody can derive it from the merchant and
  the number; the index entry (KEYS[1]) names the order, and an order stored
  before the index had its number key as its id (KEYS[2]). When either names an
  order already, nothing is written and its id is answered. Field values are
  stored exactly as given; the clock fields come in a list of their own.

  KEYS[1]  the number index entry: the id of the order of (merchant, merchantOrderNo)
  KEYS[2]  the order hash at the number key (an order stored before the index)
  KEYS[3]  the new order's hash (its id is ARGV[1])
  KEYS[4]  the shard's events stream
  ARGV[1]  the new order's id
  ARGV[2]  its id when stored before the index (the number key)
  ARGV[3]  order fields, a JSON object of strings, each stored verbatim
  ARGV[4]  approximate most entries kept in the events stream
  ARGV[5]  retention, ms (TTL of the order and of its index entry)
  ARGV[6]  n: how many order fields take the Redis clock
  ARGV[7]  then n pairs: field name, ms added to the Redis clock (a decimal integer >= 0)

  Returns: {case, orderId, orderVersion, now}
    case          0 created; 1 EXISTS (an order of this number exists: nothing written)
    orderId       the order's id (the new one, or the existing order's)
    orderVersion  1 when created; 0 when it existed
    now           the Redis clock, epoch ms

  Durable: money
]]
--- @include "platform/includes/server-time-ms"
--- @include "features/orders/includes/order-record"
local indexKey = KEYS[1]
local legacyOrderKey = KEYS[2]
local orderKey = KEYS[3]
local eventsKey = KEYS[4]
local orderId = ARGV[1]
local legacyOrderId = ARGV[2]
local fields = ARGV[3]
local eventsMaxLen = ARGV[4]
local retentionMs = tonumber(ARGV[5])
local clockCount = tonumber(string.match(ARGV[6] or '', '^%d+$'))
local CLOCK_PAIRS_FROM = 7
local CREATED, EXISTS = 0, 1

local now = serverTimeMs()
local clockSets, clockError = orderClockFields(ARGV, CLOCK_PAIRS_FROM, {clockCount}, 1, now)
if not clockSets then return clockError end

local indexed = redis.call('GET', indexKey)
if indexed then return {EXISTS, indexed, 0, now} end
if redis.call('EXISTS', legacyOrderKey) == 1 then return {EXISTS, legacyOrderId, 0, now} end

local set = {'version', '1', 'updatedAt', string.format('%d', now)}
for field, value in pairs(cjson.decode(fields)) do
  set[#set + 1] = field
  set[#set + 1] = value
end
for _, v in ipairs(clockSets[1]) do set[#set + 1] = v end
redis.call('HSET', orderKey, unpack(set))
redis.call('PEXPIRE', orderKey, retentionMs)
redis.call('SET', indexKey, orderId, 'PX', retentionMs)
appendOrderEvent(orderKey, eventsKey, 'order.created', eventsMaxLen, now)
return {CREATED, orderId, 1, now}
