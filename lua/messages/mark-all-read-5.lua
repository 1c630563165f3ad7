--[[
  Marks every message of the account read: the read-all mark moves to the
  last sequence, so the per-message read set can be emptied.

  KEYS[1]  inbox zset
  KEYS[2]  bodies hash
  KEYS[3]  idempotency hash
  KEYS[4]  read set
  KEYS[5]  meta hash
  ARGV  none

  Returns: how many messages were unread
]]
--- @include "includes/messages-inbox"
local unread = metaNumber('unread')
redis.call('HSET', KEYS[5], 'readUpTo', string.format('%d', metaNumber('seq')), 'unread', 0)
redis.call('DEL', KEYS[4])
return unread
