--[[
  Deletes one message (the app's delete) with its body, idempotency record,
  expiry and read state. (A later write with the same bizType and outerBizId
  then stores it again; a business system's withdraw, by contrast, keeps the
  key withdrawn: see withdraw-7.lua.)

  KEYS[1]  inbox zset
  KEYS[2]  bodies hash
  KEYS[3]  idempotency hash
  KEYS[4]  read set
  KEYS[5]  meta hash
  KEYS[6]  expiry zset
  KEYS[7]  withdrawn zset
  ARGV[1]  the msgId
  ARGV[2]  retention, ms (an expired message counts as gone)

  Returns: the unread count after; -1 (NOT_FOUND) when the account has no such message
]]
--- @include "platform/includes/server-time-ms"
--- @include "features/messages/includes/messages-inbox"
local msgId = ARGV[1]
local retentionMs = tonumber(ARGV[2])
local now = serverTimeMs()
dropExpired(now)
local seq = liveSeq(msgId, retentionMs, now)
if not seq then return -1 end
removeMessage(msgId, seq)
return metaNumber('unread')
