--[[
  Marks one message read (no-op when it already is).

  KEYS[1]  inbox zset
  KEYS[2]  bodies hash
  KEYS[3]  idempotency hash
  KEYS[4]  read set
  KEYS[5]  meta hash
  KEYS[6]  expiry zset
  KEYS[7]  withdrawn zset
  ARGV[1]  the msgId
  ARGV[2]  retention, ms (an expired message counts as gone)

  Returns: {changed, unread}; -1 (NOT_FOUND) when the account has no such message
]]
--- @include "platform/includes/server-time-ms"
--- @include "features/messages/includes/messages-inbox"
local msgId = ARGV[1]
local retentionMs = tonumber(ARGV[2])
local now = serverTimeMs()
dropExpired(now)
local seq = liveSeq(msgId, retentionMs, now)
if not seq then return -1 end
if not isUnread(msgId, seq) then return {0, metaNumber('unread')} end
redis.call('SADD', readKey, msgId)
redis.call('PEXPIRE', readKey, retentionMs)
return {1, redis.call('HINCRBY', metaKey, 'unread', -1)}
