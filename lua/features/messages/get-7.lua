--[[
  One message of an account, with its read flag. A message past the
  retention time or its own expiry counts as gone. Writes nothing.

  KEYS[1]  inbox zset
  KEYS[2]  bodies hash
  KEYS[3]  idempotency hash
  KEYS[4]  read set
  KEYS[5]  meta hash
  KEYS[6]  expiry zset
  KEYS[7]  withdrawn zset
  ARGV[1]  the msgId
  ARGV[2]  retention, ms

  Returns: {body, read}; -1 (NOT_FOUND) when the account has no such message
]]
--- @include "platform/includes/server-time-ms"
--- @include "features/messages/includes/messages-inbox"
local msgId = ARGV[1]
local retentionMs = tonumber(ARGV[2])
local seq = liveSeq(msgId, retentionMs, serverTimeMs())
if not seq then return -1 end
return {redis.call('HGET', bodiesKey, msgId) or 'null', readFlag(msgId, seq, readState())}
