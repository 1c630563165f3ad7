--[[
  Ends a pending action (the user finished it): its record goes, so its
  reminder, if it comes, writes nothing.

  KEYS[1]  the account's inbox meta hash
  ARGV[1]  pending-action field (pa:<bizType>)

  Returns: 1 when the action was pending, 0 when it was not
]]
local metaKey = KEYS[1]
local pendingField = ARGV[1]
return redis.call('HDEL', metaKey, pendingField)
