--[[
  Stores one merchant's close-reminder settings and bumps the settings
  version, which every instance polls to drop what it cached.

  KEYS[1]  settings hash (merchant id -> settings JSON)
  KEYS[2]  merchant index zset (all scores 0: ordered by id)
  KEYS[3]  settings version counter
  ARGV[1]  merchant id
  ARGV[2]  the settings as JSON, without updatedAt (added here, Redis clock)

  Returns: {created, updatedAt}
    created  1 new merchant, 0 replaced
]]
--- @include "platform/includes/server-time-ms"
local settingsKey = KEYS[1]
local indexKey = KEYS[2]
local versionKey = KEYS[3]
local merchantId = ARGV[1]
local settings = cjson.decode(ARGV[2])

local now = serverTimeMs()
settings.updatedAt = now
local created = redis.call('HSET', settingsKey, merchantId, cjson.encode(settings))
redis.call('ZADD', indexKey, 0, merchantId)
redis.call('INCR', versionKey)
return {created, now}
