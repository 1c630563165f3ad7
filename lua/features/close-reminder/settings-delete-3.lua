--[[
  Removes one merchant's close-reminder settings (reminders not yet sent are
  then skipped when they come due) and bumps the settings version.

  KEYS[1]  settings hash (merchant id -> settings JSON)
  KEYS[2]  merchant index zset
  KEYS[3]  settings version counter
  ARGV[1]  merchant id

  Returns: {removed}
    removed  1 when the merchant had settings, 0 when not (nothing changed)
]]
local settingsKey = KEYS[1]
local indexKey = KEYS[2]
local versionKey = KEYS[3]
local merchantId = ARGV[1]

local removed = redis.call('HDEL', settingsKey, merchantId)
if removed == 1 then
  redis.call('ZREM', indexKey, merchantId)
  redis.call('INCR', versionKey)
end
return {removed}
