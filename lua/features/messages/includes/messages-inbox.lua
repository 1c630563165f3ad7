-- Shared piece of the message-center scripts, inlined by the script loader.
-- Every inbox script takes the same seven keys, all under the account's hash tag:
--   KEYS[1] inbox     zset  msgId -> sequence (the account's server sequence: Redis ms * 1000,
--                           kept strictly increasing; it orders pulls and dates each message)
--   KEYS[2] bodies    hash  msgId -> message JSON (with "k": its idempotency field, or "")
--   KEYS[3] idem      hash  bizType | outerBizId -> msgId
--   KEYS[4] read      set   msgIds read above the read-all mark
--   KEYS[5] meta      hash  seq (last sequence), unread, readUpTo (read-all mark),
--                           bcast (last broadcast taken in), pa:<bizType> (pending actions)
--   KEYS[6] expiry    zset  msgId -> expiresAt (ms, Redis clock), only for messages written with one
--   KEYS[7] withdrawn zset  bizType | outerBizId -> when it was withdrawn (ms, Redis clock)
-- Invariants: unread = the messages with sequence > readUpTo that are not in `read`;
-- no message in `inbox` has an expiresAt at or before the clock of the last script that ran
-- dropExpired; no idempotency field is both in `idem` and in `withdrawn`.

--- @include "features/messages/includes/retention"
local inboxKey = KEYS[1]
local bodiesKey = KEYS[2]
local idemKey = KEYS[3]
local readKey = KEYS[4]
local metaKey = KEYS[5]
local expiryKey = KEYS[6]
local withdrawnKey = KEYS[7]

-- Messages removed so far by this script call (removeMessage counts them).
local removals = 0

local function metaNumber(field)
  return tonumber(redis.call('HGET', metaKey, field) or '0')
end

local function isUnread(id, seq)
  return seq > metaNumber('readUpTo') and redis.call('SISMEMBER', readKey, id) == 0
end

-- Stores one message; returns its id (its sequence, as a string) and the unread count after it.
-- expiresAt: ms, or nil for none.
-- The sequence is never below the Redis clock in microseconds and always above the last one (the
-- rule of includes/monotonic-counter); it and the unread count are read and written together, one
-- HMGET and one HSET of meta.
local function addMessage(body, idemField, now, expiresAt)
  local last, unread = unpack(redis.call('HMGET', metaKey, 'seq', 'unread'))
  local seq = math.max((tonumber(last) or 0) + 1, now * 1000)
  unread = (tonumber(unread) or 0) + 1
  local id = string.format('%d', seq)
  redis.call('ZADD', inboxKey, seq, id)
  redis.call('HSET', bodiesKey, id, body)
  if idemField ~= '' then redis.call('HSET', idemKey, idemField, id) end
  if expiresAt then redis.call('ZADD', expiryKey, expiresAt, id) end
  redis.call('HSET', metaKey, 'seq', string.format('%.0f', seq), 'unread', string.format('%d', unread))
  return id, unread
end

-- Removes one message with its body, its idempotency record, its expiry and its read state.
local function removeMessage(id, seq)
  removals = removals + 1
  if isUnread(id, seq) then
    redis.call('HINCRBY', metaKey, 'unread', -1)
  else
    redis.call('SREM', readKey, id)
  end
  local body = redis.call('HGET', bodiesKey, id)
  if body then
    local ok, decoded = pcall(cjson.decode, body)
    if ok and type(decoded) == 'table' and type(decoded.k) == 'string' and decoded.k ~= '' then
      if redis.call('HGET', idemKey, decoded.k) == id then redis.call('HDEL', idemKey, decoded.k) end
    end
  end
  redis.call('ZREM', inboxKey, id)
  redis.call('HDEL', bodiesKey, id)
  redis.call('ZREM', expiryKey, id)
end

-- Removes every message whose own expiry has come. Each message is removed once, so the work
-- over an inbox's life is one removal per expiring message, and the unread count stays exact.
local function dropExpired(now)
  repeat
    local due = redis.call('ZRANGEBYSCORE', expiryKey, '-inf', string.format('%d', now), 'LIMIT', 0, 100)
    for _, id in ipairs(due) do
      local seq = redis.call('ZSCORE', inboxKey, id)
      if seq then removeMessage(id, tonumber(seq)) else redis.call('ZREM', expiryKey, id) end
    end
  until #due < 100
end

-- The oldest sequence still within retention.
local function retentionFloor(now, retentionMs)
  return (now - retentionMs) * 1000
end

-- Drops up to 100 messages past the retention time.
local function trimExpired(now, retentionMs)
  dropOld(inboxKey, retentionFloor(now, retentionMs), 100, removeMessage)
end

-- Retention: drops expired messages, then the oldest beyond maxCount; at most 100 of each per call.
local function trim(now, maxCount, retentionMs)
  trimExpired(now, retentionMs)
  dropExcess(inboxKey, maxCount, 100, removeMessage)
end

-- Withdrawal records last as long as a message would (the retention time, the newest maxCount).
local function trimWithdrawn(now, maxCount, retentionMs)
  redis.call('ZREMRANGEBYSCORE', withdrawnKey, '-inf', '(' .. string.format('%d', now - retentionMs))
  local excess = redis.call('ZCARD', withdrawnKey) - maxCount
  if excess > 0 then redis.call('ZREMRANGEBYRANK', withdrawnKey, 0, excess - 1) end
end

-- An inactive account's keys go away by themselves after the retention time.
local function touch(retentionMs)
  for _, key in ipairs({inboxKey, bodiesKey, idemKey, readKey, metaKey, expiryKey, withdrawnKey}) do
    redis.call('PEXPIRE', key, retentionMs)
  end
end

-- The sequence of a message that exists, is within retention and has not reached its expiry, else nil.
local function liveSeq(id, retentionMs, now)
  local seq = redis.call('ZSCORE', inboxKey, id)
  if not seq or tonumber(seq) < retentionFloor(now, retentionMs) then return nil end
  local expiresAt = redis.call('ZSCORE', expiryKey, id)
  if expiresAt and tonumber(expiresAt) <= now then return nil end
  return tonumber(seq)
end

-- A message's read flag (1 read, 0 unread). The caller reads the read-all mark, and whether the
-- read set exists, once for a whole page instead of once per message.
local function readFlag(id, seq, readUpTo, anyRead)
  if seq <= readUpTo or (anyRead and redis.call('SISMEMBER', readKey, id) == 1) then return 1 end
  return 0
end

-- What readFlag needs, read once.
local function readState()
  return metaNumber('readUpTo'), redis.call('EXISTS', readKey) == 1
end
