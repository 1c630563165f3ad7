--[[
  Counts one request against a caller's fixed-window rate limit. The window
  starts at the caller's first request and lasts ARGV[2] ms (PEXPIRE), so the
  state is one small key per active caller and it cleans itself up.

  KEYS[1]  the caller's window counter (string)
  ARGV[1]  limit: requests allowed per window (integer >= 1)
  ARGV[2]  window length in milliseconds (integer >= 1)

  Returns: {allowed, remaining, resetMs}
    allowed   1 when the request is within the limit, 0 when over it
    remaining requests left in this window (0 when over)
    resetMs   milliseconds until the window ends
]]
local limit = tonumber(ARGV[1])
local window = tonumber(ARGV[2])
local count = redis.call('INCR', KEYS[1])
local ttl = window
if count == 1 then
  redis.call('PEXPIRE', KEYS[1], window)
else
  ttl = redis.call('PTTL', KEYS[1])
  if ttl < 0 then
    -- A counter without expiry would block the caller for good: repair it.
    redis.call('PEXPIRE', KEYS[1], window)
    ttl = window
  end
end
if count > limit then
  return {0, 0, ttl}
end
return {1, limit - count, ttl}
