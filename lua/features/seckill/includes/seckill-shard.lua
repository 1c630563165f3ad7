-- Shared piece of the lua/features/seckill scripts, inlined by the script loader: one
-- product shard's stock hash and reservation records.
--
-- The stock hash holds initial, available, reserved, sold and released (units
-- given back), the sale window (startsAt, endsAt, endedAt: epoch ms on the
-- Redis clock, endedAt 0 until ops end the sale early), the per-user limit,
-- the shard's index, the activity generation (gen) and expireAt (when the live
-- keys go, epoch ms). Invariant: initial = available + reserved + sold.
--
-- A reservation record (the rsv hash, by reservation id) is JSON:
--   s state (RESERVED, SOLD, RELEASED), a account, q quantity (the units on this shard),
--   e expires at, h the buyer's home shard, c created at, t settled at
-- A reservation taken over several shards has a record on each shard it visited (q: the units it took there,
-- possibly 0), with n its whole quantity; the one on the home shard (its master) also has p, the other shards
-- in the order they are visited (comma-separated), and f = 1 once it was given back because the whole
-- quantity could not be met. A fresh attempt of a request given back that way writes g (its attempt, 1..) on its
-- master and on every part it takes, so that parts left by the earlier attempt are told apart.
--
-- The due set (a zset on the same slot) holds every RESERVED reservation of
-- the shard, scored by its expiry: it is written in the same step that takes
-- the units and emptied in the step that sells or releases them, so the
-- safety net's sweep finds every reservation left unsettled, whatever
-- happened to the process that made it. A claim (units held on the home
-- shard for a reservation taken on another one) is there too, as
-- c|<reservation id>|<account>, until it is freed.
--- @include "engines/sharded-pool/includes/sharded-pool"

--- A claim's member in the due set.
local function claimDueMember(rsvId, account)
  return 'c|' .. rsvId .. '|' .. account
end

local function shardNumber(stockKey, field)
  return tonumber(redis.call('HGET', stockKey, field) or '0')
end

--- What a reservation reads of the stock hash, in one call; nil when the shard is not loaded.
local function shardState(stockKey)
  local v = redis.call('HMGET', stockKey, 'startsAt', 'endsAt', 'endedAt', 'limit', 'available', 'shard', 'expireAt')
  if not v[1] then return nil end
  return {
    startsAt = tonumber(v[1]), endsAt = tonumber(v[2]), endedAt = tonumber(v[3] or '0'), limit = tonumber(v[4] or '0'),
    available = tonumber(v[5] or '0'), shard = tonumber(v[6] or '0'), expireAt = v[7],
  }
end

--- The sale window on the Redis clock (the engine's): nil while open, else NOT_STARTED or ENDED.
local function windowRefusal(st, now)
  return poolWindowRefusal(st.startsAt, st.endsAt, st.endedAt, now)
end

--- Gives a key the shard's expiry (the live keys go together); `at` is the stock hash's expireAt.
local function expireWith(at, key)
  if at then redis.call('PEXPIREAT', key, at) end
end

--- Gives a key the shard's expiry, read from the stock hash.
local function sameExpiry(stockKey, key)
  expireWith(redis.call('HGET', stockKey, 'expireAt'), key)
end

--- Takes the record's `q` units (0 or more), records it, and (with `due`) puts it in the due set; returns the record.
local function takeUnits(st, stockKey, rsvKey, dueKey, rsvId, rec, due)
  if rec.q > 0 then
    redis.call('HINCRBY', stockKey, 'available', -rec.q)
    redis.call('HINCRBY', stockKey, 'reserved', rec.q)
  end
  redis.call('HSET', rsvKey, rsvId, cjson.encode(rec))
  expireWith(st.expireAt, rsvKey)
  if due then
    redis.call('ZADD', dueKey, rec.e, rsvId)
    expireWith(st.expireAt, dueKey)
  end
  return rec
end

--- Takes `qty` units, records the reservation (with its order's id `orderId`, when not '') and puts it in the due set;
--- returns the record.
local function takeStock(st, stockKey, rsvKey, dueKey, rsvId, account, qty, expiresAt, home, now, orderId)
  local rec = {s = 'RESERVED', a = account, q = qty, e = expiresAt, h = home, c = now, t = 0}
  if orderId ~= '' then rec.o = orderId end
  return takeUnits(st, stockKey, rsvKey, dueKey, rsvId, rec, true)
end
