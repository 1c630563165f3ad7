-- Shared piece of the message-center scripts, inlined by the script loader.
-- Every inbox script takes the same five keys, all under the account's hash tag:
--   KEYS[1] inbox   zset  msgId -> sequence (the account's server sequence: Redis ms * 1000,
--                         kept strictly increasing; it orders pulls and dates each message)
--   KEYS[2] bodies  hash  msgId -> message JSON (with "k": its idempotency field, or "")
--   KEYS[3] idem    hash  bizType | outerBizId -> msgId
--   KEYS[4] read    set   msgIds read above the read-all mark
--   KEYS[5] meta    hash  seq (last sequence), unread, readUpTo (read-all mark),
--                         bcast (last broadcast taken in), pa:<bizType> (pending actions)
-- Invariant: unread = the messages with sequence > readUpTo that are not in `read`.

local function metaNumber(field)
  return tonumber(redis.call('HGET', KEYS[5], field) or '0')
end

-- The next sequence: never below the Redis clock in microseconds, always above the last one.
local function nextSeq(now)
  local s = math.max(metaNumber('seq') + 1, now * 1000)
  redis.call('HSET', KEYS[5], 'seq', string.format('%d', s))
  return s
end

local function isUnread(id, seq)
  return seq > metaNumber('readUpTo') and redis.call('SISMEMBER', KEYS[4], id) == 0
end

-- Stores one message; returns its id (its sequence, as a string).
local function addMessage(body, idemField, now)
  local seq = nextSeq(now)
  local id = string.format('%d', seq)
  redis.call('ZADD', KEYS[1], seq, id)
  redis.call('HSET', KEYS[2], id, body)
  if idemField ~= '' then redis.call('HSET', KEYS[3], idemField, id) end
  redis.call('HINCRBY', KEYS[5], 'unread', 1)
  return id
end

-- Removes one message with its body, its idempotency record and its read state.
local function removeMessage(id, seq)
  if isUnread(id, seq) then
    redis.call('HINCRBY', KEYS[5], 'unread', -1)
  else
    redis.call('SREM', KEYS[4], id)
  end
  local body = redis.call('HGET', KEYS[2], id)
  if body then
    local ok, decoded = pcall(cjson.decode, body)
    if ok and type(decoded) == 'table' and type(decoded.k) == 'string' and decoded.k ~= '' then
      if redis.call('HGET', KEYS[3], decoded.k) == id then redis.call('HDEL', KEYS[3], decoded.k) end
    end
  end
  redis.call('ZREM', KEYS[1], id)
  redis.call('HDEL', KEYS[2], id)
end

-- The oldest sequence still within retention.
local function retentionFloor(now, retentionMs)
  return (now - retentionMs) * 1000
end

-- Drops up to 100 messages past the retention time.
local function trimExpired(now, retentionMs)
  local expired = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', '(' .. string.format('%d', retentionFloor(now, retentionMs)), 'WITHSCORES', 'LIMIT', 0, 100)
  for i = 1, #expired, 2 do removeMessage(expired[i], tonumber(expired[i + 1])) end
end

-- Retention: drops expired messages, then the oldest beyond maxCount; at most 100 of each per call.
local function trim(now, maxCount, retentionMs)
  trimExpired(now, retentionMs)
  local excess = redis.call('ZCARD', KEYS[1]) - maxCount
  if excess > 0 then
    local oldest = redis.call('ZRANGE', KEYS[1], 0, math.min(excess, 100) - 1, 'WITHSCORES')
    for i = 1, #oldest, 2 do removeMessage(oldest[i], tonumber(oldest[i + 1])) end
  end
end

-- An inactive account's keys go away by themselves after the retention time.
local function touch(retentionMs)
  for i = 1, 5 do redis.call('PEXPIRE', KEYS[i], retentionMs) end
end

-- The sequence of a message that exists and is within retention, else nil.
local function liveSeq(id, retentionMs, now)
  local seq = redis.call('ZSCORE', KEYS[1], id)
  if not seq or tonumber(seq) < retentionFloor(now, retentionMs) then return nil end
  return tonumber(seq)
end

-- A message's read flag (1 read, 0 unread). The caller reads the read-all mark, and whether the
-- read set exists, once for a whole page instead of once per message.
local function readFlag(id, seq, readUpTo, anyRead)
  if seq <= readUpTo or (anyRead and redis.call('SISMEMBER', KEYS[4], id) == 1) then return 1 end
  return 0
end

-- What readFlag needs, read once.
local function readState()
  return metaNumber('readUpTo'), redis.call('EXISTS', KEYS[4]) == 1
end
