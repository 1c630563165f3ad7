-- Shared piece, inlined by the script loader: the Redis server's clock in ms.
-- Scripts use it wherever ordering or expiry matters, never the caller's clock.
local function serverTimeMs()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

--- The same clock read once as ms, as µs, and as µs in exact decimal digits (past 2^31: no %g
--- rounding), for scripts that need the finer clock too (lock fencing tokens).
local function serverTimeMsAndUs()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000), tonumber(t[1]) * 1000000 + tonumber(t[2]), t[1] .. string.sub('00000' .. t[2], -6)
end
