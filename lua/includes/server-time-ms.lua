-- Shared piece, inlined by the script loader: the Redis server's clock in ms.
-- Scripts use it wherever ordering or expiry matters, never the caller's clock.
local function serverTimeMs()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
