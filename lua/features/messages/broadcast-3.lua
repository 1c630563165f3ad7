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
  ARGV[4]  the caller's request id ('' for none): a broadcast made under it before, while it is kept, is
           answered again and nothing is written (meta fields rq:<request id> -> id and id:<id> -> request id)

  Returns: {id, duplicate}: the broadcast's sequence (also its id), and 1 when ARGV[4] named an earlier one

  Durable: messages
]]
--- @include "platform/includes/server-time-ms"
--- @include "platform/includes/monotonic-counter"
--- @include "features/messages/includes/retention"
local streamKey = KEYS[1]
local bodiesKey = KEYS[2]
local metaKey = KEYS[3]
local body = ARGV[1]
local retentionMs = tonumber(ARGV[2])
local maxKept = tonumber(ARGV[3])
local requestId = ARGV[4] or ''
if requestId ~= '' then
  local earlier = redis.call('HGET', metaKey, 'rq:' .. requestId)
  if earlier then
    return {earlier, 1}
  end
end
local now = serverTimeMs()
local seq, id = nextCounterAtLeastClock(metaKey, 'seq', nil, now * 1000)
redis.call('ZADD', streamKey, seq, id)
redis.call('HSET', bodiesKey, id, body)
if requestId ~= '' then
  redis.call('HSET', metaKey, 'rq:' .. requestId, id, 'id:' .. id, requestId)
end
local function drop(old)
  redis.call('ZREM', streamKey, old)
  redis.call('HDEL', bodiesKey, old)
  local rq = redis.call('HGET', metaKey, 'id:' .. old)
  if rq then
    redis.call('HDEL', metaKey, 'id:' .. old, 'rq:' .. rq)
  end
end
dropOld(streamKey, (now - retentionMs) * 1000, 100, drop)
dropExcess(streamKey, maxKept, 100, drop)
return {id, 0}
