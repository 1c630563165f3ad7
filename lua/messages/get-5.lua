--[[
  One message of an account, with its read flag. A message past the
  retention time counts as gone.

  KEYS[1]  inbox zset
  KEYS[2]  bodies hash
  KEYS[3]  idempotency hash
  KEYS[4]  read set
  KEYS[5]  meta hash
  ARGV[1]  the msgId
  ARGV[2]  retention, ms

  Returns: {body, read}; -1 (NOT_FOUND) when the account has no such message
]]
--- @include "includes/server-time-ms"
--- @include "includes/messages-inbox"
local seq = liveSeq(ARGV[1], tonumber(ARGV[2]), serverTimeMs())
if not seq then return -1 end
return {redis.call('HGET', KEYS[2], ARGV[1]) or 'null', readFlag(ARGV[1], seq, readState())}
