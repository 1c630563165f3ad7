--[[
  Extends an owner's lease (the watchdog, or an HTTP caller's renew) to at
  least now + ARGV[2]. It never shortens it: the watchdog of a nested hold
  with a shorter lease must not cut the outer hold's lease.

  KEYS[1]  lock hash
  ARGV[1]  owner token
  ARGV[2]  lease from now, ms

  Returns: the lease end after the call (epoch ms, Redis clock);
           -1 (NOT_FOUND) when the owner does not hold the lock (its lease already ended: lost)
]]
--- @include "platform/includes/server-time-ms"
--- @include "engines/locks/includes/lock-holders"
local holdersKey = KEYS[1]
local owner = ARGV[1]
local leaseMs = tonumber(ARGV[2])

local nowMs = serverTimeMs()
local _, maxExp, _, ww = purgeExpired(holdersKey, nowMs)
if not redis.call('HGET', holdersKey, 'c:' .. owner) then return -1 end
local exp = math.max(nowMs + leaseMs, tonumber(redis.call('HGET', holdersKey, 'e:' .. owner)))
redis.call('HSET', holdersKey, 'e:' .. owner, exp)
expireAt(holdersKey, math.max(maxExp, exp, ww), nowMs)
return exp
