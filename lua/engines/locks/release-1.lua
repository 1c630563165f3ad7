--[[
  Gives back one hold of an owner. At a count of 0 the owner's fields go; when
  no holder is left the hash is deleted (a waiting writer's mark is kept) and
  a release message is published for waiters. With no waiter mark (q: left by
  an acquire that waits) and no waiting writer, nobody is listening and
  nothing is published.

  KEYS[1]  lock hash
  ARGV[1]  owner token
  ARGV[2]  release channel

  Returns: the owner's remaining hold count (0: it no longer holds the lock);
           -1 (NOT_FOUND) when the owner does not hold it (never did, or its lease ended)
]]
--- @include "platform/includes/server-time-ms"
--- @include "engines/locks/includes/lock-holders"
local holdersKey = KEYS[1]
local owner = ARGV[1]
local releaseChannel = ARGV[2]

local count = tonumber(redis.call('HGET', holdersKey, 'c:' .. owner) or '0')
-- The common cases first: the only holder (mode and its three fields; the key's TTL is its lease,
-- so the key existing means the lease has not ended) with one hold, no writer waiting, and
-- either nobody waiting (no message) or waiters (the q mark).
if count == 1 then
  local n = redis.call('HLEN', holdersKey)
  if n == 4 then
    redis.call('DEL', holdersKey)
    return 0
  end
  if n == 5 and redis.call('HEXISTS', holdersKey, 'q') == 1 then
    redis.call('DEL', holdersKey)
    redis.call('PUBLISH', releaseChannel, owner)
    return 0
  end
end

local nowMs = serverTimeMs()
if count == 0 or tonumber(redis.call('HGET', holdersKey, 'e:' .. owner)) <= nowMs then
  purgeExpired(holdersKey, nowMs)
  return -1
end
if count > 1 then return redis.call('HINCRBY', holdersKey, 'c:' .. owner, -1) end

local live, _, _, ww = purgeExpired(holdersKey, nowMs)

redis.call('HDEL', holdersKey, 'c:' .. owner, 'e:' .. owner, 't:' .. owner)
if live > 1 then
  -- Other readers still hold it: the key lives as long as the longest of their leases.
  local rest = 0
  local flat = redis.call('HGETALL', holdersKey)
  for i = 1, #flat, 2 do
    if string.sub(flat[i], 1, 2) == 'e:' then rest = math.max(rest, tonumber(flat[i + 1])) end
  end
  expireAt(holdersKey, math.max(rest, ww), nowMs)
  return 0
end
redis.call('DEL', holdersKey)
if ww > nowMs then
  redis.call('HSET', holdersKey, 'ww', ww)
  expireAt(holdersKey, ww, nowMs)
end
redis.call('PUBLISH', releaseChannel, owner)
return 0
