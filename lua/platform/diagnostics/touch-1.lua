--[[
  Records one visit by a caller: increments its counter and stamps the
  Redis server time. The smallest realistic script; the foundation uses it
  for the smoke endpoint, the cluster test and the http-floor benchmark.

  KEYS[1]  the caller's visit hash (fields: n, at)
  ARGV[1]  time to live of the hash in milliseconds (integer >= 1)

  Returns: {count, serverTimeMs}
    count         visits so far, including this one
    serverTimeMs  the Redis server clock when this visit was recorded
]]
--- @include "platform/includes/server-time-ms"
local visitsKey = KEYS[1]
local ttlMs = ARGV[1]
local now = serverTimeMs()
local n = redis.call('HINCRBY', visitsKey, 'n', 1)
redis.call('HSET', visitsKey, 'at', now)
redis.call('PEXPIRE', visitsKey, ttlMs)
return {n, now}
