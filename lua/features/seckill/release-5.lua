--[[
  Gives a reservation back: on the shard that holds its units, RESERVED ->
  RELEASED and the units return to available, exactly once; on the buyer's
  home shard, the units held against the per-user limit are freed (the
  reservation's own record when it was taken there, or its claim when it was
  taken elsewhere). The reservation leaves the shard's due set. A reservation taken on other shards is released by
  calling this on each of them, then on the home shard. When the shard had nothing left before, the
  product's key is published on ARGV[3], so that instances forget that it
  sold out. A SOLD reservation is never released, and keeps its claim.

  KEYS[1]  the shard's stock hash
  KEYS[2]  the shard's reservations hash
  KEYS[3]  the shard's holds hash
  KEYS[4]  the shard's claims hash
  KEYS[5]  the shard's due set (the reservation, and a claim freed, leave it)
  ARGV[1]  reservation id
  ARGV[2]  account id (whose holds a claim frees)
  ARGV[3]  the restock channel
  ARGV[4]  the message published on it (the product)
  ARGV[5]  1 when the reservation is given back because its whole quantity could not be taken (the record keeps f = 1), else 0

  Returns: {stock, claim, available}
    stock      'RELEASED' now, 'ALREADY' released before, 'SOLD' (refused), 'NONE' not on this shard
    claim      1 when a claim here was freed, else 0
    available  this shard's available units after it

  Durable: money
]]
--- @include "platform/includes/server-time-ms"
--- @include "features/seckill/includes/seckill-shard"
local stockKey = KEYS[1]
local rsvKey = KEYS[2]
local holdsKey = KEYS[3]
local claimsKey = KEYS[4]
local dueKey = KEYS[5]
local rsvId = ARGV[1]
local account = ARGV[2]
local channel = ARGV[3]
local product = ARGV[4]
local failed = ARGV[5] == '1'

local stock = 'NONE'
local raw = redis.call('HGET', rsvKey, rsvId)
if raw then
  redis.call('ZREM', dueKey, rsvId)
  local rec = cjson.decode(raw)
  if rec.s == 'RESERVED' then
    local before = shardNumber(stockKey, 'available')
    -- A part of 0 units (a shard visited and found empty) moves nothing (and -0 is no integer to Redis).
    if rec.q > 0 then
      redis.call('HINCRBY', stockKey, 'available', rec.q)
      redis.call('HINCRBY', stockKey, 'reserved', -rec.q)
      redis.call('HINCRBY', stockKey, 'released', rec.q)
    end
    -- The home shard's record of a reservation taken whole here holds its units against the limit; one taken over
    -- several shards (n) holds them through its claim.
    if rec.h == shardNumber(stockKey, 'shard') and not rec.n then
      if redis.call('HINCRBY', holdsKey, rec.a, -rec.q) <= 0 then redis.call('HDEL', holdsKey, rec.a) end
    end
    rec.s = 'RELEASED'
    rec.t = serverTimeMs()
    if failed then rec.f = 1 end
    redis.call('HSET', rsvKey, rsvId, cjson.encode(rec))
    poolRestocked(channel, product, before, rec.q)
    stock = 'RELEASED'
  elseif rec.s == 'RELEASED' then
    stock = 'ALREADY'
  else
    stock = 'SOLD'
  end
end

local claim = 0
local claimed = stock ~= 'SOLD' and poolUnclaim(claimsKey, rsvId) or 0
if claimed > 0 then
  redis.call('ZREM', dueKey, claimDueMember(rsvId, account))
  if redis.call('HINCRBY', holdsKey, account, -claimed) <= 0 then redis.call('HDEL', holdsKey, account) end
  claim = 1
end
return {stock, claim, shardNumber(stockKey, 'available')}
