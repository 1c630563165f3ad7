--[[
  Leases up to ARGV[3] requests from a caller's fixed-window rate limit. The
  window starts at the caller's first request and lasts ARGV[2] ms (PEXPIRE),
  so the state is one small key per active caller and it cleans itself up.
  The counter counts every request granted to any instance, so the limit
  holds across instances; an instance spends its lease locally.

  KEYS[1]  the caller's window counter (string)
  ARGV[1]  limit: requests allowed per window (integer >= 1)
  ARGV[2]  window length in milliseconds (integer >= 1)
  ARGV[3]  requests wanted now (integer >= 1)

  Returns: {granted, remaining, resetMs}
    granted   requests granted, 0 .. ARGV[3] (0 = over the limit)
    remaining requests left in this window after this grant
    resetMs   milliseconds until the window ends
]]
local counterKey = KEYS[1]
local limit = tonumber(ARGV[1])
local window = tonumber(ARGV[2])
local want = tonumber(ARGV[3])
local used = tonumber(redis.call('GET', counterKey) or '0')
local ttl = redis.call('PTTL', counterKey)
if ttl < 0 then
  -- New window, or a counter that lost its expiry (which would block the caller for good).
  ttl = window
  if used > 0 then
    redis.call('PEXPIRE', counterKey, ttl)
  end
end
local granted = math.min(want, limit - used)
if granted <= 0 then
  return {0, 0, ttl}
end
redis.call('INCRBY', counterKey, granted)
redis.call('PEXPIRE', counterKey, ttl)
return {granted, limit - used - granted, ttl}
