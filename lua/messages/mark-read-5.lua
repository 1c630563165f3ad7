--[[
  Marks one message read (no-op when it already is).

  KEYS[1]  inbox zset
  KEYS[2]  bodies hash
  KEYS[3]  idempotency hash
  KEYS[4]  read set
  KEYS[5]  meta hash
  ARGV[1]  the msgId

  Returns: {changed, unread}; -1 (NOT_FOUND) when the account has no such message
]]
--- @include "includes/messages-inbox"
local seq = redis.call('ZSCORE', KEYS[1], ARGV[1])
if not seq then return -1 end
if not isUnread(ARGV[1], tonumber(seq)) then return {0, metaNumber('unread')} end
redis.call('SADD', KEYS[4], ARGV[1])
return {1, redis.call('HINCRBY', KEYS[5], 'unread', -1)}
