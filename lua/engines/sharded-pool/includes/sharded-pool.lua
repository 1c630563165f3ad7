-- Shared piece of the sharded-pool engine's scripts (lua/features/seckill and
-- lua/features/red-envelope), inlined by the script loader: what every shard of a pool
-- does the same way, whatever its units are (a product's stock, a rain's
-- envelopes).
--
-- A pool has a sale window on the Redis clock (startsAt, endsAt, endedAt:
-- epoch ms; endedAt 0 until ops end it early), checked on every shard a
-- request touches. A request that cannot be served whole by the buyer's home
-- shard is first claimed there (the claims hash: one field per request,
-- holding what it claimed), so the per-user limit is counted in one place
-- while its units are taken on other shards; the claim is settled there once
-- the visit is over. A shard that had nothing left and gets units back says
-- so on the pool's restock channel.

--- The window on the Redis clock: nil while open, else NOT_STARTED or ENDED.
local function poolWindowRefusal(startsAt, endsAt, endedAt, now)
  if now < startsAt then return 'NOT_STARTED' end
  if now >= endsAt or endedAt > 0 then return 'ENDED' end
  return nil
end

--- The home shard's claim of a request (nil when there is none).
local function poolClaimOf(claimsKey, field)
  return redis.call('HGET', claimsKey, field)
end

--- Claims a request on the home shard: `value` is what it claimed.
local function poolClaim(claimsKey, field, value)
  redis.call('HSET', claimsKey, field, value)
end

--- Settles a request's claim on the home shard: the claim goes; answers what it had claimed (0 when none).
local function poolUnclaim(claimsKey, field)
  local claimed = tonumber(redis.call('HGET', claimsKey, field) or '0')
  if claimed > 0 then redis.call('HDEL', claimsKey, field) end
  return claimed
end

--- The restock notice: when a shard that had nothing left (`before` <= 0) gets `units` back, the pool's topic is
--- published on the restock channel, so that instances forget they saw the pool sold out.
local function poolRestocked(channel, topic, before, units)
  if before <= 0 and units > 0 then redis.call('PUBLISH', channel, topic) end
end
