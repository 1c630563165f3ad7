--[[
  Records one broadcast to every account: a single write, whatever the number
  of accounts. Accounts take it into their inbox on their next pull
  (sync-broadcasts). Keeps at most ARGV[3] broadcasts, none older than the
  retention time.

  KEYS[1]  broadcast stream zset (broadcast id -> sequence, Redis ms * 1000, increasing)
  KEYS[2]  broadcast bodies hash (broadcast id -> message JSON)
  KEYS[3]  broadcast meta hash (seq)
  ARGV[1]  message JSON
  ARGV[2]  retention, ms
  ARGV[3]  most broadcasts kept

  Returns: the broadcast's sequence (also its id)
]]
--- @include "includes/server-time-ms"
--- @include "includes/monotonic-counter"
local now = serverTimeMs()
local seq, id = nextCounterAtLeastClock(KEYS[3], 'seq', nil, now * 1000)
redis.call('ZADD', KEYS[1], seq, id)
redis.call('HSET', KEYS[2], id, ARGV[1])
local function drop(ids)
  for _, old in ipairs(ids) do
    redis.call('ZREM', KEYS[1], old)
    redis.call('HDEL', KEYS[2], old)
  end
end
drop(redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', '(' .. string.format('%d', (now - tonumber(ARGV[2])) * 1000), 'LIMIT', 0, 100))
local excess = redis.call('ZCARD', KEYS[1]) - tonumber(ARGV[3])
if excess > 0 then drop(redis.call('ZRANGE', KEYS[1], 0, math.min(excess, 100) - 1)) end
return id
