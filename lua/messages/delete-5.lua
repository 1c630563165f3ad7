--[[
  Deletes one message with its body, idempotency record and read state.
  (A later write with the same bizType and outerBizId then stores it again.)

  KEYS[1]  inbox zset
  KEYS[2]  bodies hash
  KEYS[3]  idempotency hash
  KEYS[4]  read set
  KEYS[5]  meta hash
  ARGV[1]  the msgId
  ARGV[2]  retention, ms (an expired message counts as gone)

  Returns: the unread count after; -1 (NOT_FOUND) when the account has no such message
]]
--- @include "includes/server-time-ms"
--- @include "includes/messages-inbox"
local seq = liveSeq(ARGV[1], tonumber(ARGV[2]), serverTimeMs())
if not seq then return -1 end
removeMessage(ARGV[1], seq)
return metaNumber('unread')
