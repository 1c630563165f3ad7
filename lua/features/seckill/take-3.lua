--[[
  One shard's part of a reservation taken over several shards (the home
  shard had too little; reserve-5.lua claimed the whole quantity there and
  named the shards to visit): takes what this shard has, up to the units
  still needed, and records it, even when that is nothing. The first visit
  decides the shard's part for good: a later copy of the request finds the
  record (EXISTING) and counts the same part, so every copy adds up the
  same parts. Refused, it writes nothing.

  KEYS[1]  this shard's stock hash
  KEYS[2]  this shard's reservations hash
  KEYS[3]  this shard's due set (a part of 1 or more units enters it)
  ARGV[1]  reservation id
  ARGV[2]  account id
  ARGV[3]  units still needed (1..)
  ARGV[4]  the reservation's expiry, epoch ms (its master record's)
  ARGV[5]  the buyer's home shard index
  ARGV[6]  the reservation's whole quantity
  ARGV[7]  the attempt (its master record's g, 0 for the first): a part given back by an earlier attempt is taken
           anew; a part of another attempt is answered EXISTING as it is (the caller counts it for nothing)

  Returns: {'TAKEN', units taken here (0..), available left} | {'EXISTING', record JSON} |
           {'EXPIRED'} (the reservation expired before this part was taken) | {'NOT_STARTED'} | {'ENDED'} | {'NO_PRODUCT'}

  Durable: money
]]
--- @include "platform/includes/server-time-ms"
--- @include "features/seckill/includes/seckill-shard"
local stockKey = KEYS[1]
local rsvKey = KEYS[2]
local dueKey = KEYS[3]
local rsvId = ARGV[1]
local account = ARGV[2]
local need = tonumber(ARGV[3])
local expiresAt = tonumber(ARGV[4])
local home = tonumber(ARGV[5])
local total = tonumber(ARGV[6])
local attempt = tonumber(ARGV[7] or '0') or 0

local st = shardState(stockKey)
if not st then return {'NO_PRODUCT'} end
local existing = redis.call('HGET', rsvKey, rsvId)
if existing then
  local was = cjson.decode(existing)
  if not (was.s == 'RELEASED' and (was.g or 0) < attempt) then return {'EXISTING', existing} end
end
local now = serverTimeMs()
local refusal = windowRefusal(st, now)
if refusal then return {refusal} end
if now >= expiresAt then return {'EXPIRED'} end
local part = math.max(0, math.min(need, st.available))
local rec = {s = 'RESERVED', a = account, q = part, n = total, e = expiresAt, h = home, c = now, t = 0}
if attempt > 0 then rec.g = attempt end
takeUnits(st, stockKey, rsvKey, dueKey, rsvId, rec, part > 0)
return {'TAKEN', part, st.available - part}
