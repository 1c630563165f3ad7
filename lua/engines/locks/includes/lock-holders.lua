-- Shared piece, inlined by the script loader: the holders of one lock hash (holdersKey).
-- Fields: mode ('w' | 'r'), ww (a waiting writer's deadline, ms), q (somebody waits: publish
-- the release; set by a waiting acquire, gone with the hash), and per owner
-- c:<owner> (hold count), e:<owner> (lease end, ms), t:<owner> (fencing token).
-- An owner whose lease has ended is no holder: purgeExpired() removes it.

--- Removes holders whose lease ended before nowMs. Returns {live holders, latest lease end, mode, ww}.
local function purgeExpired(holdersKey, nowMs)
  local flat = redis.call('HGETALL', holdersKey)
  local live, maxExp, mode, ww = 0, 0, false, 0
  for i = 1, #flat, 2 do
    local f, v = flat[i], flat[i + 1]
    if string.sub(f, 1, 2) == 'e:' then
      local exp = tonumber(v)
      if exp <= nowMs then
        local o = string.sub(f, 3)
        redis.call('HDEL', holdersKey, f, 'c:' .. o, 't:' .. o)
      else
        live = live + 1
        if exp > maxExp then maxExp = exp end
      end
    elseif f == 'mode' then
      mode = v
    elseif f == 'ww' then
      ww = tonumber(v)
    end
  end
  return live, maxExp, mode, ww
end

--- The key lives as long as its longest lease (or a waiting writer's mark).
local function expireAt(holdersKey, untilMs, nowMs)
  redis.call('PEXPIRE', holdersKey, math.max(1, untilMs - nowMs))
end
