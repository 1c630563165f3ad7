--[[
  Marks one message read (no-op when it already is).

  KEYS[1]  inbox zset
  KEYS[2]  bodies hash
  KEYS[3]  idempotency hash
  KEYS[4]  read set
  KEYS[5]  meta hash
  ARGV[1]  the msgId
  ARGV[2]  retention, ms (an expired message counts as gone)

  Returns: {changed, unread}; -1 (NOT_FOUND) when the account has no such message
]]
--- @include "includes/server-time-ms"
--- @include "includes/messages-inbox"
local seq = liveSeq(ARGV[1], tonumber(ARGV[2]), serverTimeMs())
if not seq then return -1 end
if not isUnread(ARGV[1], seq) then return {0, metaNumber('unread')} end
redis.call('SADD', KEYS[4], ARGV[1])
redis.call('PEXPIRE', KEYS[4], tonumber(ARGV[2]))
return {1, redis.call('HINCRBY', KEYS[5], 'unread', -1)}
