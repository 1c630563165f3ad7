--[[
  Marks every message of the account read: the read-all mark moves to the
  last sequence, so the per-message read set can be emptied. Expired
  messages are dropped first, so they are not counted as marked.

  KEYS[1]  inbox zset
  KEYS[2]  bodies hash
  KEYS[3]  idempotency hash
  KEYS[4]  read set
  KEYS[5]  meta hash
  KEYS[6]  expiry zset
  KEYS[7]  withdrawn zset
  ARGV  none

  Returns: how many messages were unread
]]
--- @include "platform/includes/server-time-ms"
--- @include "features/messages/includes/messages-inbox"
dropExpired(serverTimeMs())
local unread = metaNumber('unread')
redis.call('HSET', metaKey, 'readUpTo', string.format('%d', metaNumber('seq')), 'unread', 0)
redis.call('DEL', readKey)
return unread
