--[[
  The reservation's order is paid: RESERVED -> SOLD, its units move from
  reserved to sold (they still count against the buyer's limit), and the
  buyer joins the shard's buyers; the reservation leaves the due set.
  Idempotent.

  KEYS[1]  the shard's stock hash
  KEYS[2]  the shard's reservations hash
  KEYS[3]  the shard's buyers set
  KEYS[4]  the shard's due set (the reservation leaves it)
  ARGV[1]  reservation id
  ARGV[2]  '' or, for a part of a reservation taken over several shards, its attempt (the master's g, 0 for the
           first): a part left by another attempt (given back) is not this reservation's here (NONE)

  Returns: {outcome}  'SOLD' now, 'ALREADY' sold before, 'RELEASED' (refused: it was given back), 'NONE' not here

  Durable: money
]]
--- @include "platform/includes/server-time-ms"
--- @include "features/seckill/includes/seckill-shard"
local stockKey = KEYS[1]
local rsvKey = KEYS[2]
local buyersKey = KEYS[3]
local dueKey = KEYS[4]
local rsvId = ARGV[1]
local attempt = tonumber(ARGV[2] or '')

local raw = redis.call('HGET', rsvKey, rsvId)
if not raw then return {'NONE'} end
local rec = cjson.decode(raw)
if attempt and (rec.g or 0) ~= attempt then return {'NONE'} end
redis.call('ZREM', dueKey, rsvId)
if rec.s == 'SOLD' then return {'ALREADY'} end
if rec.s == 'RELEASED' then return {'RELEASED'} end
if rec.q > 0 then
  redis.call('HINCRBY', stockKey, 'reserved', -rec.q)
  redis.call('HINCRBY', stockKey, 'sold', rec.q)
end
rec.s = 'SOLD'
rec.t = serverTimeMs()
redis.call('HSET', rsvKey, rsvId, cjson.encode(rec))
redis.call('SADD', buyersKey, rec.a)
sameExpiry(stockKey, buyersKey)
return {'SOLD'}
