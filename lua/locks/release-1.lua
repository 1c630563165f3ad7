--[[
  Gives back one hold of an owner. At a count of 0 the owner's fields go; when
  no holder is left the hash is deleted (a waiting writer's mark is kept) and
  a release message is published for waiters.

  KEYS[1]  lock hash
  ARGV[1]  owner token
  ARGV[2]  release channel

  Returns: the owner's remaining hold count (0: it no longer holds the lock);
           -1 (NOT_FOUND) when the owner does not hold it (never did, or its lease ended)
]]
--- @include "includes/server-time-ms"
--- @include "includes/lock-holders"
local nowMs = serverTimeMs()
local owner = ARGV[1]
local live, maxExp, _, ww = purgeExpired(nowMs)
local count = tonumber(redis.call('HGET', KEYS[1], 'c:' .. owner) or '0')
if count == 0 then return -1 end
if count > 1 then return redis.call('HINCRBY', KEYS[1], 'c:' .. owner, -1) end

redis.call('HDEL', KEYS[1], 'c:' .. owner, 'e:' .. owner, 't:' .. owner)
if live > 1 then
  -- Other readers still hold it: the key lives as long as the longest of their leases.
  local rest = 0
  local flat = redis.call('HGETALL', KEYS[1])
  for i = 1, #flat, 2 do
    if string.sub(flat[i], 1, 2) == 'e:' then rest = math.max(rest, tonumber(flat[i + 1])) end
  end
  expireAt(math.max(rest, ww), nowMs)
  return 0
end
redis.call('DEL', KEYS[1])
if ww > nowMs then
  redis.call('HSET', KEYS[1], 'ww', ww)
  expireAt(ww, nowMs)
end
redis.call('PUBLISH', ARGV[2], owner)
return 0
