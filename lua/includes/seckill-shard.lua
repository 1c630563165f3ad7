-- Shared piece of the lua/seckill scripts, inlined by the script loader: one
-- product shard's stock hash and reservation records.
--
-- The stock hash holds initial, available, reserved, sold and released (units
-- given back), the sale window (startsAt, endsAt, endedAt: epoch ms on the
-- Redis clock, endedAt 0 until ops end the sale early), the per-user limit,
-- the shard's index, the activity generation (gen) and expireAt (when the live
-- keys go, epoch ms). Invariant: initial = available + reserved + sold.
--
-- A reservation record (the rsv hash, by reservation id) is JSON:
--   s state (RESERVED, SOLD, RELEASED), a account, q quantity,
--   e expires at, h the buyer's home shard, c created at, t settled at

local function shardNumber(stockKey, field)
  return tonumber(redis.call('HGET', stockKey, field) or '0')
end

--- The sale window on the Redis clock: nil while open, else NOT_STARTED or ENDED.
local function windowRefusal(stockKey, now)
  local w = redis.call('HMGET', stockKey, 'startsAt', 'endsAt', 'endedAt')
  if now < tonumber(w[1]) then return 'NOT_STARTED' end
  if now >= tonumber(w[2]) or tonumber(w[3]) > 0 then return 'ENDED' end
  return nil
end

--- Gives a key the shard's expiry (the live keys go together).
local function sameExpiry(stockKey, key)
  local at = redis.call('HGET', stockKey, 'expireAt')
  if at then redis.call('PEXPIREAT', key, at) end
end

--- Takes `qty` units and records the reservation; returns the record.
local function takeStock(stockKey, rsvKey, rsvId, account, qty, expiresAt, home, now)
  redis.call('HINCRBY', stockKey, 'available', -qty)
  redis.call('HINCRBY', stockKey, 'reserved', qty)
  local rec = {s = 'RESERVED', a = account, q = qty, e = expiresAt, h = home, c = now, t = 0}
  redis.call('HSET', rsvKey, rsvId, cjson.encode(rec))
  sameExpiry(stockKey, rsvKey)
  return rec
end
