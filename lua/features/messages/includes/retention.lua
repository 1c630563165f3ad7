-- Shared piece, inlined by the script loader: retention of a sorted set whose scores grow with
-- time (a sequence or a timestamp).
--
-- dropOld(zsetKey, floorScore, batch, drop): calls drop(member, score) for up to `batch` members
--   scored below floorScore (past the retention time), oldest first.
-- dropExcess(zsetKey, maxCount, batch, drop): then for up to `batch` of the oldest members beyond
--   the newest maxCount.
-- `drop` removes the member from the set and whatever else belongs to it; at most `batch` per
-- call keeps every call bounded, and the next write carries on.
local function dropOld(zsetKey, floorScore, batch, drop)
  local old = redis.call('ZRANGEBYSCORE', zsetKey, '-inf', '(' .. string.format('%d', floorScore), 'WITHSCORES', 'LIMIT', 0, batch)
  for i = 1, #old, 2 do drop(old[i], tonumber(old[i + 1])) end
end

local function dropExcess(zsetKey, maxCount, batch, drop)
  local excess = redis.call('ZCARD', zsetKey) - maxCount
  if excess <= 0 then return end
  local oldest = redis.call('ZRANGE', zsetKey, 0, math.min(excess, batch) - 1, 'WITHSCORES')
  for i = 1, #oldest, 2 do drop(oldest[i], tonumber(oldest[i + 1])) end
end
